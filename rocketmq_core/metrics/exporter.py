"""Runs one server's metrics as ``metricsExporterType`` says: PROM, OTLP_GRPC or LOG.

The OpenTelemetry SDK holds the instruments and does the exporting; the packages are
imported only when an exporter is on, and a missing one is a one-line ConfigError.
Collections run on the event loop (the servers' tables and stores belong to it): PROM
collects on each scrape, OTLP_GRPC and LOG every interval; only the push to a collector
runs in a worker thread.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

import anyio
from anyio.abc import TaskStatus

from ..errors import ConfigError
from .histograms import HistogramSeries, with_histograms
from .settings import ExporterType, MetricsPlan

log = logging.getLogger("rocketmq.metrics")

INSTALL_HINT = "pip install 'rocketmq-core[metrics]'"


class MeterSource(Protocol):
    """What a server measures: its instruments, histograms and pre-collection work."""

    scope: str

    def register(self, meter: Any, base: Mapping[str, str]) -> None: ...

    def histograms(self) -> list[HistogramSeries]: ...

    async def refresh(self) -> None: ...

    def attach(self) -> None: ...


def require_packages(plan: MetricsPlan) -> None:
    """ConfigError with the install command when the exporter's packages are missing."""
    modules = ["opentelemetry.sdk.metrics"]
    if plan.exporter is ExporterType.PROM:
        modules += ["opentelemetry.exporter.prometheus", "prometheus_client", "h11"]
    elif plan.exporter is ExporterType.OTLP_GRPC:
        modules.append("opentelemetry.exporter.otlp.proto.grpc.metric_exporter")
    for module in modules:
        try:
            __import__(module)
        except ImportError as exc:
            raise ConfigError(
                f"metricsExporterType={plan.exporter.name} needs the package of {module}"
                f" ({exc.name} is missing): {INSTALL_HINT}"
            ) from None


class MetricsExporter:
    """The meter provider of one server and the task that exports what it measures."""

    def __init__(self, plan: MetricsPlan, source: MeterSource, base: Mapping[str, str]) -> None:
        require_packages(plan)
        self.plan = plan
        self.source = source
        self.base = dict(base)
        self.address: str | None = None  # the PROM endpoint, once bound
        self._provider: Any = None
        self._reader: Any = None
        self._scope = anyio.CancelScope()

    def stop(self) -> None:
        """End ``run`` (before the server's tables and store close)."""
        self._scope.cancel()

    def _temporality(self) -> dict[type, Any]:
        from opentelemetry.sdk.metrics import Counter, Histogram, ObservableCounter
        from opentelemetry.sdk.metrics.export import AggregationTemporality

        kind = (
            AggregationTemporality.DELTA
            if self.plan.in_delta
            else AggregationTemporality.CUMULATIVE
        )
        return {Counter: kind, ObservableCounter: kind, Histogram: kind}

    def _start_provider(self) -> None:
        from opentelemetry.sdk.metrics import MeterProvider, ObservableCounter, ObservableGauge
        from opentelemetry.sdk.resources import Resource

        limit = self.plan.cardinality_limit  # our instruments are all observable
        limits: dict[Any, int] = {ObservableCounter: limit, ObservableGauge: limit}
        if self.plan.exporter is ExporterType.PROM:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from prometheus_client import CollectorRegistry

            exporter = self

            class _Reader(PrometheusMetricReader):
                """Prometheus reader whose collections carry our histograms too."""

                def _receive_metrics(
                    self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any
                ) -> None:
                    super()._receive_metrics(exporter._with_histograms(metrics_data, False))

            self.registry = CollectorRegistry(auto_describe=False)
            self._reader = _Reader(registry=self.registry, cardinality_limits=limits)
        else:
            from opentelemetry.sdk.metrics.export import InMemoryMetricReader

            self._reader = InMemoryMetricReader(
                preferred_temporality=self._temporality(), cardinality_limits=limits
            )
        resource = Resource.create({"service.name": f"rocketmq-{self.base.get('node_type', '')}"})
        self._provider = MeterProvider(metric_readers=[self._reader], resource=resource)
        self.source.register(self._provider.get_meter(self.source.scope), self.base)

    def _with_histograms(self, metrics_data: Any, delta: bool) -> Any:
        return with_histograms(
            metrics_data, self.source.scope, self.source.histograms(), self.base, delta
        )

    # --- running ----------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[str | None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Export until ``stop``; reports the PROM endpoint's address (None otherwise)."""
        self._start_provider()
        try:
            with self._scope:
                if self.plan.exporter is ExporterType.PROM:
                    from .prom_http import serve_metrics

                    async with anyio.create_task_group() as group:
                        self.address = await group.start(
                            serve_metrics, self.plan.prom_host, self.plan.prom_port, self.render
                        )
                        log.info("metrics served at http://%s/metrics", self.address)
                        task_status.started(self.address)
                else:
                    task_status.started(None)
                    await self._push_periodically()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._provider.shutdown)

    async def render(self, accept: str) -> tuple[bytes, str]:
        """One scrape: the exposition for an ``Accept`` header, and its content type."""
        from prometheus_client.exposition import choose_encoder

        await self.source.refresh()
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type

    async def collect(self) -> Any:
        """One collection, histograms included (OTLP_GRPC and LOG)."""
        await self.source.refresh()
        data = self._reader.get_metrics_data()
        return self._with_histograms(data, self.plan.in_delta)

    async def _push_periodically(self) -> None:
        if self.plan.exporter is ExporterType.OTLP_GRPC:
            push, interval = self._otlp_push(), self.plan.grpc_interval
        else:
            push, interval = _log_metrics, self.plan.logging_interval
        while True:
            await anyio.sleep(interval)
            data = await self.collect()
            if data is not None:
                await anyio.to_thread.run_sync(push, data)

    def _otlp_push(self) -> Any:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        exporter = OTLPMetricExporter(
            endpoint=self.plan.grpc_target,
            insecure=self.plan.grpc_target.startswith("http://"),
            headers=self.plan.grpc_headers or None,
            timeout=self.plan.grpc_timeout,
            preferred_temporality=self._temporality(),
        )

        def push(data: Any) -> None:
            result = exporter.export(data, timeout_millis=self.plan.grpc_timeout * 1000)
            if result.name != "SUCCESS":
                log.warning("metrics export to %s failed", self.plan.grpc_target)

        return push


def _log_metrics(data: Any) -> None:
    """LOG: one line per series, ``name{labels} value``."""
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    labels = ",".join(f'{k}="{v}"' for k, v in sorted(point.attributes.items()))
                    value = getattr(point, "value", None)
                    if value is None:  # a histogram: its count and sum
                        value = f"count={point.count} sum={point.sum}"
                    log.info("metric %s{%s} %s", metric.name, labels, value)
