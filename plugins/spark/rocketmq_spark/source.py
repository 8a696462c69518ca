"""The ``rocketmq`` PySpark data source: batch and streaming reads and writes.

    spark.read.format("rocketmq").option("nameServer", "127.0.0.1:9876")
        .option("subscribe", "Orders").load()

Options are checked on the driver when the query is planned; a mistake stops it there
with an OptionError naming the option (SPARK.md §4: keep ``__init__`` cheap and every
reader and writer picklable).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource

from .options import batch_source_options, sink_options, stream_source_options
from .schema import SOURCE_DDL


class RocketMQDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        return SOURCE_DDL

    def reader(self, schema: Any) -> Any:
        from .reader import RocketMQBatchReader

        return RocketMQBatchReader(batch_source_options(self.options))

    def streamReader(self, schema: Any) -> Any:
        from .reader import RocketMQStreamReader

        return RocketMQStreamReader(stream_source_options(self.options))

    def writer(self, schema: Any, overwrite: bool) -> Any:
        from .writer import RocketMQBatchWriter, check_columns

        if overwrite:
            raise ValueError('a topic is appended to, never overwritten: use .mode("append")')
        settings = sink_options(self.options, streaming=False)
        check_columns(schema, settings)
        return RocketMQBatchWriter(settings)

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        from .writer import RocketMQStreamWriter, check_columns

        settings = sink_options(self.options, streaming=True)
        check_columns(schema, settings)
        return RocketMQStreamWriter(settings)


def register(spark: Any) -> None:
    """Register the source with ``spark`` by hand (format("rocketmq") finds it anyway
    where this package is installed for the Python workers)."""
    spark.dataSource.register(RocketMQDataSource)
