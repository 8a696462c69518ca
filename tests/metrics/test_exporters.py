"""LOG and OTLP_GRPC exports of a real broker (the collector is a real OTLP gRPC server,
opentelemetry-proto's MetricsService on grpcio, in the test), and the dead-letter count."""

from __future__ import annotations

import logging
import threading
from concurrent import futures

import anyio
import grpc
import pytest
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)

from rocketmq_core.broker.app import Broker
from rocketmq_core.protocol.codes import RequestCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.headers import ConsumerSendMsgBackRequestHeader
from rocketmq_core.protocol.message import iter_records
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.testing.broker import broker_config
from tests.broker.wire import pull_request, send_request

from .conftest import scrape, value

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client(plugin_host):
    async with RemotingClient(plugin_host.registry.transports.get("tcp")) as remoting:
        yield remoting


async def send_and_pull(client, broker, count: int = 3) -> list:
    for _ in range(count):
        sent = await client.invoke(broker.address, send_request())
        assert sent.code == 0, sent.remark
    pulled = await client.invoke(broker.address, pull_request())
    return list(iter_records(pulled.body))


async def test_a_dead_lettered_message_is_counted(tmp_path, plugin_host, client):
    config = broker_config(tmp_path, metrics_exporter_type="PROM", metrics_prom_exporter_port=0)
    async with Broker.serving(config, host=plugin_host) as broker:
        records = await send_and_pull(client, broker, 1)
        back = ConsumerSendMsgBackRequestHeader(
            offset=records[0].commit_log_offset,
            group="CG",
            delay_level=-1,  # straight to DLQ
        )
        request = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, back.to_ext_fields())
        answer = await client.invoke(broker.address, request)
        assert answer.code == 0, answer.remark
        samples = await anyio.to_thread.run_sync(scrape, broker.metrics_address)
    labels = {"consumer_group": "CG", "topic": "Orders", "is_system": "false"}
    assert value(samples, "rocketmq_send_to_dlq_messages_total", **labels) == 1
    # the DLQ and retry topics are not counted as incoming messages, as RocketMQ
    dead_letters = [s for s in samples if s.labels.get("topic", "").startswith("%DLQ%")]
    assert dead_letters == []


async def test_log_mode_logs_each_series(tmp_path, plugin_host, client, caplog):
    caplog.set_level(logging.INFO, logger="rocketmq.metrics")
    config = broker_config(
        tmp_path, metrics_exporter_type="LOG", metric_logging_exporter_interval_in_mills=100
    )
    async with Broker.serving(config, host=plugin_host) as broker:
        assert broker.metrics_address is None  # LOG serves nothing
        await send_and_pull(client, broker, 3)
        with anyio.fail_after(10):
            while not any("Orders" in r.getMessage() for r in caplog.records):
                await anyio.sleep(0.05)
        await anyio.sleep(0.3)  # a whole export after the sends
    lines = [r.getMessage() for r in caplog.records if r.name == "rocketmq.metrics"]
    messages_in = [line for line in lines if line.startswith("metric rocketmq_messages_in_total{")]
    assert messages_in, lines
    assert 'topic="Orders"' in messages_in[-1] and 'node_type="broker"' in messages_in[-1]
    assert messages_in[-1].endswith(" 3")
    sizes = [line for line in lines if line.startswith("metric rocketmq_message_size{")]
    assert sizes and "count=3 " in sizes[-1]


class Collector(metrics_service_pb2_grpc.MetricsServiceServicer):
    """An OTLP metrics receiver: keeps every export request and its metadata."""

    def __init__(self) -> None:
        self.requests: list[metrics_service_pb2.ExportMetricsServiceRequest] = []
        self.metadata: list[dict[str, str]] = []
        self.lock = threading.Lock()

    def Export(self, request, context):  # the gRPC method's name
        with self.lock:
            self.requests.append(request)
            self.metadata.append(dict(context.invocation_metadata()))
        return metrics_service_pb2.ExportMetricsServiceResponse()

    def points(self, name: str) -> list:
        with self.lock:
            return [
                (metric, point)
                for request in self.requests
                for resource in request.resource_metrics
                for scope in resource.scope_metrics
                for metric in scope.metrics
                if metric.name == name
                for point in (*metric.sum.data_points, *metric.histogram.data_points)
            ]


@pytest.fixture
def collector():
    receiver = Collector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(receiver, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    receiver.target = f"http://127.0.0.1:{port}"
    yield receiver
    server.stop(grace=None)


def attributes(point) -> dict[str, str]:
    return {kv.key: kv.value.string_value for kv in point.attributes}


@pytest.mark.parametrize("delta", [False, True])
async def test_otlp_pushes_to_the_collector(tmp_path, plugin_host, client, collector, delta):
    config = broker_config(
        tmp_path,
        metrics_exporter_type="OTLP_GRPC",
        metrics_grpc_exporter_target=collector.target,
        metrics_grpc_exporter_header="x-tenant:team-a",
        metric_grpc_exporter_interval_in_mills=200,
        metrics_in_delta=delta,
    )
    async with Broker.serving(config, host=plugin_host) as broker:
        await send_and_pull(client, broker, 3)
        exports = len(collector.requests)
        with anyio.fail_after(15):  # two whole exports after the sends
            while len(collector.requests) < exports + 3:
                await anyio.sleep(0.05)
    exported = [
        (metric, point)
        for metric, point in collector.points("rocketmq_messages_in_total")
        if attributes(point).get("topic") == "Orders"
    ]
    counts = [max(point.as_int, point.as_double) for _, point in exported]
    metric, point = exported[-1]
    assert collector.metadata[0]["x-tenant"] == "team-a"
    labels = attributes(point)
    assert labels["cluster"] == "DefaultCluster" and labels["node_id"] == "broker-a"
    assert labels["node_type"] == "broker" and labels["message_type"] == "normal"
    assert metric.sum.is_monotonic
    if delta:  # each export says what came in since the one before
        assert labels["aggregation"] == "delta"
        assert metric.sum.aggregation_temporality == 1  # AGGREGATION_TEMPORALITY_DELTA
        assert sum(counts) == 3 and counts[-1] == 0
    else:  # each export says what came in since the start
        assert "aggregation" not in labels
        assert metric.sum.aggregation_temporality == 2  # AGGREGATION_TEMPORALITY_CUMULATIVE
        assert counts == sorted(counts) and counts[-1] == 3
    sizes = [
        point.count
        for _, point in collector.points("rocketmq_message_size")
        if attributes(point).get("topic") == "Orders"
    ]
    assert (sum(sizes) if delta else sizes[-1]) == 3
