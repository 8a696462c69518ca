"""PySpark data source ``rocketmq``: read topics in batch or Structured Streaming, and
write DataFrames to them (see the README)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .source import RocketMQDataSource, register

__all__ = ["RocketMQDataSource", "register"]


def __getattr__(name: str) -> Any:
    # imported on first use: loading the plugin (a broker, a client) must not load pyspark
    if name in __all__:
        from . import source

        return getattr(source, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
