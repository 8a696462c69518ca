"""An embedded cluster (the public ``rocketmq_cluster`` fixture) with topic Orders."""

from __future__ import annotations

import itertools
import uuid

import anyio
import orjson
import pytest

from rocketmq_core.cli import main
from rocketmq_core.client.config import TRUST_CERT_PATH_VARIABLE
from rocketmq_core.client.pull_consumer import PullConsumer
from rocketmq_core.protocol.heartbeat import MessageQueue
from rocketmq_core.testing.cluster import EmbeddedCluster, quic_listener_settings

TOPIC = "Orders"
_names = itertools.count()


def pytest_generate_tests(metafunc):
    # a module whose tests run over several transports says so: TRANSPORTS = ("tcp", "quic")
    transports = getattr(metafunc.module, "TRANSPORTS", None)
    if transports and "transport" in metafunc.fixturenames:
        metafunc.parametrize("transport", transports, indirect=True)


@pytest.fixture
def transport(request) -> str:
    """How clients reach the cluster: ``tcp`` unless the module names TRANSPORTS."""
    return getattr(request, "param", "tcp")


@pytest.fixture(scope="session")
def quic_certificate(tmp_path_factory):
    from rocketmq_transport_quic.certs import write_self_signed

    return write_self_signed(tmp_path_factory.mktemp("quic-certs"))


def quic_settings(certificate) -> dict[str, str]:
    return quic_listener_settings(str(certificate.cert_file), str(certificate.key_file))


@pytest.fixture
def quic_cluster(tmp_path, quic_certificate):
    """Name server and broker serving TCP and QUIC (the test's certificate), TOPIC made."""
    settings = quic_settings(quic_certificate)
    with EmbeddedCluster(
        tmp_path / "rocketmq", store="memory", namesrv_overrides=settings, **settings
    ) as running:
        running.create_topic(TOPIC, queues=4)
        yield running


async def stored(namesrv: str, queue: MessageQueue, offset: int):
    """The message stored at ``offset`` of ``queue``, pulled back."""
    async with PullConsumer("CG-check", namesrv) as consumer:
        result = await consumer.pull(queue, offset, max_nums=1)
    assert result.messages, f"nothing stored at {queue} offset {offset}"
    return result.messages[0]


@pytest.fixture
def cluster(request, transport, tmp_path, monkeypatch):
    """The ``rocketmq_cluster`` (marker and all) with topic Orders; over quic, the name
    server and the broker serve QUIC too and clients trust their certificate."""
    if transport == "tcp":
        running = request.getfixturevalue("rocketmq_cluster")
        running.create_topic(TOPIC, queues=4)
        yield running
        return
    certificate = request.getfixturevalue("quic_certificate")
    monkeypatch.setenv(TRUST_CERT_PATH_VARIABLE, str(certificate.cert_file))
    marker = request.node.get_closest_marker("rocketmq")
    settings = {"store": "memory", **(marker.kwargs if marker else {})}
    with EmbeddedCluster(
        tmp_path / "rocketmq",
        namesrv_overrides=quic_settings(certificate),
        **quic_settings(certificate),
        **settings,
    ) as running:
        running.create_topic(TOPIC, queues=4)
        yield running
        # every client of the broker came over QUIC: none fell back to TCP
        assert running.broker.server.accepted["tcp"] == 0


@pytest.fixture
def namesrv(cluster, transport) -> str:
    if transport == "quic":
        return cluster.namesrv_endpoint("quic")
    return cluster.namesrv_address


@pytest.fixture
def rocketmq(cluster, capsys):
    """``rocketmq ARGS -n <the cluster>`` in this process: (exit status, stdout, stderr);
    ``json=True`` adds --json and parses stdout when the command succeeded."""

    def invoke(*args: str, json: bool = False):
        code = main([*args, "-n", cluster.namesrv_address, *(["--json"] if json else [])])
        captured = capsys.readouterr()
        out = orjson.loads(captured.out) if json and code == 0 else captured.out
        return code, out, captured.err

    return invoke


async def eventually(condition, timeout: float = 10.0, step: float = 0.02) -> None:
    """Wait until ``condition()`` is true; fail the test with what it was after ``timeout``."""
    with anyio.move_on_after(timeout):
        while not condition():
            await anyio.sleep(step)
    assert condition(), f"condition still false after {timeout} s"


@pytest.fixture(scope="module")
def module_cluster(tmp_path_factory):
    """One cluster shared by a module's tests (they keep apart by fresh names)."""
    with EmbeddedCluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


@pytest.fixture
def name():
    """A fresh topic or group name per call (tests run once per backend)."""
    run = uuid.uuid4().hex[:6]
    return lambda prefix="T": f"{prefix}-{run}-{next(_names)}"
