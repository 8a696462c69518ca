"""Flushed CommitLog pages far enough behind are let go of, not lost
(mapped_file.MappedFile.release_before): the bytes read back through the mapping and
from the file, the process's resident memory shrinks, and nothing is told to the kernel
once the file is no longer mapped."""

from __future__ import annotations

import os

from rocketmq_store_mmap.mapped_file import MappedFile, MappedFileQueue

MIB = 1 << 20


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


def on_disk(mapped: MappedFile, length: int) -> bytes:
    fd = os.open(mapped.path, os.O_RDONLY)
    try:
        return os.pread(fd, length, 0)
    finally:
        os.close(fd)


def written_file(tmp_path, data: bytes) -> MappedFile:
    mapped = MappedFile(tmp_path / "00000000000000000000", 0, 16 * MIB, reserve=True)
    assert mapped.buffer is not None
    mapped.buffer[: len(data)] = data
    mapped.wrote = len(data)
    return mapped


WRITTEN = bytes(range(256)) * (8 * MIB // 256)


def test_flushed_pages_behind_are_let_go_of_and_read_again(tmp_path):
    mapped = written_file(tmp_path, WRITTEN)
    try:
        mapped.release_before(len(WRITTEN))  # nothing flushed yet: nothing let go of
        assert mapped.released == 0 and resident_kib(mapped.path) >= 8 * 1024
        mapped.sync()
        mapped.release_before(6 * MIB + 100)  # whole pages only
        assert mapped.released == 6 * MIB
        assert resident_kib(mapped.path) <= 3 * 1024  # the last 2 MiB written stay
        # the bytes are the file's, read back through the same mapping
        assert mapped.buffer is not None
        assert bytes(mapped.buffer[: len(WRITTEN)]) == WRITTEN
        assert on_disk(mapped, len(WRITTEN)) == WRITTEN
    finally:
        mapped.close()


def test_a_file_no_longer_mapped_is_left_alone(tmp_path):
    mapped = written_file(tmp_path, WRITTEN)
    mapped.sync()
    mapped.unmap()
    mapped.release_before(len(WRITTEN))
    assert mapped.released == 0  # nothing told to the kernel: the address is not ours
    assert on_disk(mapped, len(WRITTEN)) == WRITTEN
    mapped.close()


def test_a_truncated_file_lets_go_of_what_is_written_again(tmp_path):
    files = MappedFileQueue(tmp_path, 16 * MIB, reserve=True, read_written_ahead=True)
    try:
        mapped = files.create(0)
        assert mapped.buffer is not None
        mapped.buffer[: len(WRITTEN)] = WRITTEN
        mapped.wrote = len(WRITTEN)
        mapped.sync()
        mapped.release_before(len(WRITTEN))
        assert mapped.released == len(WRITTEN)
        files.truncate_after(2 * MIB + 10)
        assert mapped.wrote == 2 * MIB + 10 and mapped.released == 2 * MIB
        assert on_disk(mapped, 2 * MIB + 10) == WRITTEN[: 2 * MIB + 10]
    finally:
        files.close()
