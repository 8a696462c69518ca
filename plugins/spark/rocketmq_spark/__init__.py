"""PySpark data source ``rocketmq``: read topics in batch or Structured Streaming, and
write DataFrames to them (see the README)."""

from .source import RocketMQDataSource, register

__all__ = ["RocketMQDataSource", "register"]
