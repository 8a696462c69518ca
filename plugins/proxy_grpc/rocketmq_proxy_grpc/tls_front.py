"""TLS on the gRPC port, as ``tls.server.mode`` says for the remoting ports.

grpcio serves a port either plain or encrypted, while Apache's proxy serves both on one
port (permissive, its default mode) and the 5.x clients connect with TLS unless told not
to (Java's ``enableSsl`` is on by default). So with TLS on, the gRPC port is the TCP
transport's listener (``listen_sockets``: the remoting ports' certificates, client
authentication, reloading and permissive first-byte test, plus ALPN ``h2``, which gRPC
clients insist on), and each of its connections, decrypted by the event loop's own TLS
layer (compiled with uvloop), is relayed to grpc.aio listening on loopback only. The
relay is a pair of asyncio protocols that write what one side reads to the other: no
task, no copy in Python per chunk beyond the call.

The relay notes the loopback port each relayed connection comes from, so the service
still knows the client's own address (for ACL white lists and born hosts); a call over
a connection the relay did not make (a local program dialling the loopback port
itself, around TLS) is refused.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import ssl
from typing import Any, Protocol, TypeGuard

import anyio
from anyio.abc import TaskGroup, TaskStatus

from rocketmq_core.errors import ConfigError
from rocketmq_core.rate_limited_log import RateLimitedLog
from rocketmq_core.remoting.transport import TlsMode, TlsOptions, Transport, format_address

from .status import Code, ProxyError

log = logging.getLogger("rocketmq.proxy")
_relay_log = RateLimitedLog(log)

BACKEND_HOST = "127.0.0.1"
TLS_HANDSHAKE_TIMEOUT = 10.0  # s, as the remoting ports allow


def serves_tls(tls: TlsOptions | None) -> TypeGuard[TlsOptions]:
    return tls is not None and tls.mode is not TlsMode.DISABLED


class SocketListening(Protocol):
    """What a TlsFront needs of a transport (the TCP transport's ``listen_sockets``)."""

    async def listen_sockets(
        self, host: str, port: int, handler: Any, *, tls: TlsOptions | None, task_status: Any
    ) -> None: ...


class TlsFront:
    """Serves ``tls`` on a public port and relays each connection to ``backend_port``.

    The relays run in a task group of the caller's (``serve``'s ``relays``), so that the
    listener can stop first while gRPC drains the calls in flight through them."""

    def __init__(self, transport: Transport, tls: TlsOptions) -> None:
        if not hasattr(transport, "listen_sockets"):
            raise ConfigError(f"TLS on the gRPC port needs the tcp transport, not {transport.name}")
        self.transport: SocketListening = transport  # type: ignore[assignment]
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

        async def hand_over(client: socket.socket, context: ssl.SSLContext | None) -> None:
            relays.start_soon(self._relay, backend_port, client, context)

        with anyio.CancelScope() as self._listening:
            await self.transport.listen_sockets(
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

    async def _relay(
        self, backend_port: int, client: socket.socket, context: ssl.SSLContext | None
    ) -> None:
        try:
            address = format_address(*client.getpeername()[:2])
        except OSError:  # gone already
            client.close()
            return
        loop = asyncio.get_running_loop()
        relay = _Relay()
        try:
            try:
                await loop.connect_accepted_socket(
                    relay.client_side,
                    client,
                    ssl=context,
                    ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT if context else None,
                )
            except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
                what = "its TLS handshake failed" if context else "it could not be served"
                _relay_log.warning("closing %s: %s: %r", address, what, exc)
                client.close()
                return
            try:
                await loop.create_connection(relay.backend_side, BACKEND_HOST, backend_port)
            except OSError as exc:
                _relay_log.warning(
                    "cannot relay %s to the gRPC server on port %d: %s", address, backend_port, exc
                )
                relay.end(abort=True)
                return
            if relay.ended.is_set():  # the client left while the loopback side connected
                relay.end(abort=True)
                return
            relayed_from = relay.backend_port()
            self._clients[relayed_from] = address  # before a byte reaches grpc.aio
            try:
                relay.join()
                await relay.ended.wait()
            finally:
                if self._clients.get(relayed_from) == address:
                    del self._clients[relayed_from]
        except Exception:  # one connection's failure, never the port's
            log.exception("relaying %s to the gRPC server failed", address)
        finally:
            if not relay.ended.is_set():  # cancelled: the proxy stops, after its grace
                relay.end(abort=True)


class _Relay:
    """A client connection and its loopback twin, each writing what the other reads."""

    def __init__(self) -> None:
        self.client = _Side(self)
        self.backend = _Side(self)
        self.ended = asyncio.Event()

    def client_side(self) -> _Side:
        return self.client

    def backend_side(self) -> _Side:
        return self.backend

    def backend_port(self) -> int:
        assert self.backend.transport is not None
        return int(self.backend.transport.get_extra_info("sockname")[1])

    def join(self) -> None:
        """Start relaying: what either side read meanwhile goes over first."""
        self.client.peer, self.backend.peer = self.backend, self.client
        self.client.flush_early()
        self.backend.flush_early()
        if self.client.transport is not None:
            self.client.transport.resume_reading()  # paused until now (connection_made)

    def end(self, *, abort: bool = False) -> None:
        """Close both sides: with what they hold written out first, unless ``abort``."""
        for side in (self.client, self.backend):
            transport = side.transport
            if transport is None:
                continue
            if abort:
                transport.abort()
            elif not transport.is_closing():
                transport.close()
        self.ended.set()


class _Side(asyncio.Protocol):
    """One connection of a relay; its peer is the other."""

    def __init__(self, relay: _Relay) -> None:
        self.relay = relay
        self.transport: asyncio.Transport | None = None
        self.peer: _Side | None = None
        self._early: list[bytes] = []  # read before the relay was joined

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.relay.ended.is_set():  # the other side is gone already
            transport.abort()  # type: ignore[attr-defined]
        elif self is self.relay.client:
            # nothing to write to until the loopback side connects: read no more meanwhile
            self.transport.pause_reading()  # type: ignore[union-attr]

    def flush_early(self) -> None:
        peer = self.peer
        if self._early and peer is not None and peer.transport is not None:
            peer.transport.write(b"".join(self._early))
        self._early.clear()

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is None or peer.transport is None:
            self._early.append(data)
        elif not peer.transport.is_closing():  # uvloop raises on a closed one
            peer.transport.write(data)

    def eof_received(self) -> bool:
        self.relay.end()  # HTTP/2 has no use for a half-closed connection
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.relay.end()

    # the peer reads no faster than this side's socket takes what it wrote
    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()
