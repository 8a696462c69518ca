"""The columns of the ``rocketmq`` source: one Spark schema, one Arrow schema, same order."""

from __future__ import annotations

# the order is the contract: read() yields Arrow batches in exactly this shape
SOURCE_COLUMNS = [
    ("topic", "STRING"),
    ("broker_name", "STRING"),
    ("queue_id", "INT"),
    ("queue_offset", "BIGINT"),
    ("msg_id", "STRING"),
    ("keys", "STRING"),
    ("tags", "STRING"),
    ("body", "BINARY"),
    ("properties", "MAP<STRING, STRING>"),
    ("born_timestamp", "TIMESTAMP"),
    ("store_timestamp", "TIMESTAMP"),
    ("reconsume_times", "INT"),
]
SOURCE_DDL = ", ".join(f"{name} {kind}" for name, kind in SOURCE_COLUMNS)


def arrow_schema():
    """The Arrow twin of SOURCE_DDL (pyarrow is imported here: workers import lazily)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("topic", pa.string()),
            ("broker_name", pa.string()),
            ("queue_id", pa.int32()),
            ("queue_offset", pa.int64()),
            ("msg_id", pa.string()),
            ("keys", pa.string()),
            ("tags", pa.string()),
            ("body", pa.binary()),
            ("properties", pa.map_(pa.string(), pa.string())),
            ("born_timestamp", pa.timestamp("us", tz="UTC")),
            ("store_timestamp", pa.timestamp("us", tz="UTC")),
            ("reconsume_times", pa.int32()),
        ]
    )
