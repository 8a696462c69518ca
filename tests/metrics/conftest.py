"""A name server and broker with metrics on, clients that send and consume, a scraper."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from rocketmq_core.client.message import Message
from rocketmq_core.client.sync import LitePullConsumer, Producer
from rocketmq_core.testing.cluster import EmbeddedCluster
from tests.test_cli_user_errors import rocketmq  # noqa: F401 (the CLI fixture)

TOPIC = "Orders"
GROUP = "CG-metrics"


def scrape(address: str, path: str = "/metrics") -> list[Sample]:
    """Every sample a GET of ``path`` returns, parsed by prometheus_client's parser."""
    with urllib.request.urlopen(f"http://{address}{path}", timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def series(samples: list[Sample], name: str, **labels: str) -> list[Sample]:
    """The samples of ``name`` whose labels include ``labels``."""
    return [
        sample
        for sample in samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    ]


def value(samples: list[Sample], name: str, **labels: str) -> float:
    found = series(samples, name, **labels)
    assert len(found) == 1, (
        f"{name}{labels}: {len(found)} samples in {sorted({s.name for s in samples})}"
    )
    return found[0].value


def wait_for(condition: Callable[[], bool], timeout: float = 15.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture(params=["asyncio", "trio"])
def backend(request) -> str:
    """The event loop the servers run on (their metrics collections run on it too)."""
    return request.param


def metrics_cluster(tmp_path, backend: str, **settings) -> EmbeddedCluster:
    namesrv = {
        "metrics_exporter_type": "PROM",
        "metrics_prom_exporter_host": "127.0.0.1",
        "metrics_prom_exporter_port": 0,
    }
    return EmbeddedCluster(
        tmp_path / "rocketmq",
        backend=backend,
        store="memory",
        namesrv_overrides=namesrv,
        **settings,
    )


def send(namesrv: str, count: int, body: bytes = b"x" * 100) -> None:
    with Producer("PG-metrics", namesrv) as producer:
        for _ in range(count):
            producer.send(Message(TOPIC, body))


@pytest.fixture
def consumed_then_lagging(tmp_path, backend) -> Iterator[EmbeddedCluster]:
    """10 messages sent and consumed (offsets committed), then 5 more that the group has
    not consumed: its lag is 5 while the consumer stays online."""
    with metrics_cluster(
        tmp_path,
        backend,
        metrics_exporter_type="PROM",
        metrics_prom_exporter_port=0,
        metrics_label="env:test,region:eu",
    ) as cluster:
        cluster.create_topic(TOPIC, queues=2)
        send(cluster.namesrv_address, 10)
        consumer = LitePullConsumer(
            GROUP, cluster.namesrv_address, consume_from="first", auto_commit_interval=0.1
        )
        consumer.subscribe(TOPIC)
        with consumer:
            received = 0
            while received < 10:
                received += len(consumer.poll(5))
            broker = cluster.broker
            committed = lambda: sum(  # noqa: E731
                max(0, broker.offsets.query(GROUP, TOPIC, q)) for q in range(2)
            )
            wait_for(lambda: committed() == 10, what="the consumer's offsets to be committed")
            send(cluster.namesrv_address, 5)  # not polled: pulled, never committed
            yield cluster
