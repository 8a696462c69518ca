"""The writer's own pre-touch (mapped_file.MappedFile.fill_ahead): with ``writer_fills``
the pages past the write position get zeros written through the file, never a byte
before it; steps end on multiples of the step; a store takes it with async flush only
and keeps the next put's pages ready whichever path wrote the last one."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import pytest
from rocketmq_store_mmap import store as mmap_store
from rocketmq_store_mmap.commitlog import WRITER_TOUCH_LEAD
from rocketmq_store_mmap.mapped_file import MappedFile

from rocketmq_core.store.api import MessageToStore, StoreConfig
from rocketmq_core.store.loader import create_store

KIB, MIB = 1 << 10, 1 << 20
STEP = 256 * KIB
RECORDS = bytes(range(1, 256)) * 20  # 5,100 bytes, none of them zero


def small_store(tmp_path, **settings) -> StoreConfig:
    """A store whose files take little disk (the defaults reserve ~1.5 GB)."""
    settings.setdefault("commit_log_file_size", 4 * MIB)
    return StoreConfig(
        root_dir=str(tmp_path),
        consume_queue_file_size=60_000,
        max_hash_slot_num=1024,
        max_index_num=40_000,
        **settings,
    )


@contextmanager
def file_with_stale_bytes(tmp_path, *, writer_fills: bool) -> Iterator[MappedFile]:
    """A file whose first 5,100 bytes are written by the writer, followed by stale bytes
    (what a file system may hand back after a crash, before recovery zeroes it)."""
    mapped = MappedFile(
        tmp_path / "00000000000000000000", 0, 4 * MIB, reserve=True, writer_fills=writer_fills
    )
    fd = os.open(mapped.path, os.O_WRONLY)
    try:
        os.pwrite(fd, b"x" * MIB, 0)
    finally:
        os.close(fd)
    assert mapped.buffer is not None
    mapped.buffer[: len(RECORDS)] = RECORDS
    mapped.wrote = len(RECORDS)
    try:
        yield mapped
    finally:
        mapped.close()


def test_a_fill_writes_zeros_from_the_write_position_to_the_step_end(tmp_path):
    with file_with_stale_bytes(tmp_path, writer_fills=True) as mapped:
        mapped.fill_ahead(STEP)
        assert mapped.touched == STEP  # ends on a multiple of the step
        assert mapped.buffer is not None
        assert bytes(mapped.buffer[: len(RECORDS)]) == RECORDS  # the page it starts in
        assert bytes(mapped.buffer[len(RECORDS) : STEP]) == bytes(STEP - len(RECORDS))
        assert bytes(mapped.buffer[STEP:MIB]) == b"x" * (MIB - STEP)  # past the step: as was


def test_a_writer_past_the_ready_end_gets_at_least_half_a_step(tmp_path):
    with file_with_stale_bytes(tmp_path, writer_fills=True) as mapped:
        mapped.wrote = STEP - 10  # a put ran past what was ready, to just below a boundary
        mapped.fill_ahead(STEP)
        assert mapped.touched == 2 * STEP
        assert mapped.buffer is not None
        assert bytes(mapped.buffer[STEP - 10 : 2 * STEP]) == bytes(STEP + 10)


def test_the_next_fill_starts_where_the_last_one_ended(tmp_path):
    with file_with_stale_bytes(tmp_path, writer_fills=True) as mapped:
        mapped.fill_ahead(STEP)
        mapped.wrote = STEP - 100  # the writer came close to the end of the filled part
        mapped.fill_ahead(STEP)
        assert mapped.touched == 2 * STEP
        assert mapped.buffer is not None
        assert bytes(mapped.buffer[STEP : 2 * STEP]) == bytes(STEP)
        assert bytes(mapped.buffer[2 * STEP : MIB]) == b"x" * (MIB - 2 * STEP)


def test_without_writer_fills_the_pages_are_only_faulted_in(tmp_path):
    with file_with_stale_bytes(tmp_path, writer_fills=False) as mapped:
        mapped.fill_ahead(STEP)
        assert mapped.touched > len(RECORDS)
        assert mapped.buffer is not None
        assert bytes(mapped.buffer[: len(RECORDS)]) == RECORDS
        assert bytes(mapped.buffer[len(RECORDS) : MIB]) == b"x" * (MIB - len(RECORDS))


def test_a_fill_stops_at_the_end_of_a_file_of_any_size(tmp_path):
    size = 1_000_000  # mappedFileSizeCommitLog need not be a multiple of anything
    mapped = MappedFile(tmp_path / "00000000000000000000", 0, size, reserve=True, writer_fills=True)
    try:
        mapped.wrote = size - 1000
        mapped.fill_ahead(STEP)
        assert mapped.touched == size
        assert os.stat(mapped.path).st_size == size  # or the next start refuses the file
        assert mapped.buffer is not None
        assert bytes(mapped.buffer[size - 1000 :]) == bytes(1000)
    finally:
        mapped.close()


def test_a_fill_that_cannot_write_faults_the_pages_in_and_says_so(tmp_path, caplog):
    with file_with_stale_bytes(tmp_path, writer_fills=True) as mapped:
        mapped.path.unlink()  # the mapping stays; opening the file by its name fails
        mapped.fill_ahead(STEP)
        assert mapped.touched > len(RECORDS) and not mapped.writer_fills
        assert "faulted in instead" in caplog.text
        assert mapped.buffer is not None
        assert bytes(mapped.buffer[: len(RECORDS)]) == RECORDS


@pytest.mark.parametrize(
    ("flush", "huge_folios", "fills"),
    [("async", False, True), ("sync", False, False), ("async", True, False)],
)
def test_the_commit_log_writer_fills_with_async_flush_and_4_kib_pages(
    tmp_path, flush, huge_folios, fills
):
    """A SYNC_FLUSH group commit would write the zeros back before the writer reaches
    them; a written page goes into the page cache as a folio of the write's size, not 2 MiB."""
    config = small_store(tmp_path, flush=flush, commit_log_huge_folios=huge_folios)

    async def main() -> None:
        store = create_store("mmap", config)
        await store.open()
        try:
            store.append(MessageToStore("T", 0, b"r"))
            assert store.commitlog.files.last.writer_fills is fills
        finally:
            await store.close()

    anyio.run(main)


