"""How the store lays its data out in RocksDB: one column family per concern, and keys
that sort the way they are read (big-endian numbers, length-prefixed strings).

    commitlog     offset (8)                              -> the stored record, as pulled
    consumequeue  queue number (4), queue offset (8)      -> offset (8), size (4),
                                                             tags code (8), store time (8)
    index         topic, key (each 2-byte length + UTF-8),
                  store time (8), offset (8)              -> empty
    meta          b"q" + queue number (4)                 -> queue id (4) + topic
                  b"m" + queue number (4)                 -> the queue's min offset (8)

"Offset" is the record's CommitLog offset: a position in one virtual log, advanced by
each record's size, as in RocketMQ; it is the key of the record and the base of its
offset message id. Queues are numbered when first written, so a consume-queue key is 12
bytes whatever the topic's length. A queue's min offset is kept only once retention has
raised it (every entry of the queue may be gone by then).
"""

from __future__ import annotations

import struct

COMMITLOG = "commitlog"
CONSUME_QUEUE = "consumequeue"
INDEX = "index"
META = "meta"
COLUMN_FAMILIES = (COMMITLOG, CONSUME_QUEUE, INDEX, META)

LOG_KEY = struct.Struct(">Q")
QUEUE_KEY = struct.Struct(">IQ")
QUEUE_ENTRY = struct.Struct(">qiqq")
QUEUE_NUMBER = struct.Struct(">I")
QUEUE_ID = struct.Struct(">i")
MIN_OFFSET = struct.Struct(">q")
INDEX_TAIL = struct.Struct(">QQ")  # store time, offset
_LENGTH = struct.Struct(">H")

QUEUE_NAME_PREFIX = b"q"
QUEUE_MIN_PREFIX = b"m"


def queue_name_key(number: int) -> bytes:
    return QUEUE_NAME_PREFIX + QUEUE_NUMBER.pack(number)


def queue_name(topic: str, queue_id: int) -> bytes:
    return QUEUE_ID.pack(queue_id) + topic.encode()


def parse_queue_name(value: bytes) -> tuple[str, int]:
    (queue_id,) = QUEUE_ID.unpack_from(value)
    return value[QUEUE_ID.size :].decode(), queue_id


def queue_min_key(number: int) -> bytes:
    return QUEUE_MIN_PREFIX + QUEUE_NUMBER.pack(number)


def index_prefix(topic: str, key: str) -> bytes:
    """Every entry of ``key`` in ``topic`` starts with this (and no other entry does)."""
    topic_bytes, key_bytes = topic.encode(), key.encode()
    return _LENGTH.pack(len(topic_bytes)) + topic_bytes + _LENGTH.pack(len(key_bytes)) + key_bytes


def index_key(prefix: bytes, store_time: int, offset: int) -> bytes:
    return prefix + INDEX_TAIL.pack(store_time, offset)


def index_entry_offset(key: bytes) -> int:
    """The CommitLog offset an index entry points at (its last 8 bytes)."""
    return LOG_KEY.unpack_from(key, len(key) - LOG_KEY.size)[0]


def fits_index(key: str) -> bool:
    """Keys longer than a 2-byte length can say are not indexed."""
    return len(key.encode()) <= 0xFFFF
