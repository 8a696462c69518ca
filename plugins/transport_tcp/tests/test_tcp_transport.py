"""transport_tcp keeps the transport contract, sets TCP_NODELAY and speaks TLS."""

from __future__ import annotations

import socket

import anyio
import pytest
from anyio.abc import SocketAttribute
from rocketmq_transport_tcp import TcpTransport

from rocketmq_core.errors import ConfigError, RemotingConnectError
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.remoting.transport import TlsMode, TlsOptions, parse_address
from rocketmq_core.testing.transport import (
    ECHO,
    ConformanceProcessors,
    TransportConformance,
    serving,
)


class TestTcpConformance(TransportConformance):
    @pytest.fixture
    def transport(self):
        return TcpTransport()


class PermissiveTcpTransport(TcpTransport):
    """Listens in permissive mode: plain clients' connections take the peeking path."""

    async def listen(self, host, port, handler, *, tls=None, **options):
        tls = tls or TlsOptions(mode=TlsMode.PERMISSIVE, self_signed=True)
        await super().listen(host, port, handler, tls=tls, **options)


class TestPermissiveTcpConformance(TransportConformance):
    """A permissive port keeps the whole contract for plain clients."""

    @pytest.fixture
    def transport(self):
        return PermissiveTcpTransport()

    async def test_hundred_concurrent_clients(self, transport, processors):
        # a permissive port hands a connection on once its first byte tells plain from
        # TLS: each client speaks first, then all hundred are open together
        async with serving(transport, processors.table()) as (server, address):
            opened = anyio.Event()
            results: dict[int, bytes] = {}

            async def one_client(number: int) -> None:
                async with RemotingClient(transport, connect_timeout=30) as client:
                    body = f"client {number}".encode()
                    request = RemotingCommand.request(ECHO, None, body)
                    results[number] = (await client.invoke(address, request, timeout=30)).body
                    await opened.wait()

            async with anyio.create_task_group() as task_group:
                for number in range(100):
                    task_group.start_soon(one_client, number)
                with anyio.fail_after(30):
                    while len(server.connections) < 100:
                        await anyio.sleep(0.01)
                opened.set()
        assert results == {number: f"client {number}".encode() for number in range(100)}


def test_registered_as_tcp_through_its_entry_point(plugin_host):
    info = plugin_host.info("transport_tcp")
    assert info.source == "entry point"
    assert info.distribution == "rocketmq-transport-tcp"
    assert info.registered == {"transport": ["tcp"]}
    assert isinstance(plugin_host.registry.transports.get("tcp"), TcpTransport)


@pytest.mark.anyio
async def test_both_ends_disable_nagle():
    transport = TcpTransport()
    accepted = []

    async def handler(stream):
        raw = stream.extra(SocketAttribute.raw_socket)
        accepted.append(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        await stream.aclose()

    async with anyio.create_task_group() as task_group:
        address = await task_group.start(transport.listen, "127.0.0.1", 0, handler)
        host, port = parse_address(address)
        stream = await transport.connect(host, port)
        async with stream:
            raw = stream.extra(SocketAttribute.raw_socket)
            assert raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            with anyio.fail_after(5):
                while not accepted:
                    await anyio.sleep(0.01)
        task_group.cancel_scope.cancel()
    assert port > 0
    assert accepted[0]


@pytest.mark.anyio
async def test_tls_round_trip_and_a_client_that_does_not_trust_the_server(tls_files):
    ca_file, cert_file, key_file = tls_files
    processors = ConformanceProcessors()
    server_tls = TlsOptions(cert_file=cert_file, key_file=key_file)
    async with serving(TcpTransport(), processors.table(), tls=server_tls) as (_server, address):
        trusted = TlsOptions(ca_file=ca_file, server_hostname="localhost")
        async with RemotingClient(TcpTransport(), tls=trusted) as client:
            response = await client.invoke(address, RemotingCommand.request(ECHO, None, b"secret"))
            assert response.body == b"secret"
        # without the CA the handshake fails, and says so as a connect error
        async with RemotingClient(TcpTransport(), tls=TlsOptions()) as client:
            with pytest.raises(RemotingConnectError, match="cannot connect to"):
                await client.invoke(address, RemotingCommand.request(ECHO), timeout=2)


@pytest.mark.anyio
async def test_tls_listener_without_a_key_is_a_config_error(tls_files):
    _ca, cert_file, _key = tls_files
    transport = TcpTransport()

    async def handler(stream):  # pragma: no cover - never reached
        await stream.aclose()

    with pytest.raises(ConfigError, match="needs both a certificate file and a key file"):
        await transport.listen(
            "127.0.0.1", 0, handler, tls=TlsOptions(cert_file=cert_file), task_status=None
        )


@pytest.mark.anyio
async def test_connect_refused_names_the_address():
    processors = ConformanceProcessors()
    async with serving(TcpTransport(), processors.table()) as (_server, address):
        pass  # the server is gone once the block ends
    async with RemotingClient(TcpTransport()) as client:
        with pytest.raises(RemotingConnectError, match=address):
            await client.invoke(address, RemotingCommand.request(ECHO), timeout=1)
