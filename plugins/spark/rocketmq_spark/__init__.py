"""PySpark data source ``rocketmq``: read topics in batch or Structured Streaming, and
write DataFrames to them (see the README)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketmq_core.lazy import lazy_exports

if TYPE_CHECKING:
    from .source import RocketMQDataSource, register

__all__ = ["RocketMQDataSource", "register"]

__getattr__ = lazy_exports(__name__, "source", __all__)