@pytest.mark.parametrize("path", ["append_one", "batch", "python"])
def test_each_put_lands_in_pages_made_ready_before_it(tmp_path, monkeypatch, path):
    """The Python path takes its step before writing; the compiled ones (a batch, the
    single put) after, once within WRITER_TOUCH_LEAD of the end of the ready part, so the
    next put lands in ready pages too. Every record reads back whole."""
    # the background pre-toucher stays where the writer is: what is ready is the writer's
    monkeypatch.setattr(mmap_store, "PRE_TOUCH_AHEAD", 0)
    message = MessageToStore("T", 0, b"b" * 3000, b"TAGS\x01A\x02KEYS\x01k1")
    compiled = []

    def counted_batch(*args):
        written = mmap_store.append_kernel(*args)
        compiled.append(written is not None)
        return written

    def counted_one(*args):
        written = mmap_store.append_one_kernel(*args)
        compiled.append(written is not None)
        return written

    async def main() -> None:
        store = create_store("mmap", small_store(tmp_path, commit_log_file_size=16 * MIB))
        await store.open()
        try:
            assert store.append(message).ok  # the queue's first put: its files are made
            store.kernel = None if path == "python" else counted_batch
            store._append_one = counted_one if path == "append_one" else None
            stored = 1
            mapped = store.commitlog.files.last
            while mapped.wrote < 3 * MIB:
                ready = mapped.touched
                if path == "batch":
                    assert store.append_batch([message] * 8).ok
                    stored += 8
                else:
                    assert store.append(message).ok
                    stored += 1
                mapped = store.commitlog.files.last
                if path == "python":
                    assert mapped.wrote <= mapped.touched
                else:
                    assert mapped.wrote <= ready
                    assert mapped.touched >= mapped.wrote + WRITER_TOUCH_LEAD
            if path == "python":
                assert not compiled
            else:  # the compiled path took the puts (it leaves a rare one to Python)
                assert len(compiled) > 100 and sum(compiled) > 0.95 * len(compiled)
            found = store.get_now("T", 0, stored - 32, 32, None)
            assert len(found.records) == 32
            assert all(message.body in bytes(record) for record in found.records)
        finally:
            await store.close()

    anyio.run(main)


@pytest.mark.parametrize("path", ["append_one", "batch", "python"])
def test_puts_larger_than_the_lead_read_back_whole(tmp_path, monkeypatch, path):
    """A compiled put of more than WRITER_TOUCH_LEAD writes past what is ready before its
    writer's step: the step starts where the put ended, so no zero lands on it. Across
    rolls to new files; what is past the write position stays zeros."""
    monkeypatch.setattr(mmap_store, "PRE_TOUCH_AHEAD", 0)
    sizes = [100_000, 3000, 70_000, 200_000, 500, 150_000] * 20  # ~10 MB: three files

    def message(number: int) -> MessageToStore:
        body = bytes([number % 251 + 1]) * sizes[number]
        return MessageToStore("T", 0, body, b"KEYS\x01k%d" % number)

    async def main() -> None:
        store = create_store("mmap", small_store(tmp_path))
        await store.open()
        try:
            assert store.append(message(0)).ok  # the queue's files are made
            if path == "python":
                store.kernel = None
                store._append_one = None
            number = 1
            while number < len(sizes):
                if path == "batch":
                    batch = [message(n) for n in range(number, min(number + 3, len(sizes)))]
                    assert store.append_batch(batch).ok
                    number += len(batch)
                else:
                    assert store.append(message(number)).ok
                    number += 1
                last = store.commitlog.files.last
                assert last.buffer is not None
                ready = max(last.touched, last.wrote)
                assert not any(last.buffer[last.wrote : ready])
            assert len(store.commitlog.files.files) > 2  # rolled
            for start in range(0, len(sizes), 8):
                found = store.get_now("T", 0, start, 8, None)
                for offset, record in enumerate(found.records, start):
                    assert message(offset).body in bytes(record), offset
            assert sum(
                len(store.get_now("T", 0, n, 1, None).records) for n in range(len(sizes))
            ) == len(sizes)
        finally:
            await store.close()

    anyio.run(main)
