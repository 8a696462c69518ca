"""The Transport contract: how bytes get between two remoting peers.

A transport moves whole byte streams; framing, requests and responses are the
remoting layer's. Plugins register transports through
``rocketmq_register_transports``; the TCP one is named ``tcp``.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, TypeVar

import anyio
from anyio.abc import ByteStream, Listener, TaskGroup, TaskStatus

from ..errors import ConfigError

# a coroutine function, as a task group starts it
StreamHandler = Callable[[ByteStream], Coroutine[Any, Any, None]]
Accepted = TypeVar("Accepted")
Accepted_co = TypeVar("Accepted_co", covariant=True)

log = logging.getLogger("rocketmq.remoting")
# accept() failures that pass: out of descriptors or memory, a peer gone before accept
TRANSIENT_ACCEPT_ERRORS = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.ECONNABORTED, errno.EPROTO}
)
ACCEPT_BACKOFF = (0.01, 1.0)  # first and longest pause after a failed accept (s)
ACCEPT_LOG_INTERVAL = 10.0


class TlsMode(StrEnum):
    """How a TCP listener treats TLS (Apache's ``tls.server.mode``)."""

    DISABLED = "disabled"  # plain only
    PERMISSIVE = "permissive"  # plain and TLS on one port, told apart by the first byte
    ENFORCING = "enforcing"  # TLS only


class ClientAuth(StrEnum):
    """Whether a TLS listener asks clients for a certificate (``tls.server.need.client.auth``)."""

    NONE = "none"
    OPTIONAL = "optional"  # verified when sent
    REQUIRE = "require"


@dataclass(frozen=True)
class TlsOptions:
    """TLS settings. A server needs cert and key, or ``self_signed`` (a certificate made
    at start, Apache's test mode); ``mode`` says whether it also serves plain clients and
    ``client_auth`` whether clients show a certificate, verified with ``ca_file``. A
    client verifies the server with ``ca_file`` (else the system's CAs) unless not
    ``verify``, and shows ``cert_file`` when set (mutual TLS)."""

    cert_file: str | None = None
    key_file: str | None = None
    ca_file: str | None = None
    verify: bool = True  # clients: check the server's certificate
    server_hostname: str | None = None
    key_password: str | None = None  # of an encrypted key file
    check_hostname: bool = True  # clients: the certificate must name the host dialled
    mode: TlsMode = TlsMode.ENFORCING  # servers
    client_auth: ClientAuth = ClientAuth.NONE  # servers
    self_signed: bool = False  # servers without cert_file
    alpn_protocols: tuple[str, ...] = ()  # servers: the ALPN protocols offered (gRPC: h2)

    def check_client_files(self) -> None:
        """A ConfigError naming the file when the CA, certificate or key file cannot be
        read (the TLS libraries would fail later, deep in a handshake)."""
        for what, path in (
            ("CA file", self.ca_file),
            ("certificate file", self.cert_file),
            ("key file", self.key_file),
        ):
            if path is None:
                continue
            try:
                with open(path, "rb"):
                    pass
            except OSError as exc:
                raise ConfigError(
                    f"TLS {what} {path}: {exc.strerror}; give a readable PEM file"
                ) from None


class Transport(Protocol):
    name: str

    async def listen(
        self,
        host: str,
        port: int,
        handler: StreamHandler,
        *,
        tls: TlsOptions | None = None,
        task_status: TaskStatus[str],
    ) -> None:
        """Accept connections until cancelled, calling ``handler(stream)`` for each
        in a task of its own; report the bound ``host:port`` through
        ``task_status.started`` once connections can be accepted (port 0 picks one).
        ``handler`` owns the stream and closes it. When the address cannot be
        bound, raise ``listen_error(host, port, oserror)`` (a ConfigError)."""

    async def connect(self, host: str, port: int, *, tls: TlsOptions | None = None) -> ByteStream:
        """Open a stream to ``host:port``; raise OSError when that fails."""


@dataclass(frozen=True)
class Endpoint:
    """A peer's address with the transport that reaches it: ``quic://host:port``.

    Without a scheme (``host:port``, as RocketMQ writes every address) the connecting
    side's default transport is meant, which is ``tcp`` unless configured otherwise.
    """

    scheme: str | None
    host: str
    port: int

    @property
    def address(self) -> str:
        return format_address(self.host, self.port)

    def __str__(self) -> str:
        return f"{self.scheme}://{self.address}" if self.scheme else self.address


def parse_endpoint(address: str) -> Endpoint:
    """``"quic://host:port"``, ``"tcp://host:port"`` or ``"host:port"`` -> Endpoint."""
    scheme, separator, rest = address.partition("://")
    if not separator:
        return Endpoint(None, *parse_address(address))
    if not scheme.isidentifier():
        raise ConfigError(
            f"bad address {address!r}: expected transport://host:port, like quic://127.0.0.1:9876"
        )
    try:
        host, port = parse_address(rest)
    except ConfigError:
        raise ConfigError(
            f"bad address {address!r}: expected {scheme}://host:port, like"
            f" {scheme}://127.0.0.1:9876"
        ) from None
    return Endpoint(scheme.lower(), host, port)


def endpoint_scheme(address: str) -> str | None:
    """The transport an address names, or None for a bare ``host:port``."""
    scheme, separator, _rest = address.partition("://")
    return scheme.lower() if separator else None


def parse_address(address: str) -> tuple[str, int]:
    """``"host:port"`` or ``"[v6]:port"`` -> (host, port), as RocketMQ writes addresses."""
    host, sep, port = address.rpartition(":")
    if (
        not sep
        or not host
        or "/" in host  # a mistyped scheme, like quic:/host:port
        or not port.isdigit()
        or not 0 <= int(port) <= 65535
    ):
        raise ConfigError(f"bad address {address!r}: expected host:port, like 127.0.0.1:9876")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def listen_error(host: str, port: int, error: OSError) -> ConfigError:
    """What a transport raises when it cannot listen: the address and what to do."""
    address = format_address(host, port)
    hint = ""
    if error.errno == errno.EADDRINUSE:
        hint = "; another server is using it: stop it or choose another port"
    elif error.errno == errno.EADDRNOTAVAIL:
        hint = "; no local interface has that address"
    elif error.errno == errno.EACCES:
        hint = "; ports below 1024 need privileges"
    return ConfigError(f"cannot listen on {address}: {error.strerror or error}{hint}")


def encrypting_transports(
    transports: Callable[[str], Transport], tls: TlsOptions
) -> Callable[[str], Transport]:
    """Transports by name for dialing, where those that always encrypt (all but
    ``tcp``, whose TLS is the client's own choice) verify peers with ``tls``."""

    def transport_named(name: str) -> Transport:
        transport = transports(name)
        return transport if name == "tcp" else WithTls(transport, tls)

    return transport_named


class WithTls:
    """``transport`` whose connects use ``tls``, whatever TLS options the caller has."""

    def __init__(self, transport: Transport, tls: TlsOptions) -> None:
        self.name = transport.name
        self.listen = transport.listen
        self._transport = transport
        self._tls = tls

    async def connect(self, host: str, port: int, *, tls: TlsOptions | None = None) -> ByteStream:
        return await self._transport.connect(host, port, tls=self._tls)


async def accept_forever(listener: Listener[ByteStream], handler: StreamHandler) -> None:
    """``listener.serve(handler)`` that outlives accept() failures: when the process is
    out of descriptors (EMFILE) a pending connection stays in the backlog, so retrying
    at once would spin; pause, doubling up to a second, and log once in a while.
    A MultiListener (IPv4 and IPv6) has each of its listeners served so."""
    await accept_each(listener_members(listener), handler)


def listener_members(listener: Listener[ByteStream]) -> list[Any]:
    """The socket listeners of ``listener``: a MultiListener's members, else itself."""
    return list(getattr(listener, "listeners", None) or [listener])


class Acceptor(Protocol[Accepted_co]):
    """What accepts connections one at a time: an anyio socket listener (a stream each)
    or a transport's own acceptor (a raw socket each, say)."""

    async def accept(self) -> Accepted_co: ...


async def accept_each(
    acceptors: Iterable[Acceptor[Accepted]],
    handler: Callable[[Accepted], Coroutine[Any, Any, None]],
) -> None:
    """Accept from every acceptor until cancelled, as ``accept_forever`` does, and run
    ``handler(connection)`` for each connection in a task of its own."""
    async with anyio.create_task_group() as task_group:
        for acceptor in acceptors:
            task_group.start_soon(_accept_loop, acceptor, handler, task_group)


async def _accept_loop(
    listener: Acceptor[Accepted],
    handler: Callable[[Accepted], Coroutine[Any, Any, None]],
    task_group: TaskGroup,
) -> None:
    pause, longest = ACCEPT_BACKOFF
    failures = 0
    logged_at = -ACCEPT_LOG_INTERVAL
    while True:
        try:
            stream = await listener.accept()
        except OSError as exc:
            if exc.errno not in TRANSIENT_ACCEPT_ERRORS:
                raise
            failures += 1
            now = anyio.current_time()
            if now - logged_at >= ACCEPT_LOG_INTERVAL:
                log.warning(
                    "cannot accept connections: %s (%d failures so far); retrying,"
                    " connections wait in the backlog. Raise the open-files limit"
                    " (ulimit -n) or lower serverMaxConnections",
                    exc.strerror or exc,
                    failures,
                )
                logged_at = now
            await anyio.sleep(pause)
            pause = min(pause * 2, longest)
            continue
        pause = ACCEPT_BACKOFF[0]
        task_group.start_soon(handler, stream)
