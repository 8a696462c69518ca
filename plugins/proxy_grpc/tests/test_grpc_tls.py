"""TLS on the gRPC port: tls.server.mode serves it as it serves the remoting ports."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import grpc
import pytest
import trustme
from grpc_requests import access_point, message, metadata, resource
from rocketmq_proxy_grpc.server import GrpcProxy, ProxyThread
from rocketmq_proxy_grpc.v2 import definition_pb2 as pb
from rocketmq_proxy_grpc.v2 import service_pb2 as spb
from rocketmq_proxy_grpc.v2 import service_pb2_grpc
from rocketmq_transport_tcp import TcpTransport

from rocketmq_core.cli import main
from rocketmq_core.client.pull_consumer import PullConsumer
from rocketmq_core.remoting.transport import ClientAuth, TlsMode, TlsOptions
from rocketmq_core.testing.cluster import EmbeddedCluster
from rocketmq_core.testing.ports import free_port

TOPIC = "GrpcTls"


class Pki:
    """A CA, the server's certificate for 127.0.0.1 and a client certificate, as PEM."""

    def __init__(self, folder) -> None:
        authority = trustme.CA()
        self.ca_pem = authority.cert_pem.bytes()
        self.ca = str(folder / "ca.pem")
        authority.cert_pem.write_to_path(self.ca)
        server = authority.issue_cert("127.0.0.1", "localhost")
        self.cert, self.key = str(folder / "cert.pem"), str(folder / "key.pem")
        server.cert_chain_pems[0].write_to_path(self.cert)
        server.private_key_pem.write_to_path(self.key)
        client = authority.issue_cert("client@example.com")
        self.client_cert = client.cert_chain_pems[0].bytes()
        self.client_key = client.private_key_pem.bytes()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with EmbeddedCluster(tmp_path_factory.mktemp("cluster")) as running:
        running.create_topic(TOPIC)
        yield running


@contextmanager
def serving(cluster, tls: TlsOptions) -> Iterator[GrpcProxy]:
    """The proxy, in front of ``cluster``, serving ``tls`` on a free port."""
    proxy = GrpcProxy(
        cluster.namesrv_address,
        host="127.0.0.1",
        port=0,
        advertised_host="127.0.0.1",
        tls=tls,
        transport=TcpTransport(),
    )
    runner = ProxyThread(proxy)
    runner.start()
    try:
        yield proxy
    finally:
        runner.stop()


def server_tls(pki: Pki, mode: TlsMode, **options) -> TlsOptions:
    return TlsOptions(cert_file=pki.cert, key_file=pki.key, mode=mode, **options)


def tls_channel(port: int, pki: Pki, *, with_certificate: bool = False) -> grpc.Channel:
    credentials = grpc.ssl_channel_credentials(
        root_certificates=pki.ca_pem,
        private_key=pki.client_key if with_certificate else None,
        certificate_chain=pki.client_cert if with_certificate else None,
    )
    return grpc.secure_channel(f"127.0.0.1:{port}", credentials)


def query_route(channel: grpc.Channel, port: int, timeout: float = 10) -> spb.QueryRouteResponse:
    stub = service_pb2_grpc.MessagingServiceStub(channel)
    request = spb.QueryRouteRequest(topic=resource(TOPIC), endpoints=access_point(port))
    return stub.QueryRoute(request, metadata=metadata(), timeout=timeout)


def send_one(channel: grpc.Channel, body: bytes) -> spb.SendMessageResponse:
    stub = service_pb2_grpc.MessagingServiceStub(channel)
    request = spb.SendMessageRequest(messages=[message(TOPIC, body)])
    return stub.SendMessage(request, metadata=metadata(), timeout=10)


def broker_tls(pki: Pki, mode: str) -> dict[str, str]:
    """broker.conf's TLS keys (as config fields) for ``mode`` with the test certificate."""
    return {
        "tls_config_file": "",
        "tls_server_mode": mode,
        "tls_server_cert_path": pki.cert,
        "tls_server_key_path": pki.key,
    }


def test_a_permissive_grpc_port_serves_tls_and_plain_clients(cluster, pki):
    with serving(cluster, server_tls(pki, TlsMode.PERMISSIVE)) as proxy:
        port = proxy.port
        with tls_channel(port, pki) as channel:
            assert query_route(channel, port).status.code == pb.OK
            sent = send_one(channel, b"over TLS")
            assert sent.status.code == pb.OK, sent.status
            assert proxy.front is not None
            # the one relayed connection: from a loopback port of its own, for the client
            ((relay_port, client),) = proxy.front.relayed.items()
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            assert query_route(channel, port).status.code == pb.OK
        # the route a TLS client is given points at the port it dialled, not the relay's
        with tls_channel(port, pki) as channel:
            route = query_route(channel, port)
            assert {a.port for q in route.message_queues for a in q.broker.endpoints.addresses} == {
                port
            }
    stored = anyio.run(pull_all, cluster.namesrv_address)
    assert [m.body for m in stored] == [b"over TLS"]
    # born where the client is (the 5.x property), not at the relay's loopback end
    assert stored[0].properties["__BORNHOST"] == client != f"127.0.0.1:{relay_port}"


