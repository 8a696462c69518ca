"""What the mmap store puts on disk and how it guards it (STORE.md §1-7, §16)."""

from __future__ import annotations

import errno
import gc
import mmap
import os
import resource
import struct
import threading
import time
from contextlib import asynccontextmanager, contextmanager

import anyio
import pytest
from rocketmq_store_mmap import mapped_file
from rocketmq_store_mmap.checkpoint import Checkpoint
from rocketmq_store_mmap.commitlog import CommitLog
from rocketmq_store_mmap.index import IndexService
from rocketmq_store_mmap.mapped_file import MappedFile
from rocketmq_store_mmap.store import PREPARE_INTERVAL, PREPARE_INTERVAL_AT_MOST, _prepare_pause

from rocketmq_core.errors import ConfigError
from rocketmq_core.protocol.message import (
    BLANK_MAGIC,
    encode_properties,
    iter_records,
    tags_code,
)
from rocketmq_core.store.api import GetStatus, MessageToStore, PutStatus, StoreConfig
from rocketmq_core.store.loader import create_store
from tests.missing import missing

pytestmark = pytest.mark.anyio

FILE_SIZE = 16 * 1024


def config(directory, **overrides) -> StoreConfig:
    options = dict(
        root_dir=str(directory),
        commit_log_file_size=FILE_SIZE,
        consume_queue_file_size=20 * 50,
        max_hash_slot_num=64,
        max_index_num=256,
    )
    options.update(overrides)
    return StoreConfig(**options)


@asynccontextmanager
async def opened(directory, plugin_host, **overrides):
    store = create_store("mmap", config(directory, **overrides), plugin_host)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


def message(number: int, queue_id: int = 0, size: int = 1000, **properties) -> MessageToStore:
    props = {"TAGS": "TagA", "KEYS": f"key-{number}", "UNIQ_KEY": f"U{number:08d}"}
    props.update(properties)
    return MessageToStore(
        "TopicTest", queue_id, bytes([number % 256]) * size, encode_properties(props).encode()
    )


async def test_directory_layout_and_file_names(tmp_path, plugin_host):
    async with opened(tmp_path, plugin_host) as store:
        for number in range(40):  # ~41 KiB: three 16 KiB CommitLog files
            assert (await store.put(message(number, number % 2))).ok
        assert (tmp_path / "abort").exists()  # present while running
        commitlog = sorted(p.name for p in (tmp_path / "commitlog").iterdir())
        assert commitlog[:3] == [f"{n * FILE_SIZE:020d}" for n in range(3)]
        assert all(
            (tmp_path / "commitlog" / name).stat().st_size == FILE_SIZE for name in commitlog
        )
        queue_files = sorted(p.name for p in (tmp_path / "consumequeue/TopicTest/0").iterdir())
        assert queue_files == ["00000000000000000000"]
        assert (tmp_path / "consumequeue/TopicTest/0/00000000000000000000").stat().st_size == 1000
        assert len(list((tmp_path / "index").iterdir())) == 1
    assert not (tmp_path / "abort").exists()  # a clean stop removes it
    assert (tmp_path / "checkpoint").stat().st_size == 4096


async def test_a_second_store_on_the_same_directory_is_refused(tmp_path, plugin_host):
    async with opened(tmp_path, plugin_host):
        other = create_store("mmap", config(tmp_path), plugin_host)
        with pytest.raises(ConfigError, match="in use by another process"):
            await other.open()


async def test_records_never_span_files_and_files_end_with_a_blank(tmp_path, plugin_host):
    async with opened(tmp_path, plugin_host) as store:
        results = [await store.put(message(n)) for n in range(20)]
    first_file = (tmp_path / "commitlog" / f"{0:020d}").read_bytes()
    in_first = [r for r in results if r.commit_log_offset < FILE_SIZE]
    last = in_first[-1]
    end_of_last = last.commit_log_offset + len(
        next(iter_records(first_file[last.commit_log_offset :])).body
    )
    blank_at = sum(1 for _ in in_first) and _record_end(first_file, last.commit_log_offset)
    assert end_of_last <= blank_at
    size, magic = struct.unpack_from(">ii", first_file, blank_at)
    assert magic == BLANK_MAGIC and size == FILE_SIZE - blank_at
    assert results[len(in_first)].commit_log_offset == FILE_SIZE  # next record: next file


