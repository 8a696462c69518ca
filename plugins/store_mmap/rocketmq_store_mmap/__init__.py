"""The CommitLog store of rocketmq-py: RocketMQ's on-disk layout in mapped files."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketmq_core.lazy import lazy_exports

if TYPE_CHECKING:
    from .store import MmapStore

__all__ = ["MmapStore"]

__getattr__ = lazy_exports(__name__, "store", __all__)
