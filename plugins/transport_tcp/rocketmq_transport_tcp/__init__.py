"""TCP (and TLS) transport for rocketmq-py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketmq_core.lazy import lazy_exports

if TYPE_CHECKING:
    from .transport import TcpTransport

__all__ = ["TcpTransport"]

__getattr__ = lazy_exports(__name__, "transport", __all__)