def _record_end(data: bytes, offset: int) -> int:
    return offset + struct.unpack_from(">i", data, offset)[0]


async def test_consume_queue_entries_are_20_bytes_pointing_at_records(tmp_path, plugin_host):
    async with opened(tmp_path, plugin_host) as store:
        results = [await store.put(message(n, tags="x", TAGS=f"T{n % 3}")) for n in range(5)]
    data = (tmp_path / "consumequeue/TopicTest/0/00000000000000000000").read_bytes()
    for number, result in enumerate(results):
        phys, size, code = struct.unpack_from(">qiq", data, number * 20)
        assert phys == result.commit_log_offset
        assert code == tags_code(f"T{number % 3}")
        commitlog = (tmp_path / "commitlog" / f"{0:020d}").read_bytes()
        assert struct.unpack_from(">i", commitlog, phys)[0] == size
    assert data[5 * 20 : 6 * 20] == bytes(20)  # the rest of the file is empty


async def test_sync_flush_puts_are_on_disk_when_acknowledged(tmp_path, plugin_host):
    async with opened(tmp_path, plugin_host, flush="sync") as store:
        result = await store.put(message(1))
        assert result.ok
        assert store.stats()["flushed_offset"] >= result.commit_log_offset + 1
        flushes = store.stats()["flushes"]
        no_wait = await store.put(message(2, WAIT="false"))  # WAIT=false: no waiting
        assert no_wait.ok and store.stats()["flushes"] == flushes


async def test_full_disk_refuses_writes_with_a_clear_error_then_recovers(tmp_path, plugin_host):
    async with opened(tmp_path, plugin_host, disk_space_warning_level_ratio=1) as store:
        await store.delete_expired()  # the cleanup pass measures the disk
        refused = await store.put(message(1))
        assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
        assert "diskSpaceWarningLevelRatio 1%" in refused.remark
        assert store.max_offset("TopicTest", 0) == 0
        store.config.disk_space_warning_level_ratio = 100
        await store.delete_expired()
        assert (await store.put(message(2))).ok


async def test_the_next_commitlog_file_is_made_once_the_writer_is_half_way(tmp_path, plugin_host):
    async with opened(tmp_path, plugin_host) as store:
        assert (await store.put(message(0))).ok  # ~1 KiB of a 16 KiB file
        await anyio.sleep(0.1)
        assert store.commitlog.next_file is None
        for number in range(1, 9):  # past the middle, short of the end
            assert (await store.put(message(number))).ok
        with anyio.fail_after(5):
            while store.commitlog.next_file is None:
                await anyio.sleep(0.01)
        assert len(store.commitlog.files.files) == 1  # made ahead, not yet written to


