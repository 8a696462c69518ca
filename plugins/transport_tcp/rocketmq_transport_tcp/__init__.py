"""TCP (and TLS) transport for rocketmq-py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .transport import TcpTransport

__all__ = ["TcpTransport"]


def __getattr__(name: str) -> Any:
    # imported on first use: loading the plugin must not load the transport
    if name in __all__:
        from . import transport

        return getattr(transport, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
