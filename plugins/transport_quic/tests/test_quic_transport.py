"""transport_quic keeps the transport contract over QUIC, with TLS 1.3 and ALPN rocketmq."""

from __future__ import annotations

import anyio
import pytest
from aioquic.quic.connection import QuicConnectionState
from rocketmq_transport_quic import QuicTransport
from rocketmq_transport_quic.transport import ConnectedDatagramSocket

from rocketmq_core.errors import ConfigError, RemotingConnectError
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.remoting.transport import TlsOptions
from rocketmq_core.testing.backends import backends_for
from rocketmq_core.testing.transport import (
    ECHO,
    ConformanceProcessors,
    TransportConformance,
    serving,
)


class TlsQuicTransport(QuicTransport):
    """The transport with the suite's certificates: listeners serve them, clients trust them."""

    def __init__(self, tls_files):
        super().__init__()
        ca_file, cert_file, key_file = tls_files
        self.server_tls = TlsOptions(cert_file=cert_file, key_file=key_file)
        self.client_tls = TlsOptions(ca_file=ca_file)

    async def listen(self, host, port, handler, *, tls=None, **kwargs):
        return await super().listen(host, port, handler, tls=tls or self.server_tls, **kwargs)

    async def connect(self, host, port, *, tls=None):
        return await super().connect(host, port, tls=tls or self.client_tls)


class TestQuicConformance(TransportConformance):
    @pytest.fixture
    def transport(self, tls_files):
        return TlsQuicTransport(tls_files)

    # 16 MiB each way through pure-Python QUIC takes ~20 s per backend, and the frame's
    # bytes take the same path on both (every other test here runs on both)
    @pytest.mark.parametrize("anyio_backend", backends_for("asyncio"))
    async def test_largest_frame_body(self, transport, processors):
        await super().test_largest_frame_body(transport, processors)


@pytest.mark.anyio
async def test_a_stopped_server_is_refused_not_timed_out(tls_files):
    transport = TlsQuicTransport(tls_files)
    async with serving(transport, ConformanceProcessors().table()) as (_server, address):
        pass  # the server is gone once the block ends
    async with RemotingClient(transport, connect_timeout=30) as client:
        with pytest.raises(RemotingConnectError, match=f"{address}: .*[Rr]efused"):
            await client.invoke(address, RemotingCommand.request(ECHO), timeout=30)


@pytest.mark.anyio
async def test_a_listener_without_a_certificate_says_how_to_get_one():
    async def handler(stream):  # pragma: no cover - never reached
        await stream.aclose()

    with pytest.raises(ConfigError, match="rocketmq certs create"):
        await QuicTransport().listen("127.0.0.1", 0, handler)


@pytest.mark.anyio
async def test_a_lost_datagram_is_sent_again_by_the_loss_timer(tls_files, monkeypatch):
    drop_next = False
    sent = ConnectedDatagramSocket.send

    async def lossy_send(self, data):
        nonlocal drop_next
        if drop_next:
            drop_next = False
            return  # lost on the way
        await sent(self, data)

    monkeypatch.setattr(ConnectedDatagramSocket, "send", lossy_send)
    transport = TlsQuicTransport(tls_files)
    async with serving(transport, ConformanceProcessors().table()) as (_server, address):
        async with RemotingClient(transport) as client:
            assert (await client.invoke(address, RemotingCommand.request(ECHO))).code == 0
            await anyio.sleep(0.5)  # quiet: the reader now waits with no timer due soon
            drop_next = True  # the next request's only packet
            request = RemotingCommand.request(ECHO, None, b"again")
            response = await client.invoke(address, request, timeout=10)
    assert not drop_next
    assert response.body == b"again"


@pytest.mark.anyio
async def test_a_client_learns_of_the_servers_close_when_it_arrives(tls_files):
    """aioquic reports a peer's CONNECTION_CLOSE only once its draining period (three
    probe timeouts) is over; the channel ends as the close arrives, so a request written
    meanwhile fails instead of vanishing until its timeout."""
    transport = TlsQuicTransport(tls_files)

    async def close_after_first_bytes(stream):
        await stream.receive()
        await stream.aclose()

    async with anyio.create_task_group() as group:
        address = await group.start(transport.listen, "127.0.0.1", 0, close_after_first_bytes)
        host, port = address.rsplit(":", 1)
        channel = await transport.connect(host, int(port))
        try:
            await channel.send(b"hello")
            with anyio.fail_after(10), pytest.raises(anyio.EndOfStream):
                await channel.receive()
            assert channel.terminated == "closed by the peer"
            # ended while aioquic still drains: from the close itself, not its timer
            assert channel.quic._state is QuicConnectionState.DRAINING
        finally:
            await channel.aclose()
            group.cancel_scope.cancel()