def test_an_idle_store_looks_for_its_next_file_about_once_a_second():
    gib = 1 << 30
    assert _prepare_pause(gib, 0, next_ready=False) == 0.5  # a fresh 1 GiB file
    assert _prepare_pause(gib, 0, next_ready=True) == PREPARE_INTERVAL_AT_MOST
    assert _prepare_pause(gib, gib // 2 - (1 << 20), next_ready=False) == PREPARE_INTERVAL
    assert _prepare_pause(gib, gib, next_ready=True) == 0.5
    assert _prepare_pause(FILE_SIZE, 0, next_ready=False) == PREPARE_INTERVAL  # small files


async def test_no_space_for_the_next_file_stores_nothing(tmp_path, plugin_host, monkeypatch):
    async with opened(tmp_path, plugin_host) as store:
        assert (await store.put(message(0))).ok
        store.commitlog.next_file = None

        def no_space(fd, offset, length):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(os, "posix_fallocate", no_space)
        results = [await store.put(message(n)) for n in range(1, 40)]
        refused = [r for r in results if not r.ok]
        assert refused and refused[0].status is PutStatus.CREATE_MAPPED_FILE_FAILED
        assert "free disk space" in refused[0].remark
        stored = store.max_offset("TopicTest", 0)
        monkeypatch.undo()
        assert (await store.put(message(99))).queue_offset == stored  # no gap, nothing torn
    async with opened(tmp_path, plugin_host) as store:
        assert store.max_offset("TopicTest", 0) == stored + 1


def test_a_file_made_whole_by_another_thread_stays_when_this_ones_sizing_fails(
    tmp_path, monkeypatch
):
    """The CommitLog's preparer and its writer may make the same next file at once: the
    one whose sizing fails must not delete the file the other made whole and writes to;
    with nobody else at it, a file that could not be sized goes."""
    path = tmp_path / f"{0:020d}"
    real_size_file = mapped_file._size_file
    writers: list[MappedFile] = []

    def writer_rolls_meanwhile_then_no_space(fd, path_, size, reserve):
        monkeypatch.setattr(mapped_file, "_size_file", real_size_file)
        writers.append(MappedFile(path, 0, FILE_SIZE, reserve=True))
        raise mapped_file.DiskFullError(errno.ENOSPC, "no space for the file")

    monkeypatch.setattr(mapped_file, "_size_file", writer_rolls_meanwhile_then_no_space)
    with pytest.raises(mapped_file.DiskFullError):
        MappedFile(path, 0, FILE_SIZE, reserve=True)
    [writer] = writers
    writer.buffer[:5] = b"kept!"
    assert path.stat().st_size == FILE_SIZE
    assert path.read_bytes()[:5] == b"kept!"
    writer.close()

    alone = tmp_path / f"{FILE_SIZE:020d}"

    def no_space(fd, path_, size, reserve):
        raise mapped_file.DiskFullError(errno.ENOSPC, "no space for the file")

    monkeypatch.setattr(mapped_file, "_size_file", no_space)
    with pytest.raises(mapped_file.DiskFullError):
        MappedFile(alone, FILE_SIZE, FILE_SIZE, reserve=True)
    assert not alone.exists()


async def test_expired_files_go_only_at_delete_hours_unless_forced(tmp_path, plugin_host):
    other_hour = f"{(time.localtime().tm_hour + 12) % 24:02d}"
    # thresholds at 100%: how full this machine's disk is must not trigger a cleanup
    full = {
        "disk_max_used_space_ratio": 100,
        "disk_space_clean_forcibly_ratio": 100,
        "disk_space_warning_level_ratio": 100,
    }
    async with opened(
        tmp_path, plugin_host, file_reserved_time=1e-9, delete_when=other_hour, **full
    ) as store:
        for number in range(40):
            await store.put(message(number))
        assert await store.delete_expired() == 0  # expired, but not the hour to delete
        # a second ahead: the flusher may touch a file's mtime while the cleaner decides
        later = time.time() + 1
        store.config.delete_when = f"{time.localtime(later).tm_hour:02d}"
        deleted = await store.delete_expired(now=later)
        assert deleted >= 1
        assert store.min_offset("TopicTest", 0) > 0
        assert len(list((tmp_path / "commitlog").iterdir())) >= 1
        newest = await store.get("TopicTest", 0, store.max_offset("TopicTest", 0) - 1, 1)
        assert newest.records


async def test_disk_work_no_put_waits_for_runs_at_the_lowest_priority(
    tmp_path, plugin_host, monkeypatch
):
    """An async flush, the queues' and index's flush, the checkpoint, the next CommitLog
    file and a deleted one run in background threads (nice 19), which the event loop's
    requests preempt; a SYNC_FLUSH store's CommitLog flush, which its puts wait for,
    keeps the process's own priority."""
    seen: list[tuple[str, str, int]] = []

    def spied(owner: type, name: str) -> None:
        real = getattr(owner, name)

        def recording(*args):
            thread = threading.current_thread().name
            seen.append((f"{owner.__name__}.{name}", thread, os.getpriority(os.PRIO_PROCESS, 0)))
            return real(*args)

        monkeypatch.setattr(owner, name, recording)

    for owner, name in [
        (CommitLog, "sync"),
        (CommitLog, "create_file"),
        (IndexService, "sync"),
        (Checkpoint, "save"),
        (MappedFile, "remove"),
    ]:
        spied(owner, name)
    async with opened(tmp_path / "async", plugin_host, file_reserved_time=1e-9) as store:
        seen.clear()  # what opening did
        for number in range(9):  # past the middle of the first file
            assert (await store.put(message(number))).ok
        with anyio.fail_after(5):
            while store.commitlog.next_file is None:  # made ahead of need
                await anyio.sleep(0.01)
        for number in range(9, 30):  # into the next file, and the one after
            assert (await store.put(message(number))).ok
        await store.flush()
        assert await store.delete_expired(now=time.time() + 1, force=True) >= 1
        background = list(seen)
    assert {name for name, _, _ in background} == {
        "CommitLog.sync",
        "CommitLog.create_file",
        "IndexService.sync",
        "Checkpoint.save",
        "MappedFile.remove",
    }
    for name, thread, nice in background:
        assert thread.startswith("rocketmq-background") and nice == 19, (name, thread, nice)

    seen.clear()
    async with opened(tmp_path / "sync", plugin_host, flush="sync") as store:
        assert (await store.put(message(0))).ok
        waited_for = [entry for entry in seen if entry[0] == "CommitLog.sync"]
    assert waited_for
    assert not waited_for[0][1].startswith("rocketmq-background")
    assert waited_for[0][2] == os.getpriority(os.PRIO_PROCESS, 0)


@contextmanager
def open_files_limit(headroom: int):
    """RLIMIT_NOFILE lowered to what this process holds now plus ``headroom``. No garbage
    collection meanwhile: one that found an earlier test's store, left open on purpose,
    would close its files' descriptors and hand their room to this test."""
    gc.collect()
    gc.disable()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (held + headroom, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        gc.enable()


async def test_a_queue_without_a_descriptor_for_its_file_refuses_the_put_and_writes_nothing(
    tmp_path, plugin_host
):
    # a new queue's file takes a descriptor while it is created and mapped: once none is
    # left, a put to a new queue is refused before its record is written
    stored = {}  # queue id -> messages acknowledged
    async with opened(tmp_path, plugin_host) as store:
        for queue_id in range(3):
            assert (await store.put(message(queue_id, queue_id))).ok
            stored[queue_id] = 1
        with open_files_limit(headroom=6):
            refused = []  # (result, its queue)
            # the refusal comes after ~25 rounds here; the bound leaves room for
            # descriptors the process lets go of meanwhile
            for queue_id in range(3, 300):
                end = store.max_commit_log_offset
                single = await store.put(message(queue_id, queue_id))
                batch = await store.put_batch([message(queue_id, 1000 + queue_id)] * 3)
                for result, queue, count in ((single, queue_id, 1), (batch, 1000 + queue_id, 3)):
                    if result.ok:
                        stored[queue] = count
                    else:
                        refused.append((result, queue))
                if refused:
                    break
            assert refused, "the lowered limit never refused a put"
            assert store.max_commit_log_offset - end < 4 * 1200  # no record of the refused
        for result, _ in refused:
            assert result.status is PutStatus.CREATE_MAPPED_FILE_FAILED
            assert "ulimit -n" in result.remark
        assert store.queues()["TopicTest"] == sorted(stored)  # no refused queue is listed
        # with descriptors back, the refused queues work
        _, queue = refused[0]
        assert (await store.put(message(99, queue))).ok
        stored[queue] = 1
    async with opened(tmp_path, plugin_host) as store:
        assert store.stats()["recovered_after_crash"] is False
        assert store.queues()["TopicTest"] == sorted(stored)
        for queue_id, count in stored.items():
            found = await store.get("TopicTest", queue_id, 0, 32)
            assert found.status is GetStatus.FOUND and len(found.records) == count


async def test_a_thread_faults_the_commitlog_in_ahead_of_the_writer(tmp_path, plugin_host):
    def pre_touch_threads() -> set[threading.Thread]:
        # other tests' stores left open (killed on purpose) keep theirs: count ours only
        return {t for t in threading.enumerate() if t.name == "rocketmq-pre-touch"}

    others = pre_touch_threads()
    size = 4 << 20  # smaller than the distance kept ahead: the whole file gets touched
    async with opened(tmp_path, plugin_host, commit_log_file_size=size) as store:
        assert (await store.put(message(1))).ok
        newest = store.commitlog.files.last
        with anyio.fail_after(10):
            while newest.touched < size:
                await anyio.sleep(0.01)
        (ours,) = pre_touch_threads() - others
        # it only takes a core the broker leaves idle (the writer faults pages itself)
        assert os.sched_getscheduler(ours.native_id) == os.SCHED_IDLE
    assert not pre_touch_threads() - others  # stopped before the files were unmapped


def flags_by_range(path) -> list[tuple[int, int, set[str]]]:
    """(start, end, VmFlags) of each of this process's mappings of ``path``."""
    ranges = []
    current = None
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            if line.startswith("VmFlags:"):
                if current is not None:
                    ranges.append((*current, set(line.split()[1:])))
                current = None
            elif "-" in line.split(" ", 1)[0] and line.rstrip().endswith(str(path)):
                low, high = line.split(" ", 1)[0].split("-")
                current = (int(low, 16), int(high, 16))
    return sorted(ranges)


def needs_smaps() -> None:
    if not os.path.exists("/proc/self/smaps"):
        missing("needs Linux's smaps")


def read_ahead_by_range(path) -> list[tuple[int, int, bool]]:
    """(start, end, read-ahead on) of each of this process's mappings of ``path``:
    the kernel lists ``rr`` in VmFlags where MADV_RANDOM turned read-ahead off."""
    return [(low, high, "rr" not in flags) for low, high, flags in flags_by_range(path)]


async def test_the_commitlog_writers_part_is_advised_huge_pages_when_asked(tmp_path, plugin_host):
    needs_smaps()
    if not os.path.exists("/sys/kernel/mm/transparent_hugepage"):
        missing("a kernel without transparent huge pages refuses the advice")
    # commitLogHugeFolios: a fault fills the page cache 2 MiB at a time
    commitlog_file = tmp_path / "commitlog" / f"{0:020d}"
    queue_file = tmp_path / "consumequeue" / "TopicTest" / "0" / f"{0:020d}"
    async with opened(tmp_path / "default", plugin_host) as store:
        assert (await store.put(message(1))).ok
        ((_, _, commitlog_flags),) = flags_by_range(
            tmp_path / "default" / commitlog_file.relative_to(tmp_path)
        )
        assert "rr" in commitlog_flags and "hg" not in commitlog_flags
    async with opened(tmp_path, plugin_host, commit_log_huge_folios=True) as store:
        assert (await store.put(message(1))).ok
        ((_, _, commitlog_flags),) = flags_by_range(commitlog_file)
        assert {"rr", "hg"} <= commitlog_flags
        assert all("hg" not in flags for *_, flags in flags_by_range(queue_file))


async def test_the_writers_part_of_a_file_is_read_without_read_ahead(tmp_path, plugin_host):
    needs_smaps()
    # a fault there would read (zero) up to read_ahead_kb of pages in one long stall
    first, second = (tmp_path / "commitlog" / f"{n * FILE_SIZE:020d}" for n in (0, 1))
    async with opened(tmp_path, plugin_host) as store:
        assert (await store.put(message(1))).ok
        assert [ahead for *_, ahead in read_ahead_by_range(first)] == [False]
        while store.commitlog.max_offset < FILE_SIZE:
            assert (await store.put(message(2))).ok
        # full: read-ahead again, for readers catching up from disk
        assert [ahead for *_, ahead in read_ahead_by_range(first)] == [True]
        assert [ahead for *_, ahead in read_ahead_by_range(second)] == [False]
        while store.commitlog.max_offset < FILE_SIZE + 6000:  # past its first page
            assert (await store.put(message(3))).ok
        written = store.commitlog.files.last.wrote
    async with opened(tmp_path, plugin_host) as store:
        assert [ahead for *_, ahead in read_ahead_by_range(first)] == [True]
        (low, middle, written_part), (_, high, writers_part) = read_ahead_by_range(second)
        assert written_part and not writers_part
        assert middle - low == written & ~(mmap.PAGESIZE - 1) and high - low == FILE_SIZE


async def test_a_queue_file_keeps_one_mapping_with_read_ahead_off_after_a_restart(
    tmp_path, plugin_host
):
    needs_smaps()
    # thousands of queues: splitting each last file in two could reach vm.max_map_count
    sizes = dict(consume_queue_file_size=20 * 1000, commit_log_file_size=1 << 20)
    queue_file = tmp_path / "consumequeue" / "TopicTest" / "0" / f"{0:020d}"
    async with opened(tmp_path, plugin_host, **sizes) as store:
        for number in range(300):  # 6,000 bytes of entries: past the file's first page
            assert (await store.put(message(number, size=100))).ok
    async with opened(tmp_path, plugin_host, **sizes) as store:
        assert store.queues()["TopicTest"] == [0]
        assert read_ahead_by_range(queue_file) == []  # an idle queue's file is not mapped
        assert (await store.put(message(300, size=100))).ok  # the writer maps it again
        assert [ahead for *_, ahead in read_ahead_by_range(queue_file)] == [False]
