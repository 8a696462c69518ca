"""Written pages far enough behind are let go of, not lost
(mapped_file.MappedFile.release_before): the bytes read back through the mapping and
from the file, flushed before or after, the process's resident memory shrinks, and
nothing is told to the kernel once the file is no longer mapped. The writer lets go of
pages as it goes (``resident_behind``); the index and the consume queues after a flush."""

from __future__ import annotations

import os

import anyio
from rocketmq_store_mmap.index import INDEX_ENTRY_SIZE, RESIDENT_ENTRIES_BEHIND, IndexService
from rocketmq_store_mmap.mapped_file import RELEASE_STEP, MappedFile, MappedFileQueue, file_name
from rocketmq_store_mmap.store import QUEUE_RESIDENT_BEHIND

from rocketmq_core.store.api import DispatchRequest, MessageToStore, StoreConfig
from rocketmq_core.store.loader import create_store

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


def test_pages_behind_are_let_go_of_and_read_again(tmp_path):
    mapped = written_file(tmp_path, WRITTEN)
    try:
        assert resident_kib(mapped.path) >= 8 * 1024
        mapped.release_before(6 * MIB + 100)  # whole pages only
        assert mapped.released == 6 * MIB
        assert resident_kib(mapped.path) <= 3 * 1024  # the last 2 MiB written stay
        # the bytes are the file's, read back through the same mapping
        assert mapped.buffer is not None
        assert bytes(mapped.buffer[: len(WRITTEN)]) == WRITTEN
    finally:
        mapped.close()


