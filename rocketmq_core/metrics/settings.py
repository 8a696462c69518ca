"""The RIP-46 metrics settings (METRICS.md §1.1), shared by the broker and the name server.

Pure: the keys as a settings mixin, and ``MetricsPlan``, what they ask for once parsed
and checked (a ConfigError naming the key and the fix otherwise).
"""

from __future__ import annotations

import dataclasses
from enum import Enum

from ..config import setting
from ..errors import ConfigError


class ExporterType(Enum):
    DISABLE = 0
    OTLP_GRPC = 1
    PROM = 2
    LOG = 3


@dataclasses.dataclass(frozen=True)
class MetricsPlan:
    """What the metrics settings ask for, parsed."""

    exporter: ExporterType
    prom_host: str
    prom_port: int
    grpc_target: str
    grpc_headers: dict[str, str]
    grpc_timeout: float  # seconds
    grpc_interval: float  # seconds
    logging_interval: float  # seconds
    labels: dict[str, str]
    in_delta: bool
    cardinality_limit: int

    @property
    def enabled(self) -> bool:
        return self.exporter is not ExporterType.DISABLE

    def base_labels(self, node_type: str, node_id: str, cluster: str | None) -> dict[str, str]:
        """The labels of every series: node, metricsLabel pairs, aggregation when delta."""
        labels = {"cluster": cluster} if cluster is not None else {}
        labels.update(node_type=node_type, node_id=node_id)
        labels.update(self.labels)
        if self.in_delta:
            labels["aggregation"] = "delta"
        return labels


@dataclasses.dataclass
class MetricsSettings:
    metrics_exporter_type: str = setting(
        "DISABLE", help="DISABLE, PROM (serve /metrics), OTLP_GRPC (push) or LOG; or 0-3"
    )
    metrics_prom_exporter_host: str = setting(
        "", help="address the PROM endpoint binds; empty: brokerIP1 (the name server: 0.0.0.0)"
    )
    metrics_prom_exporter_port: int = setting(
        5557, minimum=0, maximum=65535, help="PROM port (0: any free port)"
    )
    metrics_grpc_exporter_target: str = setting(
        "", help="OTLP_GRPC collector, host:port or http(s)://host:port (https:// when bare)"
    )
    metrics_grpc_exporter_header: str = setting(
        "", help="OTLP_GRPC headers, key:value,key:value", secret=True
    )
    metric_grpc_exporter_time_out_in_mills: int = setting(
        3000, minimum=1, help="ms one OTLP_GRPC export may take"
    )
    metric_grpc_exporter_interval_in_mills: int = setting(
        60_000, minimum=1, help="ms between OTLP_GRPC exports"
    )
    metric_logging_exporter_interval_in_mills: int = setting(
        10_000, minimum=1, help="ms between LOG exports"
    )
    metrics_label: str = setting("", help="labels added to every series, key:value,key:value")
    metrics_in_delta: bool = setting(
        False, help="OTLP_GRPC and LOG export deltas; every series gets aggregation=delta"
    )
    metrics_otel_cardinality_limit: int = setting(
        50_000, minimum=1, help="the most series one metric exports"
    )

    def metrics_plan(self, default_prom_host: str) -> MetricsPlan:
        """The metrics settings parsed; ConfigError naming the key when one cannot work."""
        exporter = parse_exporter_type(self.metrics_exporter_type)
        target = self.metrics_grpc_exporter_target.strip()
        if exporter is ExporterType.OTLP_GRPC and not target:
            raise ConfigError(
                "metricsExporterType=OTLP_GRPC needs metricsGrpcExporterTarget"
                " (the collector, like http://127.0.0.1:4317)"
            )
        if target and not target.startswith("http"):
            target = "https://" + target  # as RocketMQ: a bare host:port means TLS
        return MetricsPlan(
            exporter=exporter,
            prom_host=self.metrics_prom_exporter_host.strip() or default_prom_host,
            prom_port=self.metrics_prom_exporter_port,
            grpc_target=target,
            grpc_headers=parse_pairs(
                self.metrics_grpc_exporter_header, "metricsGrpcExporterHeader"
            ),
            grpc_timeout=self.metric_grpc_exporter_time_out_in_mills / 1000,
            grpc_interval=self.metric_grpc_exporter_interval_in_mills / 1000,
            logging_interval=self.metric_logging_exporter_interval_in_mills / 1000,
            labels=parse_pairs(self.metrics_label, "metricsLabel"),
            in_delta=self.metrics_in_delta,
            cardinality_limit=self.metrics_otel_cardinality_limit,
        )


def parse_exporter_type(text: str) -> ExporterType:
    value = text.strip()
    if value.isdigit() and int(value) < len(ExporterType):
        return ExporterType(int(value))
    try:
        return ExporterType[value.upper()]
    except KeyError:
        names = ", ".join(kind.name for kind in ExporterType)
        raise ConfigError(
            f"metricsExporterType must be one of {names} (or 0-3), not {text!r}"
        ) from None


def parse_pairs(text: str, key: str) -> dict[str, str]:
    """``k:v,k:v`` as a dict; ConfigError naming ``key`` for an item without a colon."""
    pairs: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, colon, value = item.partition(":")
        if not colon or not name.strip():
            raise ConfigError(f"{key} item {item.strip()!r} is not key:value (k:v,k:v)")
        pairs[name.strip()] = value.strip()
    return pairs
