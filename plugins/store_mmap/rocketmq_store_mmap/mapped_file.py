"""Mapped files and queues of them (STORE.md §2).

A MappedFileQueue is a directory of fixed-size files, each named by the 20-digit
global offset of its first byte; offsets run on across files. Creating, syncing and
deleting files are blocking calls: the store makes them from worker threads.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import mmap
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rocketmq_core.errors import ConfigError, StoreError

from .mapping import FileMapping, MappingBudget

log = logging.getLogger("rocketmq.store.mmap")

MADV_POPULATE_WRITE = 23  # Linux 5.14+: fault pages in writable, without I/O
MADV_NORMAL, MADV_RANDOM = 0, 1  # Linux's values (the mmap module has them on Linux only)
MADV_DONTNEED = 4
# the page cache behind a CommitLog's flush is dropped this much at a time at least (a
# group commit flushes often: a few pages each would cost three syscalls apiece)
DROP_STEP = 4 << 20
MADV_HUGEPAGE = 14

# libc's madvise through ctypes releases the GIL, so a worker thread can pre-touch
# pages on the other core while the event loop goes on (mmap.madvise holds the GIL)
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_madvise = _libc.madvise
_madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_madvise.restype = ctypes.c_int
_syncfs = _libc.syncfs
_syncfs.argtypes = (ctypes.c_int,)
_syncfs.restype = ctypes.c_int

# dirty files above which one syncfs(2) of the whole file system replaces one fdatasync
# per file. Measured on our VM: an fdatasync of a queue file (open, sync, close) costs
# 0.4 to 2.7 ms, so closing after 10,000 queues got one entry each took 4 to 27 s (9.4 s
# in benchmarks/restart_many_topics.py); one syncfs of the same files took 1.3 s, and the
# close 3.4 s. Below the threshold per-file syncs cost less, and do not wait for other
# writers' dirty data on the same file system.
SYNCFS_ABOVE = 64


class FileCreationError(StoreError, OSError):
    """A store file could not be created or mapped (no space, no descriptors, no
    mappings left): the write that needed it is refused, nothing is corrupted."""


class DiskFullError(FileCreationError):
    """No room to create the next file."""


def _creation_error(error: OSError, path: Path) -> FileCreationError:
    if isinstance(error, FileCreationError):
        return error
    return FileCreationError(error.errno, f"cannot create or map {path}: {error.strerror}")


# the most disk blocks ``allocate_ahead`` gives past the writer
ALLOCATE_AHEAD = 64 * 1024
# the writer lets go of pages behind it (``resident_behind``) this much at a time: one
# madvise per 4 MiB written, whole 2 MiB folios (a part of one would split its mapping)
RELEASE_STEP = 4 << 20
HUGE_FOLIO = 2 << 20


def file_name(offset: int) -> str:
    return f"{offset:020d}"


def _size_file(fd: int, path: Path, size: int, reserve: bool) -> None:
    if not reserve:
        os.ftruncate(fd, size)  # sparse: blocks are taken as entries are written
        return
    # real blocks, not a sparse file: a full disk fails here, not as SIGBUS
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise DiskFullError(exc.errno, f"no space for the {size}-byte file {path}") from None
        raise


def _open_file(path: Path, create: bool) -> tuple[int, bool]:
    """A read-write descriptor of ``path``, made when ``create`` and missing; and whether
    it existed (O_EXCL: of two threads making the same file, one made it)."""
    if create:
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), False
        except FileExistsError:
            pass
    return os.open(path, os.O_RDWR), True


class MappedFile:
    """One file mapped in full. ``wrote`` is the write position inside it.

    Three kinds, by how the mapping holds the file: ``mmap.mmap`` (the CommitLog: it
    keeps a descriptor, and its records are sliced out while the file may be deleted);
    ``holds_descriptor=False`` (index files: mapped through libc, no descriptor);
    and with a ``budget`` (consume-queue files: no descriptor, and unmapped while idle,
    mapped again by ``view()``; ``buffer`` is None meanwhile).
    """

    __slots__ = (
        "address",
        "allocated",
        "budget",
        "buffer",
        "cuts",
        "dropped",
        "flushed",
        "holds_descriptor",
        "huge_folios",
        "lock",
        "mapping",
        "path",
        "read_ahead_from",
        "released",
        "resident_behind",
        "size",
        "start",
        "touched",
        "used",
        "writer_fills",
        "wrote",
    )

    def __init__(
        self,
        path: Path,
        start: int,
        size: int,
        *,
        reserve: bool,
        budget: MappingBudget | None = None,
        holds_descriptor: bool = True,
        map_now: bool = True,
        huge_folios: bool = False,
        resident_behind: int = 0,
        writer_fills: bool = False,
    ) -> None:
        self.path = path
        self.start = start
        self.size = size
        # the writer's part faulted in by 2 MiB folios (``disable_read_ahead``): files
        # written from start to end, the CommitLog's
        self.huge_folios = huge_folios
        self.budget = budget
        self.holds_descriptor = holds_descriptor and budget is None
        self.mapping: mmap.mmap | FileMapping | None = None
        self.buffer: memoryview | None = None
        self.address = 0
        self.wrote = 0
        self.flushed = 0
        # truncations so far: a sync that began before one proves nothing past the cut,
        # whose bytes may be written again while it runs (a slave refusing a record)
        self.cuts = 0
        self.touched = 0
        self.released = 0  # bytes from the start whose pages this process let go of
        self.dropped = 0  # bytes from the start whose page cache was dropped (drop_cached_before)
        # the writer's pre-touch lets go of the pages further behind it than this (0: only
        # ``release_before`` does): resident memory then follows the write position, not
        # the last flush, which at 100 MB/s and a flush each 0.5 s is 50 MB behind
        self.resident_behind = resident_behind
        # the writer's ``fill_ahead`` gives its next pages their page cache by writing
        # zeros there instead of faulting them in (docs/perf.md, "Page cache")
        self.writer_fills = writer_fills
        # held while ``address`` is told something (release_before, from a worker thread
        # or the writer's pre-touch) and while the mapping is let go of: a madvise never
        # reaches memory mapped anew at that address
        self.lock = threading.Lock()
        self.used = False
        # bytes from the start known to have disk blocks (``allocate``); 0: not known
        self.allocated = size if reserve else 0
        self.read_ahead_from = size  # read-ahead is off from here on (size: nowhere)
        if map_now or os.stat(path).st_size != size:
            created = self._map(create=True, reserve=reserve)
            if created:
                self.disable_read_ahead()

    def _map(self, *, create: bool = False, reserve: bool = False) -> bool:
        """Open, size (when ``create``), map and close the file; True if it was created."""
        path, size = self.path, self.size
        try:
            fd, exists = _open_file(path, create)
        except OSError as exc:
            raise _creation_error(exc, path) from exc
        sized_here = False
        try:
            found = os.fstat(fd).st_size
            if create and (not exists or found < size):
                _size_file(fd, path, size, reserve)
                sized_here = True
            elif found != size:
                raise ValueError(
                    f"{path} is {found} bytes, not {size}:"
                    " the configured file size changed, or the file is damaged"
                )
            if self.holds_descriptor:
                self.mapping = mmap.mmap(fd, size)  # keeps a dup of fd: see mapping.py
                anchor = ctypes.c_char.from_buffer(self.mapping)
                self.address = ctypes.addressof(anchor)
                del anchor  # release the export, or the mapping could never be closed
                self.buffer = memoryview(self.mapping)
            else:
                self.mapping = mapping = FileMapping(fd, size)
                self.address = mapping.address
                self.buffer = mapping.buffer
        except BaseException as exc:
            # a file this call made goes, unless its sizing failed while another thread
            # made it whole (the writer rolled into a CommitLog file being prepared)
            if not exists and (sized_here or os.fstat(fd).st_size < size):
                path.unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise _creation_error(exc, path) from exc
            raise
        finally:
            os.close(fd)  # the mapping keeps the file; fdatasync reopens when it needs one
        if self.read_ahead_from < size:  # mapped again: the kernel forgot the advice
            self._advise_writers_part(self.read_ahead_from)
        if self.budget is not None:
            self.budget.admit(self)
        return not exists

    def view(self) -> memoryview:
        """The mapped bytes, mapping the file again if the budget unmapped it (raises
        FileCreationError when it cannot: no descriptor or no mapping left)."""
        buffer = self.buffer
        if buffer is None:
            self._map()
            buffer = self.buffer
            assert buffer is not None
        self.used = True
        return buffer

    def allocate(self, end: int) -> None:
        """Give a sparse file disk blocks up to ``end`` (whole pages) before it is written
        there through the mapping: a write to a hole on a full disk is a SIGBUS, which
        kills the process; this raises DiskFullError instead."""
        if end <= self.allocated:
            return
        end = min(self.size, -(-end // mmap.PAGESIZE) * mmap.PAGESIZE)
        try:
            fd = os.open(self.path, os.O_RDWR)
        except OSError as exc:
            raise _creation_error(exc, self.path) from exc
        try:
            os.posix_fallocate(fd, self.allocated, end - self.allocated)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise DiskFullError(exc.errno, f"no space left for {self.path}") from None
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # no fallocate: sparse
                raise _creation_error(exc, self.path) from exc
        finally:
            os.close(fd)
        self.allocated = end

    def allocate_ahead(self, end: int) -> None:
        """``allocate`` up to ``end`` and ahead of it, as much again as is written (at
        most ALLOCATE_AHEAD): a busy file gets blocks one fallocate per thousands of
        writes, an idle one stays as small on disk as what it holds."""
        if end > self.allocated:
            self.allocate(max(end, self.wrote + min(self.wrote, ALLOCATE_AHEAD)))

    def unmap(self) -> None:
        """Let go of the mapping (the budget's call); the file and its bytes stay."""
        with self.lock:
            mapping, self.mapping, self.buffer, self.address = self.mapping, None, None, 0
            if mapping is not None:
                mapping.close()

    def read(self, position: int, length: int) -> bytes:
        """``length`` bytes from ``position``, through the mapping if there is one, else
        read from the file (no mapping made for a single look)."""
        if self.buffer is not None:
            return bytes(self.buffer[position : position + length])
        with self._opened(os.O_RDONLY) as fd:
            return os.pread(fd, length, position)

    def chunks(self, length: int) -> Iterator[bytes]:
        """The file's bytes from the start, ``length`` at a time, read without mapping
        the file (recovery looks at thousands of queue files once)."""
        if self.buffer is not None:
            for position in range(0, self.size, length):
                yield bytes(self.buffer[position : position + length])
            return
        with self._opened(os.O_RDONLY) as fd:
            for position in range(0, self.size, length):
                yield os.pread(fd, min(length, self.size - position), position)

    @property
    def end(self) -> int:
        return self.start + self.size

    @property
    def free(self) -> int:
        return self.size - self.wrote

    def sync(self) -> None:
        """Make written bytes durable. fdatasync, not msync: msync holds the GIL."""
        target = self.sync_target()  # the writer may go on while this runs in a worker thread
        try:
            with self._opened(os.O_RDWR) as fd:
                os.fdatasync(fd)
        except FileNotFoundError:
            return  # deleted by retention meanwhile: nothing left to make durable
        self.synced(target)

    def sync_target(self) -> tuple[int, int]:
        """What a sync beginning now will have made durable: ``wrote``, and the count
        of cuts it is valid for (``synced``)."""
        with self.lock:  # both of one moment: a cut changes both (truncate_after)
            return self.wrote, self.cuts

    def synced(self, target: tuple[int, int]) -> None:
        """The sync that began at ``target`` (``sync_target``) ended: the bytes below it
        are durable, unless the file was cut meanwhile; then ``flushed`` already says
        what the cut kept."""
        written, cuts = target
        with self.lock:  # a cut between the check and the store would be undone
            if self.cuts == cuts:
                self.flushed = max(self.flushed, written)

    def release_before(self, position: int, *, wait: bool = True) -> None:
        """Let go of this process's mapping of the written pages before ``position``
        (MADV_DONTNEED): the page cache keeps them and a read maps them again, but the
        process's resident memory follows the recent part of the log instead of all it
        wrote. A page written and not yet flushed stays dirty in the page cache (the
        kernel moves the mapping's dirty bit to the page as it unmaps it), and the next
        fdatasync writes it as before; once on disk, the kernel may reclaim it as any
        unmapped clean cache. Whole 2 MiB folios with ``huge_folios``. Blocking (GIL
        released). Pages read again after that stay until the file goes: what a lagging
        consumer reads back is not let go of a second time. Without ``wait``, nothing is
        done while another thread holds the lock (the event loop's writer must never wait
        for the SCHED_IDLE pre-toucher: on a busy core that thread may not run again for
        long)."""
        unit = HUGE_FOLIO if self.huge_folios else mmap.PAGESIZE
        if (min(position, self.wrote) & ~(unit - 1)) <= self.released:
            return
        if not self.lock.acquire(blocking=wait):
            return
        try:  # the mapping stays while the kernel is told (unmap waits)
            # under the lock: a truncation may have moved ``wrote`` back meanwhile
            end = min(position, self.wrote) & ~(unit - 1)
            address, released = self.address, self.released
            told = address and end > released
            if told and _madvise(address + released, end - released, MADV_DONTNEED) == 0:
                self.released = end
        finally:
            self.lock.release()

    def drop_cached_before(self, position: int) -> None:
        """Have the kernel drop the page cache of the bytes before ``position`` that are
        on disk and no longer mapped here (POSIX_FADV_DONTNEED; it skips any page still
        dirty or mapped): the next pages written then come from memory just freed
        instead of fresh memory (docs/perf.md, "Page cache"). A read later brings a page
        back from disk. Blocking; at least DROP_STEP at a time, ending on a 2 MiB boundary
        (the kernel keeps a large folio the range ends inside) or at the file's end. A
        failure is logged and this file is dropped no more."""
        end = min(position, self.flushed, self.released)
        end = end if end == self.size else end & ~(HUGE_FOLIO - 1)
        if end - self.dropped < DROP_STEP and not (end == self.size > self.dropped):
            return
        try:
            with self._opened(os.O_RDONLY) as fd:
                os.posix_fadvise(fd, self.dropped, end - self.dropped, os.POSIX_FADV_DONTNEED)
        except FileNotFoundError:
            return  # deleted by retention meanwhile
        except OSError as exc:
            log.warning("cannot drop the page cache of %s (%s): it stays cached", self.path, exc)
            end = self.size
        self.dropped = end

    def pre_touch(self, length: int) -> None:
        """Fault in the next ``length`` bytes ahead of the writer (a first touch costs
        2-10 us per page here), then let go of the pages more than ``resident_behind``
        behind it (RELEASE_STEP at a time, when no other thread holds the lock). Blocking,
        GIL released: from a worker thread, or the writer's own when it caught up; the
        mapping must stay open meanwhile. Contents are never changed."""
        start = max(self.touched, self.wrote) & ~(mmap.PAGESIZE - 1)
        end = min(self.size, start + length)
        if end <= start:
            return
        # claimed before the work: a writer that catches up faults these pages in one by
        # one as it writes, instead of walking the same range again (two threads, one lock)
        self.touched = end
        # on an older kernel this fails and pages fault in on first write instead
        _madvise(self.address + start, end - start, MADV_POPULATE_WRITE)
        self._release_far_behind()

    def fill_ahead(self, length: int) -> None:
        """The writer's own pre-touch, when the background one fell behind: with
        ``writer_fills``, the bytes from the write position (or the end of what is ready,
        if further) up to a multiple of ``length`` at least ``length / 2`` on are written
        with zeros through the file first (pwrite), then faulted in. A written page
        needs no zeroing and comes as a large folio: ~0.9 + 0.2 us a page here against
        ~4.5 for a fault that fills it (docs/perf.md, "Page cache"). Its cost: those
        pages are dirty, so a flush before the writer reaches them writes them twice;
        so the step is small and SYNC_FLUSH stores fault pages in as before.

        Only the writer calls this: nothing else writes records, so the zeros land only
        where no record is yet. The background pre-toucher only ever faults pages in, and
        a zero written over a page it faults in changes nothing there."""
        if not self.writer_fills:
            self.pre_touch(length)
            return
        start = max(self.touched, self.wrote)
        # steps end on multiples of ``length`` (a write aligned so gets folios that large)
        # and fill at least half of it: a writer that overtook the ready end gets room too
        end = min(self.size, -(-(start + length // 2) // length) * length)
        if end <= start:
            return
        self.touched = end  # claimed first, as pre_touch does
        try:
            with self._opened(os.O_WRONLY) as fd:
                _write_zeros(fd, start, end)
        except OSError as exc:  # faults fill the pages, this step and from now on
            self.writer_fills = False
            log.warning(
                "cannot write ahead of the writer in %s (%s); its pages are faulted in instead",
                self.path,
                exc,
            )
        page = start & ~(mmap.PAGESIZE - 1)
        _madvise(self.address + page, end - page, MADV_POPULATE_WRITE)
        self._release_far_behind()

    def _release_far_behind(self) -> None:
        keep = self.resident_behind
        if keep and self.wrote - keep - self.released >= RELEASE_STEP:
            self.release_before(self.wrote - keep, wait=False)

    def disable_read_ahead(self, position: int = 0) -> None:
        """No read-ahead from ``position`` on, for the writer's part of a file: the
        first fault past a read-ahead window would read (zero) up to read_ahead_kb of
        pages in one call that nothing preempts (8 MiB and ~15 ms on this VM, every 8 MiB
        written, a stall for every put meanwhile). With ``huge_folios`` the part is also
        advised MADV_HUGEPAGE: the kernel then fills the page cache 2 MiB around a fault
        (read-ahead bounded to that, even with MADV_RANDOM), as one folio where the file
        system has large folios (ext4 from Linux 6.16): ~1 instead of ~2.7 us a page from
        memory the kernel used before, ~9 from memory a VM's balloon gave back to its
        host (docs/perf.md, "Page cache").
        Hints: a kernel that refuses them (no transparent huge pages) changes nothing
        else; a file once full keeps the 2 MiB read-around for readers catching up."""
        start = position & ~(mmap.PAGESIZE - 1)
        if start < self.read_ahead_from:
            # through ctypes: the GIL is released while the kernel waits for the
            # mapping's lock (a pre-touch may hold it for a step)
            if self.address:  # unmapped: advised when mapped again
                self._advise_writers_part(start)
            self.read_ahead_from = start

    def _advise_writers_part(self, start: int) -> None:
        _madvise(self.address + start, self.size - start, MADV_RANDOM)
        if self.huge_folios:
            _madvise(self.address + start, self.size - start, MADV_HUGEPAGE)

    def enable_read_ahead(self) -> None:
        """Read-ahead again over the whole file, once written: for readers catching up
        from disk."""
        if self.read_ahead_from < self.size:
            if self.address:
                _madvise(self.address, self.size, MADV_NORMAL)
            self.read_ahead_from = self.size

    def zero_from(self, position: int) -> None:
        """Erase everything after ``position``: old bytes there must never look like records.

        Writes only the chunks that hold something other than zeros, and looks only where
        the file has data (holes read as zeros already): a sparse queue file stays sparse
        and a clean restart writes nothing. Through the file, not the mapping, so
        untouched pages stay out of our memory.
        """
        with self._opened(os.O_RDWR) as fd:
            for data_start, data_end in _data_regions(fd, position, self.size):
                at = data_start
                while at < data_end:
                    length = min(ZERO_CHUNK, data_end - at)
                    if os.pread(fd, length, at) != _ZEROS[:length]:
                        _write_zeros(fd, at, at + length)
                    at += length

    @contextmanager
    def _opened(self, flags: int) -> Iterator[int]:
        """A descriptor of the file for one call: the mapping needs none, and a broker
        with thousands of queue files keeps none open."""
        fd = os.open(self.path, flags)
        try:
            yield fd
        finally:
            os.close(fd)

    def close(self) -> None:
        if self.budget is not None:
            self.budget.forget(self)
        if self.holds_descriptor and self.buffer is not None:
            self.buffer.release()  # then mmap.close() refuses while a slice is in use
        self.unmap()

    def remove(self) -> None:
        """Blocking: unmap and delete the file."""
        self.close()
        self.path.unlink(missing_ok=True)


def sync_files(files: list[MappedFile], directory: Path) -> None:
    """Make the written bytes of ``files`` durable: each with fdatasync when there are
    few, else one syncfs(2) of the file system that holds ``directory`` (blocking)."""
    if len(files) <= SYNCFS_ABOVE:
        for mapped in files:
            mapped.sync()
        return
    # the writer may go on meanwhile: only what was written before the call is durable
    targets = [mapped.sync_target() for mapped in files]
    sync_file_system(directory)
    for mapped, target in zip(files, targets, strict=True):
        mapped.synced(target)


def sync_file_system(directory: Path) -> None:
    """syncfs(2): every dirty page and inode of the file system holding ``directory``,
    mapped pages included, on disk; raises OSError with the write-back error (Linux 5.8+)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        if _syncfs(fd) != 0:
            number = ctypes.get_errno()
            raise OSError(number, f"syncfs of {directory}: {os.strerror(number)}")
    finally:
        os.close(fd)


ZERO_CHUNK = 1 << 20
# calloc'd: its pages are the kernel's shared zero page until written, so no memory
_ZEROS = memoryview(bytes(ZERO_CHUNK))


def _write_zeros(fd: int, start: int, end: int) -> None:
    while start < end:
        start += os.pwrite(fd, _ZEROS[: min(ZERO_CHUNK, end - start)], start)


def _data_regions(fd: int, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The [start, end) ranges of the file between ``start`` and ``end`` that hold data
    (SEEK_DATA/SEEK_HOLE); the whole range where the file system cannot tell."""
    at = start
    while at < end:
        try:
            data = os.lseek(fd, at, os.SEEK_DATA)
            hole = os.lseek(fd, data, os.SEEK_HOLE)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data after ``at``
                return
            if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):
                yield at, end
                return
            raise
        if data >= end:
            return
        yield data, min(hole, end)
        at = hole


class MappedFileQueue:
    """Files of ``file_size`` bytes in ``directory``, addressed by global offset."""

    def __init__(
        self,
        directory: Path,
        file_size: int,
        *,
        reserve: bool,
        read_written_ahead: bool,
        budget: MappingBudget | None = None,
        huge_folios: bool = False,
        resident_behind: int = 0,
        writer_fills: bool = False,
    ) -> None:
        self.directory = directory
        self.file_size = file_size
        self.reserve = reserve
        self.huge_folios = huge_folios  # of its files (MappedFile.huge_folios)
        self.resident_behind = resident_behind  # of its files (MappedFile.resident_behind)
        self.writer_fills = writer_fills  # of its files (MappedFile.writer_fills)
        # files mapped only while in use, with no descriptor (consume queues); None: all
        # files mapped for good (the CommitLog)
        self.budget = budget
        # the written part of the file being written keeps read-ahead: one more mapping
        # for the file (worth it for a CommitLog; a store has thousands of queue files)
        self.read_written_ahead = read_written_ahead
        self.files: list[MappedFile] = []

    def load(self) -> None:
        """Every existing file, in offset order: mapped now, or with a budget on first use."""
        self.directory.mkdir(parents=True, exist_ok=True)
        names = sorted(p for p in self.directory.iterdir() if p.name.isdigit())
        for path in names:
            start = int(path.name)
            if start % self.file_size:
                # a user's mistake (a copied or renamed file), not damage: one line at start
                raise ConfigError(
                    f"{path}: its offset is not a multiple of the file size {self.file_size}"
                    " (a file renamed or copied in by hand?); move it out of the store"
                )
            mapped = MappedFile(
                path,
                start,
                self.file_size,
                reserve=self.reserve,
                budget=self.budget,
                map_now=self.budget is None,
                huge_folios=self.huge_folios,
                resident_behind=self.resident_behind,
                writer_fills=self.writer_fills,
            )
            mapped.wrote = mapped.flushed = self.file_size  # until recovery says otherwise
            mapped.released = self.file_size  # not resident: nothing to let go of
            self.files.append(mapped)

    @property
    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    @property
    def min_offset(self) -> int:
        return self.files[0].start if self.files else 0

    @property
    def max_offset(self) -> int:
        """The global offset of the next byte to write."""
        last = self.last
        return last.start + last.wrote if last is not None else 0

    def create(self, start: int) -> MappedFile:
        mapped = self.new_file(start)
        self.append(mapped)
        return mapped

    def new_file(self, start: int) -> MappedFile:
        """A file of this queue at ``start``, made and mapped but not in the queue yet."""
        return MappedFile(
            self.directory / file_name(start),
            start,
            self.file_size,
            reserve=self.reserve,
            budget=self.budget,
            huge_folios=self.huge_folios,
            resident_behind=self.resident_behind,
            writer_fills=self.writer_fills,
        )

    def append(self, mapped: MappedFile) -> None:
        """``mapped`` becomes the file written; the one before is full."""
        if self.files:
            self.files[-1].enable_read_ahead()
        self._prepare_for_the_writer(mapped)
        self.files.append(mapped)

    def _prepare_for_the_writer(self, mapped: MappedFile) -> None:
        mapped.disable_read_ahead(mapped.wrote if self.read_written_ahead else 0)

    def find(self, offset: int) -> MappedFile | None:
        """The file holding global ``offset``."""
        if not self.files or offset < self.files[0].start:
            return None
        index = (offset - self.files[0].start) // self.file_size
        if index >= len(self.files):
            return None
        mapped = self.files[index]
        return mapped if mapped.start <= offset < mapped.end else None

    def truncate_after(self, offset: int, zero: bool = True) -> None:
        """Recovery: the queue ends at ``offset``; later files go, the rest is zeroed.

        ``zero=False`` when nothing can follow the end (after a clean shutdown).
        """
        kept: list[MappedFile] = []
        for mapped in self.files:
            if mapped.start < offset or (mapped.start == offset and not kept):
                kept.append(mapped)
            else:
                mapped.close()
                mapped.path.unlink(missing_ok=True)
        self.files = kept
        if kept:
            last = kept[-1]
            # under the lock: not while a worker thread lets go of pages or ends a sync
            with last.lock:
                last.wrote = max(0, min(last.size, offset - last.start))
                # durable below the cut stays so; a file just loaded counts as durable
                # (``flushed`` = its size), as recovery trusts what it reads
                last.flushed = min(last.flushed, last.wrote)
                last.cuts += 1
                # pages written again from here on may be let go of again
                last.released = min(last.released, last.wrote & ~(mmap.PAGESIZE - 1))
            last.dropped = min(last.dropped, last.wrote & ~(mmap.PAGESIZE - 1))
            self._prepare_for_the_writer(last)  # the writer goes on from here
            if zero:
                last.zero_from(last.wrote)

    def delete_first(self) -> MappedFile:
        """Take the oldest file out of the queue; ``remove()`` it off the event loop."""
        return self.files.pop(0)

    def close(self) -> None:
        for mapped in self.files:
            mapped.close()
        self.files.clear()


class PreToucher:
    """A thread that keeps the newest file of ``files`` faulted in ``ahead`` bytes past
    its writer, ``step`` bytes at a time, with no round trip through the event loop
    between steps: on this VM a fresh page costs 8-10 us to fault in, about as much as
    the rest of a put, so on a machine with a core to spare this work belongs there.

    Only reads the queue's list (the event loop changes it); ``stop()`` before the
    files are closed."""

    def __init__(self, files: MappedFileQueue, ahead: int, step: int, idle: float) -> None:
        self.files = files
        self.ahead = ahead
        self.step = step
        self.idle = idle
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rocketmq-pre-touch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        _run_only_when_idle()
        while not self._stopping.is_set():
            last = self.files.last
            # behind the writer by less than ``ahead``, and not at the end of the file
            if last is not None and last.touched < min(last.wrote + self.ahead, last.size):
                try:
                    last.pre_touch(self.step)
                except (OSError, ValueError) as exc:  # unmapped meanwhile: try the next
                    log.warning("pre-touching %s failed: %s", last.path, exc)
                    self._stopping.wait(1.0)
                continue
            self._stopping.wait(self.idle)


def _run_only_when_idle() -> None:
    """The calling thread runs only when its core has nothing else to run (SCHED_IDLE).

    Pre-touching is work ahead of need: when the broker shares one core with it, a
    pre-touch must never hold back the event loop or the network's softirqs (the
    writer faults its pages in itself when the pre-toucher falls behind). The cost: if
    a busy process on that core preempts it between two steps, while it holds the
    GIL, the event loop waits for the GIL until that core has a moment to spare."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError) as exc:  # not Linux, or not allowed here
        log.debug("pre-touching at normal priority: %s", exc)
