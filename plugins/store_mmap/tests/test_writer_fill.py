"""The writer's own pre-touch (mapped_file.MappedFile.fill_ahead): with ``writer_fills``
the pages past the write position get zeros written through the file, never a byte
before it; steps end on multiples of the step; a store takes it with async flush only
and keeps the next put's pages ready whichever path wrote the last one."""

from __future__ import annotations

import os

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


def file_with_stale_bytes(tmp_path, *, writer_fills: bool) -> MappedFile:
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
    return mapped


def test_a_fill_writes_zeros_from_the_write_position_to_the_step_end(tmp_path):
    mapped = file_with_stale_bytes(tmp_path, writer_fills=True)
    try:
        mapped.fill_ahead(STEP)
        assert mapped.touched == STEP  # ends on a multiple of the step
        assert mapped.buffer is not None
        assert bytes(mapped.buffer[: len(RECORDS)]) == RECORDS  # the page it starts in
        assert bytes(mapped.buffer[len(RECORDS) : STEP]) == bytes(STEP - len(RECORDS))
        assert bytes(mapped.buffer[STEP:MIB]) == b"x" * (MIB - STEP)  # past the step: as was
    finally:
        mapped.close()


def test_the_next_fill_starts_where_the_last_one_ended(tmp_path):
    mapped = file_with_stale_bytes(tmp_path, writer_fills=True)
    try:
        mapped.fill_ahead(STEP)
        mapped.wrote = STEP - 100  # the writer came close to the end of the filled part
        mapped.fill_ahead(STEP)
        assert mapped.touched == 2 * STEP
        assert mapped.buffer is not None
        assert bytes(mapped.buffer[STEP : 2 * STEP]) == bytes(STEP)
        assert bytes(mapped.buffer[2 * STEP : MIB]) == b"x" * (MIB - 2 * STEP)
    finally:
        mapped.close()


def test_without_writer_fills_the_pages_are_only_faulted_in(tmp_path):
    mapped = file_with_stale_bytes(tmp_path, writer_fills=False)
    try:
        mapped.fill_ahead(STEP)
        assert mapped.touched > len(RECORDS)
        assert mapped.buffer is not None
        assert bytes(mapped.buffer[: len(RECORDS)]) == RECORDS
        assert bytes(mapped.buffer[len(RECORDS) : MIB]) == b"x" * (MIB - len(RECORDS))
    finally:
        mapped.close()


def test_a_fill_stops_at_the_end_of_the_file(tmp_path):
    mapped = file_with_stale_bytes(tmp_path, writer_fills=True)
    try:
        mapped.wrote = 4 * MIB - 1000
        mapped.fill_ahead(STEP)
        assert mapped.touched == 4 * MIB
        assert mapped.buffer is not None
        assert bytes(mapped.buffer[4 * MIB - 1000 :]) == bytes(1000)
    finally:
        mapped.close()


@pytest.mark.parametrize(
    ("flush", "huge_folios", "fills"),
    [("async", False, True), ("sync", False, False), ("async", True, False)],
)
def test_the_commit_log_writer_fills_with_async_flush_and_4_kib_pages(
    tmp_path, flush, huge_folios, fills
):
    """A SYNC_FLUSH group commit would write the zeros back before the writer reaches
    them; a written page goes into the page cache as a folio of the write's size, not 2 MiB."""
    config = StoreConfig(
        root_dir=str(tmp_path),
        flush=flush,
        commit_log_file_size=4 * MIB,
        commit_log_huge_folios=huge_folios,
    )

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
        store = create_store("mmap", StoreConfig(root_dir=str(tmp_path)))
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
