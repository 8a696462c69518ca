"""How clients find and reach QUIC: advertised endpoints, TCP clients unchanged, fallback,
trust, and what a misconfigured server says."""

from __future__ import annotations

import logging

import pytest

from rocketmq_core.broker.app import Broker
from rocketmq_core.client.config import TRUST_CERT_PATH_VARIABLE, ClientConfig
from rocketmq_core.client.message import Message, SendStatus
from rocketmq_core.client.producer import Producer
from rocketmq_core.client.pull_consumer import PullConsumer
from rocketmq_core.errors import ConfigError, RemotingError
from rocketmq_core.plugins import load_plugins
from rocketmq_core.remoting.transport import TlsOptions
from rocketmq_core.testing.broker import broker_config
from rocketmq_core.testing.cluster import EmbeddedCluster

from .conftest import TOPIC, quic_settings

pytestmark = pytest.mark.anyio


async def send_and_read_back(namesrv: str, body: bytes, **options) -> None:
    config = ClientConfig(namesrv_addr=namesrv, **options)
    async with Producer("PG", config=config) as producer:
        result = await producer.send(Message(TOPIC, body))
    assert result.status is SendStatus.SEND_OK
    async with PullConsumer("CG-check", config=ClientConfig(namesrv_addr=namesrv, **options)) as c:
        pulled = await c.pull(result.queue, result.queue_offset, max_nums=1)
    assert [message.body for message in pulled.messages] == [body]


def quic_port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


async def test_the_broker_advertises_its_quic_endpoint_in_every_route(quic_cluster):
    (endpoint,) = quic_cluster.broker.server.extra_addresses
    advertised = f"quic://127.0.0.1:{quic_port(endpoint)}"
    route = quic_cluster.namesrv.routes.route(TOPIC)
    assert route.broker_datas[0].endpoints == {0: [advertised]}
    # a broker that stops serving QUIC takes the endpoint out of the route
    quic_cluster.broker_overrides["extra_listeners"] = ""
    quic_cluster.restart_broker()
    assert quic_cluster.namesrv.routes.route(TOPIC).broker_datas[0].endpoints == {}


async def test_a_tcp_client_is_served_over_tcp_by_a_broker_that_also_serves_quic(
    quic_cluster,
):
    await send_and_read_back(quic_cluster.namesrv_address, b"over tcp")
    assert quic_cluster.broker.server.accepted["quic"] == 0
    assert quic_cluster.broker.server.accepted["tcp"] >= 2


async def test_a_quic_client_reaches_the_name_server_and_the_broker_over_quic(
    quic_cluster, quic_certificate
):
    await send_and_read_back(
        quic_cluster.namesrv_endpoint("quic"),
        b"over quic",
        quic_tls=TlsOptions(ca_file=str(quic_certificate.cert_file)),
    )
    assert quic_cluster.broker.server.accepted == {"quic": 2}
    assert quic_cluster.namesrv.server.accepted["quic"] == 2


async def test_insecure_tls_is_explicit_and_works_without_the_certificate(quic_cluster):
    await send_and_read_back(
        quic_cluster.namesrv_endpoint("quic"), b"unverified", quic_tls=TlsOptions(verify=False)
    )
    assert quic_cluster.broker.server.accepted["quic"] == 2


async def test_a_server_the_client_does_not_trust_is_refused_and_said_why(
    quic_cluster, monkeypatch
):
    monkeypatch.delenv(TRUST_CERT_PATH_VARIABLE, raising=False)
    config = ClientConfig(namesrv_addr=quic_cluster.namesrv_endpoint("quic"))
    async with Producer("PG", config=config) as producer:
        with pytest.raises(RemotingError, match=r"(?i)certificate") as failure:
            await producer.send(Message(TOPIC, b"never sent"))
    assert quic_cluster.namesrv_endpoint("quic") in str(failure.value)
    assert quic_cluster.broker.server.accepted["quic"] == 0


@pytest.mark.parametrize("transport", ["quic", "tcp"])
async def test_a_ca_file_that_cannot_be_read_is_one_error_naming_it(tmp_path, transport):
    missing = tmp_path / "no-such-ca.pem"
    host = load_plugins()
    connect = host.registry.transports.get(transport).connect
    with pytest.raises(ConfigError, match=f"TLS CA file {missing}: No such file"):
        await connect("127.0.0.1", 9, tls=TlsOptions(ca_file=str(missing)))


async def test_a_broker_without_quic_is_reached_over_tcp_with_a_warning(
    tmp_path, quic_certificate, caplog
):
    settings = quic_settings(quic_certificate)
    with EmbeddedCluster(
        tmp_path / "rocketmq", store="memory", namesrv_overrides=settings
    ) as tcp_broker:
        tcp_broker.create_topic(TOPIC, queues=4)
        with caplog.at_level(logging.WARNING, logger="rocketmq.client"):
            await send_and_read_back(
                tcp_broker.namesrv_endpoint("quic"),
                b"fell back",
                quic_tls=TlsOptions(ca_file=str(quic_certificate.cert_file)),
            )
        assert tcp_broker.broker.server.accepted["tcp"] == 2
    assert "advertises no quic endpoint: reaching it over tcp" in caplog.text


@pytest.mark.parametrize(
    "settings, message",
    [
        pytest.param(
            {"extra_listeners": "quic://127.0.0.1:0"},
            "a quic listener needs a certificate file and a key file",
            id="quic-without-certificate",
        ),
        pytest.param(
            {"extra_listeners": "quic:/127.0.0.1:0"},
            "bad address 'quic:/127.0.0.1:0'",
            id="malformed-address",
        ),
        pytest.param(
            {"extra_listeners": "sctp://127.0.0.1:0"},
            "unknown transport 'sctp'; available: quic, tcp",
            id="unknown-transport",
        ),
        pytest.param(
            {"tls_server_cert_path": "cert.pem"},
            "tls.server.certPath and tls.server.keyPath go together",
            id="certificate-without-key",
        ),
        pytest.param(
            {"namesrv_addr": "quic://localhost"},
            "namesrvAddr entry 'quic://localhost' is not host:port",
            id="namesrv-without-port",
        ),
    ],
)
async def test_a_misconfigured_broker_says_what_to_fix(tmp_path, settings, message):
    config = broker_config(tmp_path, **settings)
    # raised at startup: as it is, or from inside the task groups that were starting
    with pytest.raises((ConfigError, BaseExceptionGroup)) as failure:
        async with Broker.serving(config):
            pass
    if failure.type is ConfigError:
        failure.match(message)
    else:
        assert failure.group_contains(ConfigError, match=message)


async def test_a_broker_may_serve_quic_alone(quic_cluster, quic_certificate, tmp_path):
    certificate = str(quic_certificate.cert_file)
    config = broker_config(
        tmp_path / "broker-b",
        quic_cluster.namesrv_endpoint("quic"),
        broker_name="broker-b",
        transport="quic",
        tls_server_cert_path=certificate,
        tls_server_key_path=str(quic_certificate.key_file),
        tls_client_trust_cert_path=certificate,  # it registers over QUIC too
    )
    async with Broker.serving(config) as broker:
        data = quic_cluster.namesrv.routes.brokers["broker-b"]
        assert data.endpoints == {0: [f"quic://{broker.address}"]}
        assert quic_cluster.namesrv.server.accepted["tcp"] == 1  # broker-a only
    assert broker.server.accepted["tcp"] == 0
