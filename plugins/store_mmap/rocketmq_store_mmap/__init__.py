"""The CommitLog store of rocketmq-py: RocketMQ's on-disk layout in mapped files."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store import MmapStore

__all__ = ["MmapStore"]


def __getattr__(name: str) -> Any:
    # imported on first use: loading the plugin must not load the store
    if name in __all__:
        from . import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
