"""commitLogPageCacheWindow: the page cache of flushed CommitLog bytes further behind the
flush than the window is dropped (the kernel's own residency, read with mincore); what
is dropped reads back whole from disk; without a window nothing is dropped."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import sys
from pathlib import Path

import anyio
import pytest
from rocketmq_store_mmap.mapped_file import DROP_STEP, HUGE_FOLIO
from test_writer_fill import small_store

from rocketmq_core.broker.config import BrokerConfig
from rocketmq_core.store.api import MessageToStore
from rocketmq_core.store.loader import create_store
from tests.missing import missing

MIB = 1 << 20
PAGE = mmap.PAGESIZE
FILE_SIZE = 16 * MIB
# wider than what the writer keeps mapped (RESIDENT_BEHIND), so that what the window
# keeps is the window's doing: a mapped page is never dropped anyway
WINDOW = 24 * MIB
BODY_SIZE = 100_000


def resident(path: Path) -> list[bool]:
    """Whether each page of ``path`` is in the page cache (mincore of a mapping made
    for the asking: mapping a file faults nothing in)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    size = path.stat().st_size
    pages = -(-size // PAGE)
    vector = (ctypes.c_ubyte * pages)()
    with open(path, "rb") as file, mmap.mmap(file.fileno(), size, access=mmap.ACCESS_COPY) as m:
        anchor = ctypes.c_char.from_buffer(m)
        try:
            address = ctypes.c_void_p(ctypes.addressof(anchor))
            if libc.mincore(address, ctypes.c_size_t(size), vector) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
        finally:
            del anchor
    return [bool(flag & 1) for flag in vector]


def dropping_works(directory: Path) -> bool:
    """Whether the file system under ``directory`` drops the page cache when told
    (tmpfs keeps its pages: they are the file)."""
    path = directory / "probe"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        os.write(fd, b"x" * PAGE)
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, PAGE, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    dropped = not resident(path)[0]
    path.unlink()
    return dropped


class DropsAsked:
    """The POSIX_FADV_DONTNEED ranges the store asks the kernel for, by file: what
    it keeps is read from these, not from the page cache, which this machine's own
    reclaim (DAMON's pageout of memory idle for a minute) may thin out at any time."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ranges: dict[str, list[tuple[int, int]]] = {}
        advise = os.posix_fadvise

        def recorded(fd: int, offset: int, length: int, advice: int) -> None:
            if advice == os.POSIX_FADV_DONTNEED:
                path = os.readlink(f"/proc/self/fd/{fd}")
                self.ranges.setdefault(path, []).append((offset, offset + length))
            advise(fd, offset, length, advice)

        monkeypatch.setattr(os, "posix_fadvise", recorded)

    def end(self, path: Path) -> int:
        """Where the asked ranges of ``path`` end; they must cover it from 0, gap-free."""
        end = 0
        for start, stop in sorted(self.ranges.get(str(path.resolve()), [])):
            assert start <= end, f"{path.name}: nothing asked for [{end}, {start})"
            end = max(end, stop)
        return end


def body(number: int) -> bytes:
    return bytes([number % 251 + 1]) * BODY_SIZE


async def fill_and_flush(tmp_path: Path, window: int, count: int):
    """A store with ``count`` messages written and flushed; returns it open and the
    CommitLog's flushed end."""
    store = create_store(
        "mmap",
        small_store(tmp_path, commit_log_file_size=FILE_SIZE, commit_log_page_cache_window=window),
    )
    await store.open()
    for number in range(count):
        assert store.append(MessageToStore("T", 0, body(number))).ok
    await store.flush()
    return store, store.commitlog.files.last.start + store.commitlog.files.last.flushed


def test_flushed_pages_further_behind_than_the_window_leave_the_page_cache(tmp_path, monkeypatch):
    if not sys.platform.startswith("linux"):
        missing("needs Linux's mincore and POSIX_FADV_DONTNEED")
    if not dropping_works(tmp_path):
        missing(f"the file system of {tmp_path} keeps its page cache (tmpfs?)")
    count = 800  # ~80 MB: five files
    partly_dropped = []
    asked = DropsAsked(monkeypatch)

    async def main() -> None:
        store, flushed = await fill_and_flush(tmp_path, WINDOW, count)
        try:
            files = list(store.commitlog.files.files)
            assert len(files) >= 5
            drop_to = flushed - WINDOW
            for mapped in files:
                pages = resident(mapped.path)
                written = -(-mapped.wrote // PAGE)
                cached_from = max(0, drop_to - mapped.start) // PAGE
                # dropped up to where the window begins (a step and a 2 MiB folio at most
                # short of it), and the kernel did; nothing the window holds was asked for
                short = (DROP_STEP + HUGE_FOLIO) // PAGE
                asked_end = asked.end(mapped.path)
                assert asked_end >= min(written, max(0, cached_from - short)) * PAGE
                assert asked_end <= max(cached_from * PAGE, 0), mapped.path
                assert not any(pages[: max(0, cached_from - short)]), mapped.path
                assert mapped.start + mapped.dropped <= max(drop_to, mapped.start)
                if 0 < mapped.dropped < mapped.size:
                    partly_dropped.append(mapped.path)
            # every message reads back whole, the dropped ones from disk
            for number in range(count):
                found = store.get_now("T", 0, number, 1, None)
                assert body(number) in bytes(found.records[0]), number
        finally:
            await store.close()

    anyio.run(main)
    assert partly_dropped  # the file the window begins in, up to a step boundary


@pytest.mark.parametrize("flush", ["sync", "async"])
def test_a_sync_flush_store_keeps_its_page_cache(tmp_path, caplog, flush):
    """SYNC_FLUSH: the drops would delay the group commits the puts wait for."""
    config = small_store(
        tmp_path, flush=flush, commit_log_file_size=FILE_SIZE, commit_log_page_cache_window=WINDOW
    )
    store = create_store("mmap", config)
    assert store.commitlog.page_cache_window == (0 if flush == "sync" else WINDOW)
    ignored = "commitLogPageCacheWindow is ignored with SYNC_FLUSH" in caplog.text
    assert ignored is (flush == "sync")


def test_without_a_window_nothing_is_dropped(tmp_path, monkeypatch):
    if not sys.platform.startswith("linux"):
        missing("needs Linux's POSIX_FADV_DONTNEED and /proc")
    asked = DropsAsked(monkeypatch)

    async def main() -> None:
        store, _ = await fill_and_flush(tmp_path, 0, 350)
        try:
            assert len(store.commitlog.files.files) >= 2
            for mapped in store.commitlog.files.files:
                assert asked.end(mapped.path) == 0, mapped.path
                assert mapped.dropped == 0
        finally:
            await store.close()

    anyio.run(main)


@pytest.mark.parametrize(
    ("line", "window"), [("", 0), ("commitLogPageCacheWindow=268435456", 256 * MIB)]
)
def test_the_window_is_a_broker_conf_key(tmp_path, line, window):
    path = tmp_path / "broker.conf"
    path.write_text(f"storePathRootDir={tmp_path}/store\n{line}\n")
    config = BrokerConfig.load(path)
    config.validate()
    assert config.store_config().commit_log_page_cache_window == window
