"""The name server's series. RocketMQ's name server has no meter; ours serves a few
gauges an operator watches (live brokers, clusters, routed topics, connections) and the
request latency, labelled ``node_type="nameserver"``, under names of our own where
RocketMQ has none (docs/operations.md, "Metrics")."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .histograms import HistogramSeries
from .rpc_latency import RpcLatency

if TYPE_CHECKING:
    from ..namesrv.server import NameServer

SCOPE = "namesrv-meter"


class NamesrvMeter:
    scope = SCOPE

    def __init__(self, namesrv: NameServer) -> None:
        self.namesrv = namesrv
        self.rpc = RpcLatency()

    def attach(self) -> None:
        if self.namesrv.server is not None:
            self.namesrv.server.processors.wrap(self.rpc.timed)

    def register(self, meter: Any, base: Mapping[str, str]) -> None:
        from opentelemetry.metrics import Observation

        def observing(value: Callable[[], float]) -> Any:
            def callback(_options: Any) -> Iterable[Any]:
                return [Observation(value(), dict(base))]

            return [callback]

        routes = self.namesrv.routes
        for name, description, value in (
            ("rocketmq_namesrv_broker_number", "Live brokers", lambda: len(routes.live)),
            ("rocketmq_namesrv_cluster_number", "Clusters", lambda: len(routes.clusters)),
            ("rocketmq_topic_number", "Topics with a route", lambda: len(routes.topic_queues)),
            ("rocketmq_namesrv_connections", "Client connections", self._connections),
        ):
            meter.create_observable_gauge(name, observing(value), description=description)

    def _connections(self) -> float:
        server = self.namesrv.server
        return len(server.connections) if server is not None else 0

    def histograms(self) -> list[HistogramSeries]:
        return [self.rpc.series]

    async def refresh(self) -> None:
        return None
