"""Found by PySpark itself: it registers the ``DefaultSource`` of every top-level
module named ``pyspark_*``, so ``format("rocketmq")`` works without a register call."""

from rocketmq_spark.source import RocketMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
