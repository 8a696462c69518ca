"""QUIC transport for rocketmq-py: the same remoting frames over QUIC (aioquic)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketmq_core.lazy import lazy_exports

if TYPE_CHECKING:
    from .transport import ALPN, QuicSettings, QuicTransport

__all__ = ["ALPN", "QuicSettings", "QuicTransport"]

__getattr__ = lazy_exports(__name__, "transport", __all__)
