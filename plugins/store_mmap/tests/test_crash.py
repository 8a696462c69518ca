"""The mmap store after a crash: acknowledged messages survive SIGKILL, nothing is
invented, a torn tail is cut (rocketmq_core.testing.store_crash does the killing)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rocketmq_store_mmap.checkpoint import Checkpoint

from rocketmq_core.protocol.message import decode_record, encode_properties
from rocketmq_core.store.api import GetStatus, MessageToStore, StoreConfig
from rocketmq_core.store.loader import create_store
from rocketmq_core.testing.store_crash import run_crash_cycles, soak_cycles

BACKENDS = ("asyncio", "trio")
SYNC_CYCLES = soak_cycles(4)  # per backend; `tox -e soak` runs ten times as many
ASYNC_CYCLES = soak_cycles(3)  # per backend


@pytest.mark.parametrize("backend", BACKENDS)
def test_sync_flush_acknowledged_messages_survive_sigkill(tmp_path: Path, backend: str) -> None:
    summary = run_crash_cycles(
        "mmap", tmp_path / "store", "sync", SYNC_CYCLES, seed=1117, backend=backend
    )
    summary.assert_sound(SYNC_CYCLES)


@pytest.mark.parametrize("backend", BACKENDS)
def test_async_flush_acknowledged_messages_survive_sigkill(tmp_path: Path, backend: str) -> None:
    # the page cache keeps what was written into the mapping when the process dies
    summary = run_crash_cycles(
        "mmap", tmp_path / "store", "async", ASYNC_CYCLES, seed=2029, backend=backend
    )
    summary.assert_sound(ASYNC_CYCLES)


TOPIC = "TornTopic"
MESSAGES = 300  # ~1.1 KiB records: the log rolls into a second 256 KiB file


def torn_config(root: Path) -> StoreConfig:
    return StoreConfig(
        root_dir=str(root),
        flush="sync",
        commit_log_file_size=256 * 1024,
        consume_queue_file_size=20 * 1000,
        max_hash_slot_num=1000,
        max_index_num=4000,
    )


def torn_message(number: int) -> MessageToStore:
    body = f"message {number:05d} ".encode() * 64
    properties = encode_properties({"TAGS": "torn", "KEYS": f"key-{number}", "WAIT": "true"})
    return MessageToStore(TOPIC, 0, body, properties=properties.encode())


async def read_all(store, start: int = 0) -> list[tuple[int, bytes]]:
    found = []
    offset = start
    while True:
        result = await store.get(TOPIC, 0, offset, 32)
        if not result.records:
            return found
        for queue_offset, record in zip(result.queue_offsets, result.records, strict=True):
            found.append((queue_offset, decode_record(bytes(record), check_crc=True).body))
        offset = result.next_begin_offset


@pytest.mark.anyio
async def test_a_torn_last_record_is_cut_and_its_queue_offset_reused(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = create_store("mmap", torn_config(root))
    await store.open()
    results = [await store.put(torn_message(number)) for number in range(MESSAGES)]
    assert all(result.ok for result in results)
    await store.close()

    # tear the last record: garbage in the middle of its body, and an unclean stop
    last = results[-1]
    # the file holding the last record (a next file may already be made, empty)
    newest = max(p for p in (root / "commitlog").iterdir() if int(p.name) <= last.commit_log_offset)
    start = int(newest.name)
    assert start > 0  # it rolled: the last record is not in the first file
    body = torn_message(MESSAGES - 1).body
    data = newest.read_bytes()
    body_at = data.index(body, last.commit_log_offset - start)
    middle = body_at + len(body) // 2
    with newest.open("r+b") as file:
        file.seek(middle)
        file.write(bytes(byte ^ 0xFF for byte in data[middle : middle + 32]))
    (root / "abort").touch()

    store = create_store("mmap", torn_config(root))
    await store.open()
    try:
        assert store.stats()["recovered_after_crash"] is True
        assert store.max_offset(TOPIC, 0) == MESSAGES - 1
        assert store.max_commit_log_offset == last.commit_log_offset
        assert await store.message_at(last.commit_log_offset) is None
        found = await read_all(store)
        assert found == [(n, torn_message(n).body) for n in range(MESSAGES - 1)]
        edge = await store.get(TOPIC, 0, MESSAGES - 1, 32)
        assert edge.status is GetStatus.OFFSET_OVERFLOW_ONE and not edge.records

        again = await store.put(torn_message(MESSAGES + 1))
        assert again.ok
        assert again.queue_offset == MESSAGES - 1  # no gap
        assert again.commit_log_offset == last.commit_log_offset
        assert await read_all(store, MESSAGES - 2) == [
            (MESSAGES - 2, torn_message(MESSAGES - 2).body),
            (MESSAGES - 1, torn_message(MESSAGES + 1).body),
        ]
        assert (await store.get(TOPIC, 0, MESSAGES, 32)).status is GetStatus.OFFSET_OVERFLOW_ONE
    finally:
        await store.close()

    # and a clean reopen keeps exactly that
    store = create_store("mmap", torn_config(root))
    await store.open()
    try:
        assert store.stats()["recovered_after_crash"] is False
        assert store.max_offset(TOPIC, 0) == MESSAGES
        found = await read_all(store)
        assert [body for _, body in found] == [
            *(torn_message(n).body for n in range(MESSAGES - 1)),
            torn_message(MESSAGES + 1).body,
        ]
    finally:
        await store.close()


@pytest.mark.anyio
async def test_a_crash_just_after_a_file_was_closed_resumes_in_the_next_file(
    tmp_path: Path,
) -> None:
    # the kill came after the blank record closed the first file, before any record
    # reached the second: the log ends exactly at a file boundary
    root = tmp_path / "store"
    config = torn_config(root)
    store = create_store("mmap", config)
    await store.open()
    results = []
    while not results or results[-1].commit_log_offset < config.commit_log_file_size:
        results.append(await store.put(torn_message(len(results))))
    assert all(result.ok for result in results)
    await store.close()
    in_first = len(results) - 1
    second = root / "commitlog" / f"{config.commit_log_file_size:020d}"
    second.write_bytes(bytes(config.commit_log_file_size))
    checkpoint = Checkpoint(root / "checkpoint")
    checkpoint.load()
    checkpoint.dispatched_offset = 0  # it never vouched for the second file
    checkpoint.save()
    (root / "abort").touch()

    store = create_store("mmap", config)
    await store.open()
    try:
        assert store.max_offset(TOPIC, 0) == in_first
        assert store.max_commit_log_offset == config.commit_log_file_size
        again = await store.put(torn_message(10_000))
        assert again.ok, again
        assert again.queue_offset == in_first
        assert again.commit_log_offset == config.commit_log_file_size
        found = await read_all(store)
        assert [body for _, body in found] == [
            *(torn_message(n).body for n in range(in_first)),
            torn_message(10_000).body,
        ]
    finally:
        await store.close()
