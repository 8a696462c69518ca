"""TLS on the gRPC port, as ``tls.server.mode`` says for the remoting ports.

grpcio serves a port either plain or encrypted, while Apache's proxy serves both on one
port (permissive, its default mode) and the 5.x clients connect with TLS unless told not
to (Java's ``enableSsl`` is on by default). So with TLS on, the gRPC port is a remoting
TCP listener (the same handshakes, certificates, client authentication and certificate
reloading as the remoting ports, plus ALPN ``h2``, which gRPC clients insist on), and
each of its connections, decrypted, is relayed to grpc.aio listening on loopback only.

The relay notes the loopback port each relayed connection comes from, so the service
still knows the client's own address (for ACL white lists and born hosts); a call over
a connection the relay did not make (a local program dialling the loopback port
itself, around TLS) is refused.
"""

from __future__ import annotations

import dataclasses
import logging

import anyio
from anyio.abc import ByteStream, SocketAttribute, TaskGroup, TaskStatus

from rocketmq_core.rate_limited_log import RateLimitedLog
from rocketmq_core.remoting.transport import TlsMode, TlsOptions, Transport, format_address

from .status import Code, ProxyError

log = logging.getLogger("rocketmq.proxy")
_relay_log = RateLimitedLog(log)

BACKEND_HOST = "127.0.0.1"
RELAY_CHUNK = 65_536
# a side of a relayed connection ended: by the peer, a reset, a failed TLS record (an
# ssl.SSLError is an OSError)
_ENDED = (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError)


def serves_tls(tls: TlsOptions | None) -> bool:
    return tls is not None and tls.mode is not TlsMode.DISABLED


class TlsFront:
    """Serves ``tls`` on a public port and relays each connection to ``backend_port``.

    The relays run in a task group of the caller's (``serve``'s ``relays``), so that the
    listener can stop first while gRPC drains the calls in flight through them."""

    def __init__(self, transport: Transport, tls: TlsOptions) -> None:
        self.transport = transport
        # gRPC clients (C core, Java's Netty) fail a handshake that settles no ALPN h2
        self.tls = dataclasses.replace(tls, alpn_protocols=("h2",))
        self._clients: dict[int, str] = {}  # a relayed connection's loopback port -> client
        self._listening: anyio.CancelScope | None = None  # made on the serving loop

    async def serve(
        self,
        host: str,
        port: int,
        backend_port: int,
        relays: TaskGroup,
        *,
        task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept until ``stop_accepting``; reports the bound ``host:port``."""

        async def hand_over(client: ByteStream) -> None:
            relays.start_soon(self._relay, backend_port, client)

        with anyio.CancelScope() as self._listening:
            await self.transport.listen(
                host, port, hand_over, tls=self.tls, task_status=task_status
            )

    def stop_accepting(self) -> None:
        if self._listening is not None:
            self._listening.cancel()

    def client_of(self, peer: str) -> str:
        """The client's ``host:port`` behind gRPC's ``peer`` of a relayed connection
        (``ipv4:127.0.0.1:PORT``); ProxyError FORBIDDEN for any other connection."""
        _, _, port = peer.rpartition(":")
        client = self._clients.get(int(port)) if port.isdigit() else None
        if client is None or not peer.startswith(f"ipv4:{BACKEND_HOST}:"):
            raise ProxyError(
                Code.FORBIDDEN, "connect to the proxy's gRPC port, not to its loopback relay"
            )
        return client

    @property
    def relayed(self) -> dict[int, str]:
        """The open relays: loopback port -> client address."""
        return dict(self._clients)

    async def _relay(self, backend_port: int, client: ByteStream) -> None:
        remote = client.extra(SocketAttribute.remote_address, None)
        address = format_address(*remote[:2]) if isinstance(remote, tuple) else str(remote)
        try:
            backend = await anyio.connect_tcp(BACKEND_HOST, backend_port)
        except OSError as exc:
            _relay_log.warning(
                "cannot relay %s to the gRPC server on port %d: %s", address, backend_port, exc
            )
            await anyio.aclose_forcefully(client)
            return
        relayed_from = backend.extra(SocketAttribute.local_port)
        self._clients[relayed_from] = address
        try:
            async with anyio.create_task_group() as both:
                both.start_soon(_copy, client, backend, both.cancel_scope)
                both.start_soon(_copy, backend, client, both.cancel_scope)
        except Exception:  # one connection's failure, never the port's
            log.exception("relaying %s to the gRPC server failed", address)
        finally:
            del self._clients[relayed_from]
            await anyio.aclose_forcefully(backend)
            await anyio.aclose_forcefully(client)


async def _copy(source: ByteStream, sink: ByteStream, both: anyio.CancelScope) -> None:
    """``source`` into ``sink`` until either ends; then both directions end (HTTP/2 has
    no use for a half-closed connection)."""
    try:
        while True:
            await sink.send(await source.receive(RELAY_CHUNK))
    except _ENDED:
        pass
    finally:
        both.cancel()
