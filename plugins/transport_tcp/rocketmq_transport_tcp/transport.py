"""RocketMQ remoting over TCP, with optional TLS: the transport every client speaks."""

from __future__ import annotations

import socket
import ssl
from typing import cast

import anyio
from anyio.abc import ByteStream, IPSockAddrType, SocketAttribute, TaskStatus
from anyio.streams.tls import TLSStream

from rocketmq_core.errors import ConfigError
from rocketmq_core.remoting.transport import (
    StreamHandler,
    TlsOptions,
    accept_forever,
    format_address,
    listen_error,
)

TLS_HANDSHAKE_TIMEOUT = 10.0  # s; a client that never finishes one holds a descriptor


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
        try:
            listener = await anyio.create_tcp_listener(
                local_host=host, local_port=port, reuse_port=False
            )
        except OSError as exc:
            raise listen_error(host, port, exc) from None
        # an IP socket's address: (host, port) or (host, port, flowinfo, scope id)
        bound = cast("IPSockAddrType", listener.extra(SocketAttribute.local_address))
        bound_host, bound_port = bound[:2]

        context = server_context(tls) if tls is not None else None

        async def serve_stream(stream: ByteStream) -> None:
            _no_delay(stream)
            _read_on_demand(stream)
            if context is not None:
                try:
                    with anyio.fail_after(TLS_HANDSHAKE_TIMEOUT):
                        stream = await TLSStream.wrap(
                            stream, ssl_context=context, standard_compatible=False
                        )
                except Exception:  # timeout, TLS alert, peer gone: its failure alone
                    await anyio.aclose_forcefully(stream)
                    return
            await handler(stream)

        async with listener:
            task_status.started(format_address(bound_host, bound_port))
            await accept_forever(listener, serve_stream)

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


def server_context(tls: TlsOptions) -> ssl.SSLContext:
    if not tls.cert_file or not tls.key_file:
        raise ConfigError("TLS on a listener needs both a certificate file and a key file")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"cannot load TLS certificate {tls.cert_file!r} / key {tls.key_file!r}: {exc}"
        ) from exc
    return context


def client_context(tls: TlsOptions) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=tls.ca_file)
    if not tls.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if tls.cert_file and tls.key_file:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    return context


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
