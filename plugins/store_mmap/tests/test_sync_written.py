"""A CommitLog file's flush covers what was written, and falls back to the file's own
fdatasync when the file is not mapped (mapped_file.MappedFile.sync_written)."""

from __future__ import annotations

import mmap
import os

from rocketmq_store_mmap.mapped_file import MappedFile

SIZE = 16 * mmap.PAGESIZE


def written_file(tmp_path, data: bytes) -> MappedFile:
    mapped = MappedFile(tmp_path / "00000000000000000000", 0, SIZE, reserve=True)
    assert mapped.buffer is not None
    mapped.buffer[: len(data)] = data
    mapped.wrote = len(data)
    return mapped


def on_disk(mapped: MappedFile, length: int) -> bytes:
    fd = os.open(mapped.path, os.O_RDONLY)
    try:
        return os.pread(fd, length, 0)
    finally:
        os.close(fd)


def test_the_written_range_is_flushed_and_counted(tmp_path):
    mapped = written_file(tmp_path, b"a" * 5000)
    try:
        mapped.sync_written()
        assert mapped.flushed == 5000
        # more, from the middle of a page already flushed: the page is synced again
        assert mapped.buffer is not None
        mapped.buffer[5000:9000] = b"b" * 4000
        mapped.wrote = 9000
        mapped.sync_written()
        assert mapped.flushed == 9000
        assert on_disk(mapped, 9000) == b"a" * 5000 + b"b" * 4000
    finally:
        mapped.close()


def test_a_file_not_mapped_is_synced_whole(tmp_path):
    mapped = written_file(tmp_path, b"c" * 3000)
    mapped.unmap()
    mapped.sync_written()
    assert mapped.flushed == 3000
    assert on_disk(mapped, 3000) == b"c" * 3000
    mapped.close()
