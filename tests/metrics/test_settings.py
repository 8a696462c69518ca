"""The metrics keys: parsed as RocketMQ parses them, refused in one line when they cannot
work (through the real ``rocketmq broker`` and ``namesrv`` commands), and the histogram
counts the exporters read."""

from __future__ import annotations

import socket
import sys

import anyio
import pytest
from anyio.abc import SocketStream

from rocketmq_core.errors import ConfigError
from rocketmq_core.metrics.histograms import (
    MESSAGE_SIZE_BOUNDS,
    BucketCounts,
    HistogramSeries,
    with_histograms,
)
from rocketmq_core.metrics.rpc_latency import RPC_LATENCY_BOUNDS, RpcLatency
from rocketmq_core.metrics.settings import ExporterType, MetricsSettings
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.connection import Connection
from tests.test_cli_user_errors import assert_one_line_error, broker_conf, namesrv_conf


def plan(**values):
    settings = MetricsSettings()
    for name, value in values.items():
        setattr(settings, name, value)
    return settings.metrics_plan("10.0.0.7")


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("DISABLE", ExporterType.DISABLE),
        ("prom", ExporterType.PROM),
        ("2", ExporterType.PROM),
        ("LOG", ExporterType.LOG),
        ("1", ExporterType.OTLP_GRPC),
        (" 0 ", ExporterType.DISABLE),
    ],
)
def test_exporter_types_by_name_or_number(text, kind):
    target = {"metrics_grpc_exporter_target": "c:4317"} if kind is ExporterType.OTLP_GRPC else {}
    assert plan(metrics_exporter_type=text, **target).exporter is kind


def test_defaults_and_the_parsed_pairs():
    default = plan()
    assert (default.exporter, default.prom_host, default.prom_port) == (
        ExporterType.DISABLE,
        "10.0.0.7",  # blank host: brokerIP1
        5557,
    )
    parsed = plan(
        metrics_grpc_exporter_target="collector:4317",
        metrics_grpc_exporter_header="authorization:Bearer x, tenant:a",
        metrics_label="env:prod,dc:eu-1",
        metrics_in_delta=True,
    )
    assert parsed.grpc_target == "https://collector:4317"  # bare: TLS, as RocketMQ
    assert plan(metrics_grpc_exporter_target="http://c:4317").grpc_target == "http://c:4317"
    assert parsed.grpc_headers == {"authorization": "Bearer x", "tenant": "a"}
    assert parsed.base_labels("broker", "b", "C") == {
        "cluster": "C",
        "node_type": "broker",
        "node_id": "b",
        "env": "prod",
        "dc": "eu-1",
        "aggregation": "delta",
    }


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"metrics_exporter_type": "PROMETHEUS"}, "metricsExporterType must be one of"),
        ({"metrics_exporter_type": "OTLP_GRPC"}, "needs metricsGrpcExporterTarget"),
        ({"metrics_label": "env=prod"}, "metricsLabel item 'env=prod' is not key:value"),
    ],
)
def test_unusable_values_name_the_key(values, needle):
    with pytest.raises(ConfigError, match=needle):
        plan(**values)


def test_a_bad_exporter_type_is_one_line_for_the_broker(rocketmq, tmp_path):
    conf = broker_conf(tmp_path, "metricsExporterType=PROMETHEUS")
    err = assert_one_line_error(rocketmq("broker", "-c", str(conf)), "metricsExporterType")
    assert "DISABLE, OTLP_GRPC, PROM, LOG" in err and "'PROMETHEUS'" in err


def test_a_bad_exporter_type_is_one_line_for_the_name_server(rocketmq, tmp_path):
    conf = namesrv_conf(tmp_path, f"kvConfigPath={tmp_path / 'kv.json'}", "metricsExporterType=9")
    args = ("namesrv", "-c", str(conf), "--listen", "127.0.0.1:0")
    assert_one_line_error(rocketmq(*args), "metricsExporterType", "'9'")


@pytest.mark.parametrize("server", ["broker", "namesrv"])
def test_a_taken_prom_port_is_one_line(rocketmq, tmp_path, server):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = ("metricsExporterType=PROM", f"metricsPromExporterPort={port}")
        if server == "broker":
            conf = broker_conf(tmp_path, f"storePathRootDir={tmp_path / 'store'}", *settings)
            args = ("broker", "-c", str(conf))
        else:
            conf = namesrv_conf(
                tmp_path,
                f"kvConfigPath={tmp_path / 'kv.json'}",
                "metricsPromExporterHost=127.0.0.1",
                *settings,
            )
            args = ("namesrv", "-c", str(conf), "--listen", "127.0.0.1:0")
        assert_one_line_error(
            rocketmq(*args),
            f"metricsPromExporterHost:metricsPromExporterPort 127.0.0.1:{port} cannot be bound",
        )


