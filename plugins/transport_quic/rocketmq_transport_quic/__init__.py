"""QUIC transport for rocketmq-py: the same remoting frames over QUIC (aioquic)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .transport import ALPN, QuicSettings, QuicTransport

__all__ = ["ALPN", "QuicSettings", "QuicTransport"]


def __getattr__(name: str) -> Any:
    # imported on first use: loading the plugin must not load aioquic
    if name in __all__:
        from . import transport

        return getattr(transport, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