async def pull_all(namesrv: str) -> list:
    async with PullConsumer("GrpcTlsReader", namesrv) as consumer:
        return [
            m
            for queue in await consumer.queues(TOPIC)
            for m in (await consumer.pull(queue, 0, max_nums=16)).messages
        ]


def test_an_enforcing_grpc_port_refuses_plain_clients(cluster, pki):
    with serving(cluster, server_tls(pki, TlsMode.ENFORCING)) as proxy:
        port = proxy.port
        with tls_channel(port, pki) as channel:
            assert query_route(channel, port).status.code == pb.OK
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.RpcError) as refused:
                query_route(channel, port, timeout=3)
        assert refused.value.code() in (
            grpc.StatusCode.UNAVAILABLE,
            grpc.StatusCode.DEADLINE_EXCEEDED,
        )


def test_mutual_tls_on_the_grpc_port_wants_a_certificate_the_ca_issued(cluster, pki):
    tls = server_tls(pki, TlsMode.ENFORCING, ca_file=pki.ca, client_auth=ClientAuth.REQUIRE)
    with serving(cluster, tls) as proxy:
        with tls_channel(proxy.port, pki, with_certificate=True) as channel:
            assert query_route(channel, proxy.port).status.code == pb.OK
        with tls_channel(proxy.port, pki) as channel:
            with pytest.raises(grpc.RpcError):
                query_route(channel, proxy.port, timeout=3)


def test_a_call_around_the_tls_front_is_refused(cluster, pki):
    """gRPC listens on loopback behind the front: a local program dialling it directly
    would skip TLS and client authentication."""
    with serving(cluster, server_tls(pki, TlsMode.ENFORCING)) as proxy:
        relay = proxy.backend_port  # where grpc.aio listens, on loopback
        with grpc.insecure_channel(f"127.0.0.1:{relay}") as channel:
            answer = query_route(channel, proxy.port)
    assert answer.status.code == pb.FORBIDDEN
    assert "gRPC port" in answer.status.message


def test_a_broker_with_tls_on_serves_its_grpc_port_with_tls_too(tmp_path, pki):
    """Local mode: tls.server.mode of broker.conf covers grpcServerPort, as in Apache's
    proxy."""
    with EmbeddedCluster(tmp_path, grpc_server_port=0, **broker_tls(pki, "permissive")) as local:
        local.create_topic(TOPIC)
        port = local.broker.services["grpc_proxy"].port
        with tls_channel(port, pki) as channel:
            answer = query_route(channel, port)
    assert answer.status.code == pb.OK
    assert len(answer.message_queues) == 4


def test_the_proxy_command_serves_tls_as_its_options_say(cluster, pki, tmp_path):
    port = free_port()
    command = [
        *(sys.executable, "-m", "rocketmq_core.cli", "proxy", "-n", cluster.namesrv_address),
        *("--host", "127.0.0.1", "--grpc-port", str(port), "--advertised-host", "127.0.0.1"),
        *("--tls-mode", "enforcing", "--tls-cert", pki.cert, "--tls-key", pki.key),
        *("--tls-enable", "false"),  # the cluster serves plain
    ]
    log = tmp_path / "proxy.log"
    with open(log, "wb") as err:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 30
        while b"ready: gRPC proxy" not in log.read_bytes():
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        with tls_channel(port, pki) as channel:
            assert query_route(channel, port).status.code == pb.OK
    finally:
        process.terminate()
        assert process.wait(20) == 0, log.read_text()


def test_the_proxy_command_refuses_half_a_certificate(capsys, pki):
    assert (
        main(["proxy", "-n", "127.0.0.1:9876", "--tls-mode", "enforcing", "--tls-cert", pki.cert])
        == 2
    )
    error = capsys.readouterr().err
    assert "--tls-cert and --tls-key go together" in error
    assert "Traceback" not in error


def test_beside_a_broker_that_enforces_tls_the_proxy_reaches_it_over_tls(tmp_path, pki):
    """Enforcing: every TCP port takes TLS only, so the proxy's own connections to the
    name server and the broker use TLS as the broker's do (tls.enable follows the mode)."""
    tls = broker_tls(pki, "enforcing")
    with EmbeddedCluster(tmp_path, namesrv_overrides=tls, grpc_server_port=0, **tls) as local:
        local.create_topic(TOPIC)
        port = local.broker.services["grpc_proxy"].port
        with tls_channel(port, pki) as channel:
            assert query_route(channel, port).status.code == pb.OK
            sent = send_one(channel, b"TLS all the way")
    assert sent.status.code == pb.OK, sent.status
