"""RocketMQ remoting over TCP, with optional TLS: the transport every client speaks."""

from __future__ import annotations

import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import cast

import anyio
from anyio.abc import (
    ByteStream,
    IPSockAddrType,
    Listener,
    SocketAttribute,
    SocketListener,
    SocketStream,
    TaskStatus,
)
from anyio.streams.tls import TLSStream

from rocketmq_core.rate_limited_log import RateLimitedLog
from rocketmq_core.remoting.transport import (
    StreamHandler,
    TlsMode,
    TlsOptions,
    accept_each,
    format_address,
    listen_error,
    listener_members,
)

from .tls_contexts import ServerContexts, client_context

TLS_HANDSHAKE_TIMEOUT = 10.0  # s; a client that never finishes one holds a descriptor
# s; a client that sends nothing this long after connecting to a permissive port is closed
FIRST_BYTE_TIMEOUT = TLS_HANDSHAKE_TIMEOUT
# the first byte of a TLS record carrying a handshake (ClientHello); a plain remoting
# frame starts with its length, big-endian and at most 16 MiB, so with 0x00
TLS_HANDSHAKE_BYTE = 0x16

# a connection's socket and the SSL context to serve it with (None: plain)
SocketHandler = Callable[[socket.socket, ssl.SSLContext | None], Awaitable[None]]

log = logging.getLogger("rocketmq.remoting")
_handshake_log = RateLimitedLog(log)


class TcpTransport:
    """Listener and connector over TCP; TCP_NODELAY always, TLS when asked."""

    name = "tcp"

    async def listen(
        self,
        host: str,
        port: int,
        handler: StreamHandler,
        *,
        tls: TlsOptions | None = None,
        task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        async def serve(client: socket.socket, context: ssl.SSLContext | None) -> None:
            stream: ByteStream = await SocketStream.from_socket(client)
            _read_on_demand(stream)
            if context is not None:
                encrypted = await _handshake(stream, context)
                if encrypted is None:
                    return
                stream = encrypted
            await handler(stream)

        # sockets are taken before any stream reads them: on a permissive port the first
        # byte, only peeked at, stays in the kernel for the stream made next; on an
        # enforcing one a plain client's first bytes fail the handshake, which closes it
        await self.listen_sockets(host, port, serve, tls=tls, task_status=task_status)

    async def listen_sockets(
        self,
        host: str,
        port: int,
        handler: SocketHandler,
        *,
        tls: TlsOptions | None = None,
        task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """As ``listen``, but each connection is handed over as its socket (non-blocking,
        TCP_NODELAY, nothing read) with the SSL context to serve it with: None for plain
        (tls disabled, or a permissive port's client whose first byte opens no TLS
        handshake). For asyncio servers that run connections on the event loop's own
        transports (``loop.connect_accepted_socket``), whose TLS is compiled with uvloop;
        the certificates reload as ``listen``'s do."""
        listener, address = await _bind(host, port)
        mode = TlsMode.DISABLED if tls is None else tls.mode
        contexts = ServerContexts(tls) if tls is not None and mode is not TlsMode.DISABLED else None

        async def classify(client: socket.socket) -> None:
            context = None
            if contexts is not None:
                if mode is TlsMode.PERMISSIVE:
                    first = await _peeked_or_closed(client)
                    if first is None:
                        return
                    if first == TLS_HANDSHAKE_BYTE:
                        context = contexts.current()
                else:
                    context = contexts.current()
            await handler(client, context)

        async with listener:
            task_status.started(address)
            await accept_each([_SocketAcceptor(m) for m in listener_members(listener)], classify)

    async def connect(self, host: str, port: int, *, tls: TlsOptions | None = None) -> ByteStream:
        if tls is not None:
            tls.check_client_files()
        stream = await anyio.connect_tcp(host, port)
        _no_delay(stream)
        if tls is None:
            return stream
        try:
            return await TLSStream.wrap(
                stream,
                hostname=tls.server_hostname or host,
                ssl_context=client_context(tls),
                standard_compatible=False,
            )
        except BaseException:
            await anyio.aclose_forcefully(stream)
            raise


async def _bind(host: str, port: int) -> tuple[Listener[SocketStream], str]:
    """A listener on ``host:port`` and its bound ``host:port``; ConfigError when taken."""
    try:
        listener = await anyio.create_tcp_listener(
            local_host=host, local_port=port, reuse_port=False
        )
    except OSError as exc:
        raise listen_error(host, port, exc) from None
    # an IP socket's address: (host, port) or (host, port, flowinfo, scope id)
    bound = cast("IPSockAddrType", listener.extra(SocketAttribute.local_address))
    return listener, format_address(*bound[:2])


async def _handshake(stream: ByteStream, context: ssl.SSLContext) -> TLSStream | None:
    """The server side of a handshake on ``stream``; None (the stream closed) when it fails."""
    try:
        with anyio.fail_after(TLS_HANDSHAKE_TIMEOUT):
            return await TLSStream.wrap(stream, ssl_context=context, standard_compatible=False)
    except Exception as exc:  # timeout, TLS alert, peer gone: its failure alone
        peer = stream.extra(SocketAttribute.remote_address, "?")
        _handshake_log.warning("closing %s: its TLS handshake failed: %r", peer, exc)
        await anyio.aclose_forcefully(stream)
        return None


async def _peek_first_byte(client: socket.socket) -> int | None:
    """The first byte the client sent, left unread; None when it sends nothing in time."""
    try:
        with anyio.fail_after(FIRST_BYTE_TIMEOUT):
            while True:
                await anyio.wait_readable(client)
                try:
                    first = client.recv(1, socket.MSG_PEEK)
                except BlockingIOError:
                    continue  # woken with nothing to read after all
                return first[0] if first else None  # b"": closed before sending
    except (OSError, TimeoutError):
        return None


async def _peeked_or_closed(client: socket.socket) -> int | None:
    """``_peek_first_byte``; the socket closed when that is None or the wait cancelled
    (a listener stopping)."""
    try:
        first = await _peek_first_byte(client)
    except BaseException:
        client.close()
        raise
    if first is None:
        client.close()
    return first


class _SocketAcceptor:
    """Accepts connections on the socket of one of anyio's listeners, as raw sockets."""

    def __init__(self, listener: SocketListener) -> None:
        self._socket = listener.extra(SocketAttribute.raw_socket)

    async def accept(self) -> socket.socket:
        while True:
            await anyio.wait_readable(self._socket)
            try:
                client, _address = self._socket.accept()
            except BlockingIOError:
                continue  # the connection was reset before it was taken
            client.setblocking(False)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return client


def _read_on_demand(stream: ByteStream) -> None:
    # anyio's asyncio stream reads the socket into an unbounded queue until the first
    # receive() that has to wait pauses it: a client pipelining requests faster than they
    # are served, or one whose reading the server holds back, would fill memory (2 GB in
    # 10 s). Paused from the start, the socket is read only while receive() waits.
    transport = getattr(stream, "_transport", None)
    if transport is not None and hasattr(transport, "pause_reading"):
        transport.pause_reading()


def _no_delay(stream: ByteStream) -> None:
    # Small request/response frames must not wait for Nagle's algorithm.
    raw = stream.extra(SocketAttribute.raw_socket, None)
    if raw is not None and raw.family in (socket.AF_INET, socket.AF_INET6):
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