def test_a_missing_package_is_one_line_with_the_install_command(rocketmq, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.prometheus", None)  # not installed
    conf = broker_conf(
        tmp_path, f"storePathRootDir={tmp_path / 'store'}", "metricsExporterType=PROM"
    )
    assert_one_line_error(
        rocketmq("broker", "-c", str(conf)),
        "metricsExporterType=PROM needs",
        "pip install 'rocketmq-core[metrics]'",
    )


# --- the histogram counts -------------------------------------------------------------------


def test_bucket_counts_are_upper_inclusive_and_delta_points_subtract_the_last_export():
    counts = BucketCounts(MESSAGE_SIZE_BOUNDS)
    counts.add("T", 1024.0)  # on a bound: in that bucket (le)
    counts.add("T", 1025.0, 2)
    counts.add("T", 5 * 1024 * 1024.0)
    histogram = HistogramSeries("rocketmq_message_size", "", "", counts, lambda t: {"topic": t})
    (point,) = histogram.points({"node_type": "broker"}, delta=True)
    assert list(point.bucket_counts) == [1, 2, 0, 0, 0, 0, 1]
    assert (point.count, point.sum, point.min, point.max) == (
        4,
        1024 + 2050 + 5242880,
        1024,
        5242880,
    )
    assert point.attributes == {"node_type": "broker", "topic": "T"}
    counts.add("T", 10.0)
    (later,) = histogram.points({}, delta=True)
    assert list(later.bucket_counts) == [1, 0, 0, 0, 0, 0, 0] and later.sum == 10
    (cumulative,) = histogram.points({}, delta=False)
    assert cumulative.count == 5


def test_histograms_join_the_scope_of_the_collection():
    counts = BucketCounts((1.0,))
    counts.add("k", 0.5)
    skipped = BucketCounts((1.0,))
    skipped.add("retry", 0.5)
    series = [
        HistogramSeries("h", "", "ms", counts, lambda key: {"key": key}),
        HistogramSeries("skipped", "", "", skipped, lambda key: None),  # not exported
    ]
    data = with_histograms(None, "broker-meter", series, {}, delta=False)
    (resource,) = data.resource_metrics
    (scope,) = resource.scope_metrics
    assert scope.scope.name == "broker-meter"
    assert [metric.name for metric in scope.metrics] == ["h"]


async def _answer_later(ctx, request):
    return request.response(body=b"late")


@pytest.mark.anyio
async def test_message_requests_are_timed_one_in_sixteen_and_the_rest_each_time():
    latency = RpcLatency()
    send = latency.timed(lambda ctx, request: b"a finished frame")
    heartbeat = latency.timed(lambda ctx, request: request.response())
    later = latency.timed(_answer_later)
    for _ in range(40):
        send(None, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {}))
    for _ in range(3):
        heartbeat(None, RemotingCommand.request(RequestCode.HEART_BEAT, {}))
    assert (await later(None, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG, {}))).body
    counts = {
        key: sum(row[: len(RPC_LATENCY_BOUNDS) + 1]) for key, row in latency.counts.rows.items()
    }
    assert counts == {
        (RequestCode.SEND_MESSAGE_V2, 0, False): 48,  # sends 1, 17 and 33, each for 16
        (RequestCode.HEART_BEAT, 0, False): 3,
        (RequestCode.GET_ALL_TOPIC_CONFIG, 0, False): 1,  # timed until its answer came
    }
    (point,) = [
        point
        for point in latency.series.points({}, delta=False)
        if point.attributes["request_code"] == "send_message_v2"
    ]
    assert point.attributes == {
        "protocol_type": "remoting",
        "request_code": "send_message_v2",
        "response_code": "success",
        "is_long_polling": "false",
        "result": "success",
    }


@pytest.mark.anyio
async def test_a_request_answered_by_a_callback_is_timed_until_that_answer():
    latency = RpcLatency()
    ours, theirs = socket.socketpair()
    with theirs:
        connection = Connection(await SocketStream.from_socket(ours))
        timed = latency.timed(lambda ctx, request: ctx.connection.answer_later(request))
        request = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG, {})
        waiting = timed(connection.context, request)
        assert latency.counts.rows == {}  # not answered yet: not counted yet
        await anyio.sleep(0.03)
        waiting.answer(request.response(ResponseCode.FLUSH_SLAVE_TIMEOUT))
        await connection.aclose()
    ((key, row),) = latency.counts.rows.items()
    assert key == (RequestCode.GET_ALL_TOPIC_CONFIG, ResponseCode.FLUSH_SLAVE_TIMEOUT, False)
    below_30_ms = sum(
        count for bound, count in zip(RPC_LATENCY_BOUNDS, row, strict=False) if bound < 30
    )
    assert sum(row[: len(RPC_LATENCY_BOUNDS) + 1]) == 1 and below_30_ms == 0