def test_written_pages_let_go_of_before_a_flush_reach_the_disk_with_it(tmp_path):
    """The kernel keeps an unmapped dirty page dirty: the flush after writes it."""
    mapped = written_file(tmp_path, WRITTEN)
    try:
        mapped.release_before(len(WRITTEN))  # nothing flushed yet
        assert mapped.released == len(WRITTEN) and mapped.flushed == 0
        assert resident_kib(mapped.path) <= 1024
        mapped.sync()
        # dropped from the page cache too: what is read next comes from the disk
        fd = os.open(mapped.path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        assert on_disk(mapped, len(WRITTEN)) == WRITTEN
    finally:
        mapped.close()


def test_nothing_past_what_is_written_is_let_go_of(tmp_path):
    mapped = written_file(tmp_path, WRITTEN[: 3 * MIB + 10])
    try:
        mapped.release_before(8 * MIB)
        assert mapped.released == 3 * MIB
    finally:
        mapped.close()


def test_huge_folio_files_let_go_of_whole_folios(tmp_path):
    mapped = MappedFile(
        tmp_path / "00000000000000000000", 0, 16 * MIB, reserve=True, huge_folios=True
    )
    try:
        assert mapped.buffer is not None
        mapped.buffer[: len(WRITTEN)] = WRITTEN
        mapped.wrote = len(WRITTEN)
        mapped.release_before(5 * MIB)  # within the third 2 MiB folio: that one stays
        assert mapped.released == 4 * MIB
        assert bytes(mapped.buffer[: len(WRITTEN)]) == WRITTEN
    finally:
        mapped.close()


def test_the_writer_lets_go_of_what_is_further_behind_than_it_keeps(tmp_path):
    """``resident_behind``: each pre-touch of the writer (or the background pre-toucher)
    lets go of the pages that far behind what is written, in RELEASE_STEP steps."""
    mapped = MappedFile(
        tmp_path / "00000000000000000000", 0, 64 * MIB, reserve=True, resident_behind=4 * MIB
    )
    try:
        assert mapped.buffer is not None
        chunk = WRITTEN[:MIB]
        for mib in range(24):  # as the writer does: touch ahead, then write
            mapped.pre_touch(MIB)
            mapped.buffer[mib * MIB : (mib + 1) * MIB] = chunk
            mapped.wrote = (mib + 1) * MIB
        mapped.pre_touch(MIB)
        # behind the last 4 MiB written, at most one step not yet let go of
        assert 24 * MIB - 4 * MIB - RELEASE_STEP < mapped.released <= 20 * MIB
        assert resident_kib(mapped.path) <= (4 * MIB + RELEASE_STEP + 2 * MIB) // 1024
        assert bytes(mapped.buffer[: 24 * MIB]) == chunk * 24
        mapped.sync()
        assert on_disk(mapped, 24 * MIB) == chunk * 24
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


def resident_kib_between(path, start: int, end: int) -> int:
    """KiB of ``path``'s bytes [start, end) mapped in this process: the present bit of
    each page of its one mapping (/proc/self/pagemap)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and fields[5] == str(path):
                base, file_offset = int(fields[0].split("-")[0], 16), int(fields[2], 16)
                break
        else:
            raise AssertionError(f"{path} is not mapped")
    page = os.sysconf("SC_PAGE_SIZE")
    first, last = (base + start - file_offset) // page, (base + end - file_offset - 1) // page
    present = 0
    with open("/proc/self/pagemap", "rb") as pagemap:
        pagemap.seek(first * 8)
        entries = pagemap.read((last - first + 1) * 8)
    for at in range(0, len(entries), 8):
        if int.from_bytes(entries[at : at + 8], "little") >> 63:
            present += 1
    return present * page // 1024


def test_the_index_lets_go_of_synced_entries_behind_and_keeps_its_slots(tmp_path):
    service = IndexService(tmp_path, 4096, 400_000)
    service.load()
    keys = 200_000  # 4 MB of entries: all but the last RESIDENT_ENTRIES_BEHIND let go of
    for phys in range(keys):
        service.put(
            DispatchRequest(
                "T", 0, phys * 100, 100, 0, 1_700_000_000_000, phys, None, f"key{phys}", 0, 0
            )
        )
    newest = service.files[-1]
    entries_end = newest.entries_at + newest.index_count * INDEX_ENTRY_SIZE
    slots = (0, newest.entries_at)
    slots_before = resident_kib_between(newest.path, *slots)
    behind = (newest.entries_at + 4096, entries_end - RESIDENT_ENTRIES_BEHIND - 4096)
    assert resident_kib_between(newest.path, *behind) > 2 * 1024  # written: mapped
    service.sync()
    assert resident_kib_between(newest.path, *behind) == 0
    assert resident_kib_between(newest.path, *slots) == slots_before > 0
    assert (
        resident_kib_between(newest.path, entries_end - RESIDENT_ENTRIES_BEHIND + 4096, entries_end)
        > 0
    )
    stamp = 1_700_000_000_000
    assert service.query("T", "key7", 8, stamp, stamp) == [700]  # read back from the cache
    service.close()


def test_a_flush_lets_go_of_queue_entries_behind_and_they_are_read_again(tmp_path):
    """The store's periodic flush of the consume queues lets go of each file's entries
    more than QUEUE_RESIDENT_BEHIND behind its writer; reads of them still answer."""
    entries = 30_000  # 600 KB of entries in one queue file

    async def main() -> None:
        store = create_store(
            "mmap", StoreConfig(root_dir=str(tmp_path), commit_log_file_size=64 * MIB)
        )
        await store.open()
        try:
            await store.put_batch([MessageToStore("Q", 0, b"b") for _ in range(1)])
            for _ in range(entries // 100):
                await store.put_batch([MessageToStore("Q", 0, b"b") for _ in range(100)])
            await store.flush()
            path = tmp_path / "consumequeue" / "Q" / "0" / file_name(0)
            written = (entries + 1) * 20
            assert resident_kib_between(path, 0, written - QUEUE_RESIDENT_BEHIND - 4096) == 0
            assert resident_kib_between(path, written - 4096, written) > 0
            found = await store.get("Q", 0, 5, 3)
            assert len(found.records) == 3 and found.next_begin_offset == 8
        finally:
            await store.close()

    anyio.run(main)


def test_the_writer_never_waits_for_another_thread_to_let_go_of_pages(tmp_path):
    """The writer's pre-touch skips letting go of pages while another thread holds the
    file's lock (the SCHED_IDLE pre-toucher may not run again for long on a busy core);
    the next pre-touch does it."""
    mapped = MappedFile(
        tmp_path / "00000000000000000000", 0, 64 * MIB, reserve=True, resident_behind=4 * MIB
    )
    try:
        assert mapped.buffer is not None
        mapped.buffer[: 16 * MIB] = WRITTEN * 2
        mapped.wrote = mapped.touched = 16 * MIB
        with mapped.lock:  # held elsewhere; waiting here would never end (one thread)
            mapped.pre_touch(MIB)
            assert mapped.released == 0 and mapped.touched == 17 * MIB
        mapped.pre_touch(MIB)
        assert mapped.released == 12 * MIB
    finally:
        mapped.close()


def test_a_commit_log_file_the_writer_leaves_is_let_go_of_at_once(tmp_path):
    """At a roll the full file's pages are let go of (not at the next flush), and its
    messages read back all the same."""
    size = 4 * MIB

    async def main() -> None:
        store = create_store("mmap", StoreConfig(root_dir=str(tmp_path), commit_log_file_size=size))
        await store.open()
        try:
            body = b"r" * 4000
            put = 0
            while len(store.commitlog.files.files) < 2:
                store.append(MessageToStore("T", 0, body))
                put += 1
            first = store.commitlog.files.files[0]
            assert resident_kib(first.path) <= 8  # the blank at its end, at most
            found = store.get_now("T", 0, 0, 32, None)  # from the file let go of
            assert len(found.records) == min(32, put)
            assert all(bytes(record).endswith(body + b"\x01T\x00\x00") for record in found.records)
        finally:
            await store.close()

    anyio.run(main)
