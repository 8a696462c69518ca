"""The rocksdb store after a crash: acknowledged messages survive SIGKILL, nothing is
invented, a torn write-ahead log ends at the last whole put
(rocketmq_core.testing.store_crash does the killing)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rocketmq_core.protocol.message import decode_record, encode_properties
from rocketmq_core.store.api import GetStatus, MessageToStore, StoreConfig
from rocketmq_core.store.loader import create_store
from rocketmq_core.testing.backends import backends_for
from rocketmq_core.testing.store_crash import run_crash_cycles, soak_cycles

SYNC_CYCLES = soak_cycles(3)  # per backend; `tox -e soak` runs many more
ASYNC_CYCLES = soak_cycles(2)  # per backend


# what survives a kill is up to RocksDB's log, not the event loop: one flush mode per
# backend by default, both on each in `tox -e soak`
@pytest.mark.parametrize("backend", backends_for("asyncio"))
def test_sync_flush_acknowledged_messages_survive_sigkill(tmp_path: Path, backend: str) -> None:
    summary = run_crash_cycles(
        "rocksdb", tmp_path / "store", "sync", SYNC_CYCLES, seed=4111, backend=backend
    )
    summary.assert_sound(SYNC_CYCLES)


@pytest.mark.parametrize("backend", backends_for("trio"))
def test_async_flush_acknowledged_messages_survive_sigkill(tmp_path: Path, backend: str) -> None:
    # each put reaches the write-ahead log with a write(): the page cache outlives the process
    summary = run_crash_cycles(
        "rocksdb", tmp_path / "store", "async", ASYNC_CYCLES, seed=5023, backend=backend
    )
    summary.assert_sound(ASYNC_CYCLES)


TOPIC = "TornTopic"
MESSAGES = 200


def torn_message(number: int) -> MessageToStore:
    body = f"message {number:05d} ".encode() * 64
    properties = encode_properties({"TAGS": "torn", "KEYS": f"key-{number}"})
    return MessageToStore(TOPIC, 0, body, properties=properties.encode())


@pytest.mark.anyio
async def test_a_torn_log_end_loses_only_the_last_put_and_its_offset_is_reused(
    tmp_path: Path,
) -> None:
    source, root = tmp_path / "store", tmp_path / "crashed"
    store = create_store("rocksdb", StoreConfig(root_dir=str(source), flush="sync"))
    await store.open()
    try:
        results = [await store.put(torn_message(number)) for number in range(MESSAGES)]
        assert all(result.ok for result in results)
        # what a kill leaves: the files as they are while the store is open
        shutil.copytree(source, root)
    finally:
        await store.close()
    # ... with the last put half written to the write-ahead log
    (wal,) = sorted((root / "db").glob("*.log"))[-1:]
    data = wal.read_bytes()
    body = torn_message(MESSAGES - 1).body
    middle = data.rindex(body) + len(body) // 2
    wal.write_bytes(data[:middle] + bytes(byte ^ 0xFF for byte in data[middle : middle + 32]))

    config = StoreConfig(root_dir=str(root), flush="sync")
    store = create_store("rocksdb", config)
    await store.open()
    try:
        assert store.stats()["recovered_after_crash"] is True
        assert store.max_offset(TOPIC, 0) == MESSAGES - 1
        last = results[-1]
        assert store.max_commit_log_offset == last.commit_log_offset
        assert await store.message_at(last.commit_log_offset) is None
        found = []
        offset = 0
        while (result := await store.get(TOPIC, 0, offset, 64)).records:
            found += [decode_record(bytes(r), check_crc=True).body for r in result.records]
            offset = result.next_begin_offset
        assert found == [torn_message(n).body for n in range(MESSAGES - 1)]
        edge = await store.get(TOPIC, 0, MESSAGES - 1, 32)
        assert edge.status is GetStatus.OFFSET_OVERFLOW_ONE
        gone = await store.query_by_key(TOPIC, f"key-{MESSAGES - 1}", 8, 0, 2**62)
        assert gone.records == []
        again = await store.put(torn_message(MESSAGES + 1))
        assert (again.queue_offset, again.commit_log_offset) == (
            MESSAGES - 1,
            last.commit_log_offset,
        )
    finally:
        await store.close()
