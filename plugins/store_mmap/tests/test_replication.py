"""A slave store fed its master's CommitLog bytes (docs/spec/HA.md §2, §4): the same
bytes, the same queues at the same offsets, the same records, found by the same keys;
started mid-stream, restarted with an incomplete record, killed while appending."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from test_append_kernel import FailingDispatcher

from rocketmq_core.errors import StoreError
from rocketmq_core.protocol.constants import SCHEDULE_TOPIC
from rocketmq_core.protocol.ha import DEFAULT_TRANSFER_BATCH, encode_transfer_header
from rocketmq_core.protocol.message import BLANK_SIZE, decode_record, encode_properties
from rocketmq_core.store.api import (
    GetStatus,
    MessageToStore,
    ReplicationError,
    ReplicationSource,
    ReplicationTarget,
    StoreConfig,
    replication_refusal,
)
from rocketmq_core.store.loader import create_store

FILE_SIZE = 64 * 1024  # small: the log rolls and files end in blank records
QUEUE_FILE_SIZE = 20 * 100  # 100 entries a queue file: a mid-stream queue starts in a later one
CHUNKS = (7, DEFAULT_TRANSFER_BATCH, 1000, 13, 4096, 1)  # odd sizes: records split anywhere
LONG_TOPIC = "T" * 130  # over 127 bytes: the V2 record layout


def store_config(root: Path) -> StoreConfig:
    return StoreConfig(
        root_dir=str(root),
        commit_log_file_size=FILE_SIZE,
        consume_queue_file_size=QUEUE_FILE_SIZE,
        max_hash_slot_num=1000,
        max_index_num=4000,
    )


async def opened(root: Path):
    store = create_store("mmap", store_config(root))
    await store.open()
    return store


def message(topic: str, queue_id: int, number: int, **properties: str) -> MessageToStore:
    body = f"{topic[:8]}-{queue_id}-{number:05d} ".encode() * (1 + number % 37)
    encoded = encode_properties({"TAGS": f"tag{number % 3}", **properties}).encode()
    return MessageToStore(topic, queue_id, body, properties=encoded, born_timestamp=number)


async def fill_master(master, rounds: int = 5) -> list[int]:
    """Singles, batches, keyed and delayed messages over several files; returns the
    CommitLog offset of every record."""
    offsets: list[int] = []
    number = itertools.count()
    for _ in range(rounds):
        for queue_id in range(4):
            for _ in range(20):
                result = await master.put(message("Orders", queue_id, next(number)))
                offsets += result.commit_log_offsets
        batch = [message("Batched", 1, next(number)) for _ in range(9)]
        offsets += (await master.put_batch(batch)).commit_log_offsets
        for _ in range(5):
            n = next(number)
            keyed = message("Keyed", 0, n, KEYS=f"order-{n} customer-{n % 4}")
            offsets += (await master.put(keyed)).commit_log_offsets
        for level in (1, 3):
            n = next(number)
            parked = message("Later", 0, n).parked(
                SCHEDULE_TOPIC, level - 1, {"TAGS": "later", "DELAY": str(level)}, tags_code=n
            )
            offsets += (await master.put(parked)).commit_log_offsets
        offsets += (await master.put(message(LONG_TOPIC, 2, next(number)))).commit_log_offsets
    return offsets


def replicate(master, slave, start: int, end: int | None = None) -> int:
    """Feed ``slave`` from ``start`` as an HA connection would, in odd-sized reads, up to
    ``end`` (default: the master's end); returns where it stopped."""
    end = master.max_commit_log_offset if end is None else end
    offset = start
    for chunk in itertools.cycle(CHUNKS):
        if offset >= end:
            return offset
        data = master.read_commit_log(offset, min(chunk, end - offset))
        assert data, f"nothing to read at {offset} below {end}"
        slave.append_replicated(offset, data)
        offset += len(data)
        assert slave.max_commit_log_offset == offset
    raise AssertionError("unreachable")


def commit_log_bytes(store, start: int) -> bytes:
    parts, offset = [], start
    while data := store.read_commit_log(offset, 1 << 20):
        parts.append(data)
        offset += len(data)
    assert offset == store.max_commit_log_offset
    return b"".join(parts)


async def queue_contents(store, topic: str, queue_id: int, start: int):
    found, offset = [], start
    while True:
        result = await store.get(topic, queue_id, offset, 32)
        if not result.records:
            return found
        found += zip(result.queue_offsets, map(bytes, result.records), strict=True)
        offset = result.next_begin_offset


async def assert_replica(master, slave, start: int = 0) -> None:
    """``slave`` holds the master's log from ``start`` on, and every queue's records in it."""
    assert slave.max_commit_log_offset == master.max_commit_log_offset
    assert commit_log_bytes(slave, start) == commit_log_bytes(master, start)
    queues = master.queues()
    assert slave.queues() == queues
    for topic, queue_ids in queues.items():
        for queue_id in queue_ids:
            assert slave.max_offset(topic, queue_id) == master.max_offset(topic, queue_id)
            expected = [
                (queue_offset, record)
                for queue_offset, record in await queue_contents(master, topic, queue_id, 0)
                if decode_record(record).commit_log_offset >= start
            ]
            low = expected[0][0] if expected else master.max_offset(topic, queue_id)
            if start == 0:
                assert slave.min_offset(topic, queue_id) == master.min_offset(topic, queue_id)
            else:
                assert slave.min_offset(topic, queue_id) == low
            assert await queue_contents(slave, topic, queue_id, low) == expected


async def assert_keys_found(master, slave) -> None:
    end = 2**62
    for key in ("customer-1", "customer-2"):
        expected = await master.query_by_key("Keyed", key, 32, 0, end)
        found = await slave.query_by_key("Keyed", key, 32, 0, end)
        assert expected.records and sorted(map(bytes, found.records)) == sorted(
            map(bytes, expected.records)
        )


@pytest.mark.anyio
async def test_a_slave_fed_in_odd_chunks_equals_its_master(tmp_path: Path) -> None:
    master = await opened(tmp_path / "master")
    slave = await opened(tmp_path / "slave")
    try:
        assert isinstance(master, ReplicationSource) and isinstance(slave, ReplicationTarget)
        assert replication_refusal(master) is None
        assert master.commit_log_file_size == FILE_SIZE
        await fill_master(master)
        assert master.max_commit_log_offset > 2 * FILE_SIZE
        replicate(master, slave, 0)
        await assert_replica(master, slave)
        await assert_keys_found(master, slave)
        parked = await slave.get(SCHEDULE_TOPIC, 2, 0, 32)
        assert parked.status is GetStatus.FOUND
        assert decode_record(bytes(parked.records[0])).properties["REAL_TOPIC"] == "Later"
        # the heartbeat: nothing to append, the offset still checked
        slave.append_replicated(slave.max_commit_log_offset, b"")
        # the master goes on; so does the slave, from where it is
        await fill_master(master, rounds=1)
        replicate(master, slave, slave.max_commit_log_offset)
        await assert_replica(master, slave)
    finally:
        await slave.close()
    slave = await opened(tmp_path / "slave")  # and after a clean restart
    try:
        await assert_replica(master, slave)
        await assert_keys_found(master, slave)
    finally:
        await slave.close()
        await master.close()


@pytest.mark.anyio
async def test_a_slave_started_mid_stream_has_its_masters_queue_offsets(tmp_path: Path) -> None:
    master = await opened(tmp_path / "master")
    slave = await opened(tmp_path / "slave")
    try:
        await fill_master(master, rounds=8)
        end = master.max_commit_log_offset
        start = end - end % FILE_SIZE  # what a master sends a slave that reports 0
        assert master.min_offset("Orders", 0) == 0 and start > 0
        replicate(master, slave, start)
        assert slave.min_commit_log_offset == start
        await assert_replica(master, slave, start)
        # the queue's first offset is past its first queue file (100 entries)
        assert slave.min_offset("Orders", 0) > QUEUE_FILE_SIZE // 20
        low = slave.min_offset("Orders", 0)
        too_small = await slave.get("Orders", 0, low - 1, 32)
        assert too_small.status is GetStatus.OFFSET_TOO_SMALL and not too_small.records
    finally:
        await slave.close()
    slave = await opened(tmp_path / "slave")
    try:
        await assert_replica(master, slave, start)
        await fill_master(master, rounds=1)
        replicate(master, slave, slave.max_commit_log_offset)
        await assert_replica(master, slave, start)
    finally:
        await slave.close()
        await master.close()


@pytest.mark.anyio
async def test_bytes_that_do_not_fit_are_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    master = await opened(tmp_path / "master")
    slave = await opened(tmp_path / "slave")
    try:
        offsets = await fill_master(master, rounds=1)
        with pytest.raises(ReplicationError, match="starts at a file boundary"):
            slave.append_replicated(100, b"x")
        assert slave.max_commit_log_offset == 0
        end = replicate(master, slave, 0, offsets[3] + 5)
        with pytest.raises(ReplicationError, match=f"the master must send from {end}"):
            slave.append_replicated(end + 1, b"x")
        with pytest.raises(ReplicationError, match=f"the master must send from {end}"):
            slave.append_replicated(end - 1, b"")
        with pytest.raises(ReplicationError, match="cross the end of the file"):
            slave.append_replicated(end, bytes(FILE_SIZE))
        # not a record where the next one must start
        boundary = replicate(master, slave, end, offsets[4])
        with pytest.raises(ReplicationError, match="not a record"):
            slave.append_replicated(boundary, b"\x00\x00\x01\x00garbage!")
        assert slave.max_commit_log_offset == boundary == offsets[4]
        assert slave.max_offset("Orders", 0) == 4
        replicate(master, slave, boundary)
        await assert_replica(master, slave)
    finally:
        await slave.close()
        await master.close()


def commit_log_syncs(
    monkeypatch: pytest.MonkeyPatch,
    store_root: Path,
    entered: threading.Event | None = None,
    gate: threading.Event | None = None,
) -> list[str]:
    """The fdatasyncs of ``store_root``'s CommitLog files from now on, by path; with
    ``gate``, each one sets ``entered`` and waits for ``gate`` before it runs."""
    synced: list[str] = []
    fdatasync, commit_log = os.fdatasync, str(store_root / "commitlog")

    def watched(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.startswith(commit_log):
            if gate is not None and entered is not None:
                entered.set()
                assert gate.wait(10), "the test never let the flush go on"
            synced.append(path)
        fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", watched)
    return synced


@pytest.mark.anyio
async def test_bytes_sent_again_after_a_cut_during_a_flush_are_flushed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flush begins with a slave's last record still incomplete; before it ends, the
    rest of the record arrives, a dispatcher refuses it, and the log is cut at its start.
    The flush proves nothing past the cut: when the master sends those bytes again,
    the next flush syncs them (it took the old end for flushed and synced nothing)."""
    master = await opened(tmp_path / "master")
    slave = await opened(tmp_path / "slave")
    entered, gate = threading.Event(), threading.Event()
    try:
        offsets = await fill_master(master, rounds=1)
        refused = offsets[40]
        slave.add_dispatcher(FailingDispatcher(refused, StoreError("refused by the test")))
        old_end = replicate(master, slave, 0, refused + 30)  # its record incomplete
        flusher = slave._flusher
        synced = commit_log_syncs(monkeypatch, tmp_path / "slave", entered, gate)
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(flusher.flush)
            try:
                assert await anyio.to_thread.run_sync(entered.wait, 5), "no flush began"
                with pytest.raises(ReplicationError, match=f"now ends at {refused}"):
                    replicate(master, slave, old_end, offsets[41])
            finally:
                gate.set()
        assert slave.max_commit_log_offset == refused
        last = slave.commitlog.files.last
        assert flusher.flushed == refused and last.start + last.flushed <= refused
        synced.clear()
        replicate(master, slave, refused, old_end)  # sent again, up to the old end
        await flusher.flush()
        assert synced, "the bytes sent again were not synced"
        assert (flusher.flushed, last.start + last.flushed) == (old_end, old_end)
        replicate(master, slave, old_end)
        await assert_replica(master, slave)
    finally:
        gate.set()
        await slave.close()
        await master.close()


@pytest.mark.anyio
async def test_a_clean_stop_with_an_incomplete_record_syncs_what_it_keeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slave stopped with its last record incomplete cuts it off and syncs the whole
    records before it (the cut counted them flushed, and the stop synced none)."""
    master = await opened(tmp_path / "master")
    # no flush on its own before the stop, however long the test takes
    slave = create_store(
        "mmap", replace(store_config(tmp_path / "slave"), flush_thorough_interval=3600.0)
    )
    await slave.open()
    try:
        offsets = await fill_master(master, rounds=1)
        replicate(master, slave, 0, offsets[30] + 30)
        assert slave._flusher.flushed == 0
        synced = commit_log_syncs(monkeypatch, tmp_path / "slave")
    finally:
        await slave.close()
        await master.close()
    assert synced, "the stop synced nothing of the slave's CommitLog"


def _first_blank(offsets: list[int]) -> int:
    """Where the first file's blank record starts (the end of its last record)."""
    in_first = [offset for offset in offsets if offset < FILE_SIZE]
    after = min(offset for offset in offsets if offset >= FILE_SIZE)
    assert after == FILE_SIZE
    last = in_first[-1]
    following = offsets[offsets.index(last) + 1 :]
    assert following[0] == FILE_SIZE
    return last  # the caller adds the record's size


@pytest.mark.anyio
@pytest.mark.parametrize("cut", ["head", "body", "blank head", "blank tail"])
async def test_a_slave_closed_with_an_incomplete_record_resumes(tmp_path: Path, cut: str) -> None:
    master = await opened(tmp_path / "master")
    slave = await opened(tmp_path / "slave")
    try:
        offsets = await fill_master(master, rounds=3)
        last_in_first = _first_blank(offsets)
        record = await master.message_at(last_in_first)
        assert record is not None
        blank = last_in_first + len(record)
        assert FILE_SIZE - blank >= BLANK_SIZE
        whole, stop = {
            "head": (offsets[20], offsets[20] + 3),
            "body": (offsets[20], offsets[20] + 60),
            "blank head": (blank, blank + 5),
            "blank tail": (blank, blank + BLANK_SIZE + 1),
        }[cut]
        if cut == "blank tail" and stop >= FILE_SIZE:
            pytest.fail("the first file's blank record is too short for this case")
        replicate(master, slave, 0, stop)
        assert slave.max_commit_log_offset == stop  # the raw end, reported to the master
        assert slave.read_commit_log(whole, 100) == b""  # no incomplete record goes out
    finally:
        await slave.close()
    slave = await opened(tmp_path / "slave")
    try:
        assert slave.max_commit_log_offset == whole  # the master sends the rest again
        replicate(master, slave, whole)
        await assert_replica(master, slave)
        await assert_keys_found(master, slave)
    finally:
        await slave.close()
        await master.close()


# --- a slave killed while it appends ---------------------------------------------------------

CHILD = """
import sys
import anyio
from rocketmq_core.protocol.ha import TransferReader
from rocketmq_core.store.api import StoreConfig
from rocketmq_core.store.loader import create_store

async def main():
    store = create_store("mmap", StoreConfig(
        root_dir=sys.argv[1], commit_log_file_size=int(sys.argv[2]),
        consume_queue_file_size=int(sys.argv[3]), max_hash_slot_num=1000, max_index_num=4000))
    await store.open()
    reader = TransferReader()
    print("ready", flush=True)
    while data := sys.stdin.buffer.read1(65536):
        for transfer in reader.feed(data):
            store.append_replicated(transfer.offset, transfer.body)
            print(store.max_commit_log_offset, flush=True)

anyio.run(main, backend=sys.argv[4])
"""


@pytest.mark.anyio
async def test_a_slave_killed_while_appending_keeps_a_whole_prefix(
    tmp_path: Path, anyio_backend: str
) -> None:
    master = await opened(tmp_path / "master")
    root = tmp_path / "slave"
    try:
        offsets = await fill_master(master, rounds=3)
        sent, acked = _feed_a_child_and_kill_it(master, root, anyio_backend)
        slave = await opened(root)
        try:
            assert slave.stats()["recovered_after_crash"] is True
            kept = slave.max_commit_log_offset
            # every record acknowledged whole is kept; nothing past what was sent
            assert max(o for o in offsets if o <= acked) <= kept <= sent
            assert kept in offsets or kept % FILE_SIZE == 0  # on a record boundary
            # every record below the end is in its queue, nothing after it
            below = [position for position in offsets if position < kept]
            assert sum(
                slave.max_offset(topic, queue_id)
                for topic, queue_ids in slave.queues().items()
                for queue_id in queue_ids
            ) == len(below)
            replicate(master, slave, kept)
            await assert_replica(master, slave)
            await assert_keys_found(master, slave)
        finally:
            await slave.close()
    finally:
        await master.close()


def _feed_a_child_and_kill_it(master, root: Path, backend: str) -> tuple[int, int]:
    """A child process appends HA frames of odd sizes to a slave store: the first half
    acknowledged one by one, then more sent without waiting and the child killed (-9)
    meanwhile. Returns (bytes sent, bytes acknowledged)."""
    arguments = [str(root), str(FILE_SIZE), str(QUEUE_FILE_SIZE), backend]
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, *arguments],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert child.stdin is not None and child.stdout is not None
    offset = acked = 0
    half = master.max_commit_log_offset // 2
    try:
        assert child.stdout.readline().strip() == b"ready"
        for chunk in itertools.cycle(CHUNKS):
            data = master.read_commit_log(offset, chunk)
            if not data or offset > half + FILE_SIZE:
                break
            child.stdin.write(encode_transfer_header(offset, len(data)) + data)
            child.stdin.flush()
            offset += len(data)
            if offset < half:
                acked = int(child.stdout.readline())
                assert acked == offset
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    return offset, acked
