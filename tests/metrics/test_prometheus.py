"""metricsExporterType=PROM: a real broker and name server serve RocketMQ 5's series over
HTTP, after real sends and a real consumer group, scraped as Prometheus scrapes them."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from rocketmq_core.broker.stats import GROUP_GET_NUMS, GROUP_GET_SIZE, TOPIC_PUT_SIZE
from rocketmq_core.client.message import Message
from rocketmq_core.client.sync import Producer

from .conftest import GROUP, TOPIC, scrape, series, value, wait_for

BROKER = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}
EXTRA = {"env": "test", "region": "eu"}  # metricsLabel=env:test,region:eu
IN = {"topic": TOPIC, "message_type": "normal", "is_system": "false"}
OUT = {"topic": TOPIC, "consumer_group": GROUP, "is_system": "false"}
LAG = {"topic": TOPIC, "consumer_group": GROUP, "is_retry": "false", "is_system": "false"}
STORE = {"storage_type": "local", "storage_medium": "disk"}


def test_the_broker_serves_each_series_with_its_labels_and_values(consumed_then_lagging):
    cluster = consumed_then_lagging
    address = cluster.broker.metrics_address
    broker = cluster.broker
    wait_for(lambda: broker.store.max_offset(TOPIC, 0) + broker.store.max_offset(TOPIC, 1) == 15)
    with Producer("PG-online", cluster.namesrv_address) as producer:
        producer.send(Message(TOPIC, b"x" * 100))  # one more, from a producer still online
        samples = scrape(address)

    every = {**BROKER, **EXTRA, "otel_scope_name": "broker-meter"}
    for sample in samples:
        if sample.name != "target_info":
            assert every.items() <= sample.labels.items(), sample

    # the same counts as the broker's statistics (one count on the send path, read twice)
    stored_bytes = broker.stats.value(TOPIC_PUT_SIZE, TOPIC)
    assert 16 * 200 < stored_bytes < 16 * 400  # 100 body bytes and the properties, each
    assert value(samples, "rocketmq_messages_in_total", **IN) == 16
    assert value(samples, "rocketmq_throughput_in_total", **IN) == stored_bytes
    assert value(samples, "rocketmq_message_size_count", **IN) == 16
    assert value(samples, "rocketmq_message_size_sum", **IN) == stored_bytes
    buckets = {
        s.labels["le"]: s.value for s in series(samples, "rocketmq_message_size_bucket", **IN)
    }
    assert buckets == {
        "1024.0": 16,
        "4096.0": 16,
        "524288.0": 16,
        "1048576.0": 16,
        "2097152.0": 16,
        "4194304.0": 16,
        "+Inf": 16,
    }
    pulled = broker.stats.value(GROUP_GET_NUMS, f"{TOPIC}@{GROUP}")
    assert pulled >= 10
    assert value(samples, "rocketmq_messages_out_total", **OUT) == pulled
    pulled_bytes = broker.stats.value(GROUP_GET_SIZE, f"{TOPIC}@{GROUP}")
    assert value(samples, "rocketmq_throughput_out_total", **OUT) == pulled_bytes > 0

    assert value(samples, "rocketmq_consumer_lag_messages", **LAG) == 6
    assert value(samples, "rocketmq_consumer_ready_messages", **LAG) == 6
    assert value(samples, "rocketmq_consumer_inflight_messages", **LAG) == 0
    assert value(samples, "rocketmq_consumer_lag_latency_milliseconds", **LAG) > 0

    # the broker's own topics (retry, system, ...) are in the table: at least ours
    assert value(samples, "rocketmq_topic_number") >= 2
    assert value(samples, "rocketmq_consumer_group_number") >= 1
    assert value(samples, "rocketmq_broker_permission") == 6
    consumers = {
        "consumer_group": GROUP,
        "language": "python",
        "version": "v5_3_3",
        "consume_mode": "pull",
        "protocol_type": "remoting",
        "is_system": "false",
    }
    assert value(samples, "rocketmq_consumer_connections", **consumers) == 1
    producers = {"language": "python", "version": "v5_3_3", "protocol_type": "remoting"}
    assert value(samples, "rocketmq_producer_connections", **producers) == 1

    assert value(samples, "rocketmq_storage_size_bytes", **STORE) > 0
    assert value(samples, "rocketmq_storage_flush_behind_bytes", **STORE) == 0
    assert value(samples, "rocketmq_storage_dispatch_behind_bytes", **STORE) == 0

    sends = {
        "protocol_type": "remoting",
        "request_code": "send_message_v2",
        "response_code": "success",
        "result": "success",
    }
    assert value(samples, "rocketmq_rpc_latency_milliseconds_count", **sends) == 16
    assert value(samples, "rocketmq_rpc_latency_milliseconds_bucket", le="+Inf", **sends) == 16
    pulls = {"request_code": "pull_message", "response_code": "success"}
    assert value(samples, "rocketmq_rpc_latency_milliseconds_count", **pulls) >= 2


def test_paths_as_rocketmq_serves_them(consumed_then_lagging):
    address = consumed_then_lagging.broker.metrics_address
    root = scrape(address, "/")
    assert series(root, "rocketmq_messages_in_total", topic=TOPIC)
    with urllib.request.urlopen(f"http://{address}/-/healthy", timeout=10) as response:
        assert response.read() == b"Exporter is healthy.\n"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"http://{address}/nothing", timeout=10)
    assert refused.value.code == 404
    asking = urllib.request.Request(
        f"http://{address}/metrics", headers={"Accept": "application/openmetrics-text"}
    )
    with urllib.request.urlopen(asking, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("application/openmetrics-text")
        text = response.read().decode()
    assert text.rstrip().endswith("# EOF")
    assert "rocketmq_messages_in_total{" in text


def test_the_name_server_serves_its_own_gauges(consumed_then_lagging):
    cluster = consumed_then_lagging
    samples = scrape(cluster.namesrv.metrics_address)
    node = {"node_type": "nameserver", "node_id": cluster.namesrv_address}
    assert value(samples, "rocketmq_namesrv_broker_number", **node) == 1
    assert value(samples, "rocketmq_namesrv_cluster_number", **node) == 1
    assert value(samples, "rocketmq_topic_number", **node) >= 1
    assert value(samples, "rocketmq_namesrv_connections", **node) >= 1
    registrations = {"request_code": "register_broker", "response_code": "success", **node}
    assert value(samples, "rocketmq_rpc_latency_milliseconds_count", **registrations) >= 1
