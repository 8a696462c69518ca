"""The Transport contract: how bytes get between two remoting peers.

A transport moves whole byte streams; framing, requests and responses are the
remoting layer's. Plugins register transports through
``rocketmq_register_transports``; the TCP one is named ``tcp``.
"""

from __future__ import annotations

import errno
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from anyio.abc import ByteStream, TaskStatus

from ..errors import ConfigError

StreamHandler = Callable[[ByteStream], Awaitable[None]]


@dataclass(frozen=True)
class TlsOptions:
    """TLS settings: a server needs cert and key; a client may pin a CA."""

    cert_file: str | None = None
    key_file: str | None = None
    ca_file: str | None = None
    verify: bool = True  # clients: check the server's certificate
    server_hostname: str | None = None


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


def parse_address(address: str) -> tuple[str, int]:
    """``"host:port"`` or ``"[v6]:port"`` -> (host, port), as RocketMQ writes addresses."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
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
