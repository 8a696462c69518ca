"""What the store conformance suite builds on: the small-file config, messages with
properties encoded, opening a store for a block, reading a queue, comparing records."""

from __future__ import annotations

import time
import zlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from ...protocol.message import (
    StoredMessage,
    decode_record,
    encode_properties,
    pack_host,
    tags_code,
)
from ...store.api import (
    GetResult,
    GetStatus,
    MessageStore,
    MessageToStore,
    QueryResult,
    TagFilter,
)

StoreFactory = Callable[..., MessageStore]  # factory(directory, **config_overrides)

# small files, so that CommitLog, consume-queue and index files roll and chains share slots
SMALL_FILES = {
    "commit_log_file_size": 64 * 1024,
    "consume_queue_file_size": 20 * 100,
    "max_hash_slot_num": 256,
    "max_index_num": 512,
}
STORE_HOST = pack_host("192.168.0.1", 10911)
BORN_HOST = pack_host("10.0.0.7", 54321)
BORN_HOST_V6 = pack_host("fe80::7", 54321)
BORN_TIMESTAMP = 1_700_000_000_000
HOUR_MS = 3_600_000  # time-range margin: IndexFile entries keep seconds, not milliseconds
LONG_TOPIC = "%RETRY%" + "g" * 150  # over 127 bytes: stored as V2 records
TINY_RESERVED_TIME = 1e-9  # hours: everything but the newest file is expired


def quiet_cleanup() -> dict[str, Any]:
    """Files are deleted only when a test forces it: not at this hour of the day (the
    deleteWhen hour), not because the disk of the machine running the tests is well used."""
    return {
        "delete_when": f"{(time.localtime().tm_hour + 12) % 24:02d}",
        "disk_max_used_space_ratio": 100,
        "disk_space_clean_forcibly_ratio": 100,
    }


def expiry_config() -> dict[str, Any]:
    """Everything but the newest file is expired; deleted when a test forces it."""
    return {"file_reserved_time": TINY_RESERVED_TIME, **quiet_cleanup()}


@asynccontextmanager
async def opened_store(
    factory: StoreFactory, directory: Path, **overrides: Any
) -> AsyncIterator[MessageStore]:
    """A store from ``factory`` opened on ``directory`` for the block, closed after it."""
    store = factory(Path(directory), **overrides)
    await store.open()
    try:
        yield store
    finally:
        # no shielding scope here: a store may enter a task group in open() and leave it in
        # close(), which must then run at the same cancel-scope depth (it shields itself)
        await store.close()


def make_message(
    topic: str = "TopicTest",
    queue_id: int = 0,
    body: bytes = b"body",
    *,
    tags: str | None = None,
    keys: str | None = None,
    uniq_key: str | None = None,
    properties: dict[str, str] | None = None,
    **fields: Any,
) -> MessageToStore:
    """A message with TAGS/KEYS/UNIQ_KEY (and any other ``properties``) encoded."""
    pairs: dict[str, str] = {}
    if uniq_key is not None:
        pairs["UNIQ_KEY"] = uniq_key
    if tags is not None:
        pairs["TAGS"] = tags
    if keys is not None:
        pairs["KEYS"] = keys
    pairs.update(properties or {})
    fields.setdefault("born_timestamp", BORN_TIMESTAMP)
    fields.setdefault("born_host", BORN_HOST)
    return MessageToStore(topic, queue_id, body, encode_properties(pairs).encode(), **fields)


def decode_all(result: GetResult | QueryResult) -> list[StoredMessage]:
    """Every record of a result, each a whole record with a good body CRC."""
    return [decode_record(bytes(record), check_crc=True) for record in result.records]


def bodies(result: GetResult | QueryResult) -> list[bytes]:
    return [message.body for message in decode_all(result)]


def tag_filter(*tags: str) -> frozenset[int]:
    return frozenset(tags_code(tag) for tag in tags)


def int32(value: int) -> int:
    return ((value + 0x80000000) & 0xFFFFFFFF) - 0x80000000


async def read_queue(
    store: MessageStore,
    topic: str,
    queue_id: int,
    offset: int | None = None,
    tags: TagFilter = None,
) -> list[tuple[int, bytes]]:
    """(queue offset, record) of every entry from ``offset`` (the min offset) to the end."""
    offset = store.min_offset(topic, queue_id) if offset is None else offset
    found: list[tuple[int, bytes]] = []
    while True:
        result = await store.get(topic, queue_id, offset, 64, tags)
        if result.status not in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE):
            assert result.status in (GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.NO_MESSAGE_IN_QUEUE)
            return found
        assert result.next_begin_offset > offset, f"a read from {offset} made no progress"
        assert len(result.queue_offsets) == len(result.records)
        found += zip(result.queue_offsets, map(bytes, result.records), strict=True)
        offset = result.next_begin_offset


def assert_same_records(actual: Sequence[Any], expected: Sequence[Any], where: str) -> None:
    """Equal sequences of records (or (offset, record) pairs), failing with a short message."""
    assert len(actual) == len(expected), f"{where}: {len(actual)} records, not {len(expected)}"
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        if got != want:
            raise AssertionError(f"{where}: item {index} differs: {_brief(got)} != {_brief(want)}")


def _brief(item: Any) -> str:
    if isinstance(item, tuple):
        return "(" + ", ".join(_brief(part) for part in item) + ")"
    if isinstance(item, bytes | bytearray | memoryview):
        data = bytes(item)
        return f"<{len(data)} bytes crc {zlib.crc32(data):08x}>"
    return repr(item)
