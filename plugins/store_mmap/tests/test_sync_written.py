"""A CommitLog file's flush covers what was written, and falls back to the file's own
fdatasync when the file is not mapped (mapped_file.MappedFile.sync_written); flushed
pages far enough behind are let go of, not lost (release_before)."""

from __future__ import annotations

import mmap
import os

from rocketmq_store_mmap.mapped_file import MappedFile

SIZE = 16 * mmap.PAGESIZE
MIB = 1 << 20


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


def resident_kib(path) -> int:
    """This process's resident KiB of the mappings of ``path`` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and ":" in head[3]:
                inside = len(head) >= 6 and head[5] == str(path)
            elif inside and head[0] == "Rss:":
                total += int(head[1])
    return total


def test_flushed_pages_behind_are_let_go_of_and_read_again(tmp_path):
    mapped = MappedFile(tmp_path / "00000000000000000000", 0, 16 * MIB, reserve=True)
    try:
        assert mapped.buffer is not None
        written = bytes(range(256)) * (8 * MIB // 256)
        mapped.buffer[: len(written)] = written
        mapped.wrote = len(written)
        mapped.release_before(len(written))  # nothing flushed yet: nothing let go of
        assert mapped.released == 0 and resident_kib(mapped.path) >= 8 * 1024
        mapped.sync_written()
        mapped.release_before(6 * MIB)
        assert mapped.released == 6 * MIB
        assert resident_kib(mapped.path) <= 3 * 1024  # the last 2 MiB written stay
        # the bytes are the file's, read back through the same mapping
        assert bytes(mapped.buffer[: len(written)]) == written
        assert on_disk(mapped, len(written)) == written
    finally:
        mapped.close()
