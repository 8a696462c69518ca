"""IndexFile: query by message key within a time range (STORE.md §5).

Layout as RocketMQ's: a 40-byte header, hash slots holding the newest entry number of
each chain, then 20-byte entries chained to the previous one in the same slot. The
key hash is CRC32 of ``topic#key`` (RocketMQ uses Java's String.hashCode; a CRC is the
same quality and 50x cheaper in Python), so the files are not byte-compatible with Java.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import time
import zlib
from pathlib import Path

from rocketmq_core.errors import ConfigError
from rocketmq_core.store.api import DispatchRequest
from rocketmq_core.store.rules import is_rollback

from .mapped_file import MappedFile

try:  # the compiled IndexFile.put (setup.py builds it with the append kernel)
    from . import _append
except ImportError:
    compiled_index_keys = None
else:  # None from a build older than it: the Python put serves
    compiled_index_keys = getattr(_append, "index_keys", None)

# bytes of entries given disk blocks ahead of the writer: one fallocate per 3,276 keys
ENTRIES_AHEAD = 64 * 1024
# entries a sync leaves mapped behind the newest (52,428 keys): older ones are let go of
# (MADV_DONTNEED) and a query reaching them maps them again from the page cache. The
# slots stay: keys hash to them all over
RESIDENT_ENTRIES_BEHIND = 1 << 20
# fewer keys' room than this left after a put: more is allocated at once, so that the
# compiled append (which only writes where blocks are) does not leave the next put to
# the Python path
INDEX_LOW_WATER = 1024

log = logging.getLogger("rocketmq.store.mmap")

HEADER = struct.Struct(">qqqqii")  # begin/end timestamp, begin/end phys offset, slots, count
HEADER_SIZE = HEADER.size  # 40
LONG, INT = struct.Struct(">q"), struct.Struct(">i")  # one header field
SLOT = struct.Struct(">i")
SLOT_SIZE = SLOT.size  # 4
INDEX_ENTRY = struct.Struct(">iqii")  # key hash, phys offset, time diff (s), previous entry
INDEX_ENTRY_SIZE = INDEX_ENTRY.size  # 20
MAX_QUERY = 64  # maxMsgsNumBatch


_TOPIC_PREFIX_CRCS: dict[str, int] = {}


def topic_prefix_crc(topic: str) -> int:
    """CRC32 of ``topic#``: a key's hash continues from it (no string building per key)."""
    crc = _TOPIC_PREFIX_CRCS.get(topic)
    if crc is None:
        crc = zlib.crc32(f"{topic}#".encode())
        if len(_TOPIC_PREFIX_CRCS) < 100_000:
            _TOPIC_PREFIX_CRCS[topic] = crc
    return crc


def key_hash(topic: str, key: str) -> int:
    """The hash of ``topic#key``, the string RocketMQ indexes."""
    return zlib.crc32(key.encode(), topic_prefix_crc(topic)) & 0x7FFFFFFF


def key_hashes(topic_crc: int, keys: bytes | None, uniq_key: bytes | None) -> list[int]:
    """The hashes a record is indexed under: UNIQ_KEY and each KEYS token (``topic_crc``:
    the CRC of ``topic#`` that every hash continues from)."""
    crc32 = zlib.crc32
    hashes = [crc32(uniq_key, topic_crc) & 0x7FFFFFFF] if uniq_key else []
    if keys:
        for key in keys.split(b" "):
            if key:
                hashes.append(crc32(key, topic_crc) & 0x7FFFFFFF)
    return hashes


def _header_field(layout: struct.Struct, offset: int) -> property:
    """A header field of an IndexFile, read from its mapped file at ``offset``."""
    return property(lambda index_file: layout.unpack_from(index_file.buffer, offset)[0])


class IndexFile:
    def __init__(self, path: Path, slot_num: int, index_num: int) -> None:
        self.path = path
        self.slot_num = slot_num
        self.index_num = index_num
        self.entries_at = HEADER_SIZE + slot_num * SLOT_SIZE
        size = self.entries_at + index_num * INDEX_ENTRY_SIZE
        created = not path.exists()
        # no descriptor held; sparse, with disk blocks given before each write (allocate)
        self.file = MappedFile(path, 0, size, reserve=False, holds_descriptor=False)
        self.file.disable_read_ahead()  # keys hash to slots all over the file
        # whole pages of entries are let go of once synced, never the header or slots
        self.file.released = -(-self.entries_at // mmap.PAGESIZE) * mmap.PAGESIZE
        self.buffer = self.file.buffer
        # the part of the file with disk blocks: all the compiled append may write
        self.allocated_view = self.buffer[:0]
        self.room = 0  # entries with disk blocks not used yet
        self.dirty = False
        if created:
            try:  # header and slots now (slots are written all over), entries ahead
                self._allocate(self.entries_at + ENTRIES_AHEAD)
            except BaseException:
                self.close()
                path.unlink(missing_ok=True)
                raise

    def _allocate(self, end: int) -> None:
        """Disk blocks up to ``end`` (a write to a hole on a full disk is a SIGBUS);
        raises DiskFullError."""
        self.file.allocate(end)
        self.allocated_view.release()
        self.allocated_view = self.buffer[: self.file.allocated]
        allocated = (self.file.allocated - self.entries_at) // INDEX_ENTRY_SIZE
        self.room = min(self.index_num, allocated) - self.index_count

    def top_up(self) -> None:
        """Allocate ahead again; on a full disk, leave it to the next put's ``reserve``."""
        try:
            self.reserve(INDEX_LOW_WATER)
        except OSError as exc:
            log.debug("index file %s not allocated ahead: %s", self.path, exc)

    def reserve(self, count: int) -> int:
        """Disk blocks for the next ``count`` entries, or as many as the file has left;
        returns how many that is. Raises DiskFullError (nothing written)."""
        fits = min(count, self.index_num - self.index_count)
        if fits > 0:
            end = self.entries_at + (self.index_count + fits) * INDEX_ENTRY_SIZE
            if end > self.file.allocated or fits > self.room:
                self._allocate(end + ENTRIES_AHEAD)
        return max(0, fits)

    # The header lives in the mapped file only: the compiled append writes it there with
    # each record, and a copy in this object would need reading back after every put.
    begin_timestamp = _header_field(LONG, 0)
    end_timestamp = _header_field(LONG, 8)
    end_phy_offset = _header_field(LONG, 24)
    slot_count = _header_field(INT, 32)

    @property
    def index_count(self) -> int:
        """Entries used, counting entry 0, which means "end of chain"."""
        return max(1, INT.unpack_from(self.buffer, 36)[0])

    def put(self, hashes: list[int], phys: int, store_timestamp: int) -> int:
        """Add a record's keys, as many as fit where the file has disk blocks (``reserve``
        gives them); returns how many."""
        buffer, slot_num, entries_at = self.buffer, self.slot_num, self.entries_at
        begin_timestamp, _, begin_phy_offset, _, slot_count, count = HEADER.unpack_from(buffer, 0)
        first = count = max(1, count)
        room = min(self.index_num, (self.file.allocated - entries_at) // INDEX_ENTRY_SIZE) - count
        if len(hashes) > room:
            hashes = hashes[: max(0, room)]
            if not hashes:
                return 0
        if begin_timestamp <= 0:
            begin_timestamp, begin_phy_offset = store_timestamp, phys
        time_diff = max(0, min(0x7FFFFFFF, (store_timestamp - begin_timestamp) // 1000))
        slot_ats: list[int] = []
        for hash_value in hashes:
            slot_at = HEADER_SIZE + (hash_value % slot_num) * SLOT_SIZE
            if slot_at in slot_ats:
                # an earlier key of this record in the same slot: chain to the newest one
                previous = first + len(slot_ats) - 1 - slot_ats[::-1].index(slot_at)
            else:
                (previous,) = SLOT.unpack_from(buffer, slot_at)
                if previous <= 0 or previous >= first:
                    previous = 0
                    slot_count += 1
            INDEX_ENTRY.pack_into(
                buffer, entries_at + count * INDEX_ENTRY_SIZE, hash_value, phys, time_diff, previous
            )
            slot_ats.append(slot_at)
            count += 1
        # the header with each record (a kill -9 keeps the page cache, and a stale count
        # cuts chains at reload), and before the slots: a kill in between orphans these
        # entries instead of cutting their chains
        HEADER.pack_into(
            buffer, 0, begin_timestamp, store_timestamp, begin_phy_offset, phys, slot_count, count
        )
        for number, slot_at in enumerate(slot_ats, first):
            SLOT.pack_into(buffer, slot_at, number)
        self.room -= len(hashes)
        self.dirty = True
        return len(hashes)

    def wrote_compiled(self, keys: int) -> None:
        """``keys`` entries written by compiled code into ``allocated_view``: the room
        they took, and disk blocks for the next puts' keys before those come."""
        if keys:
            self.dirty = True
            self.room -= keys
            if self.room < INDEX_LOW_WATER:
                self.top_up()

    def query(self, hash_value: int, begin: int, end: int, limit: int) -> list[int]:
        """CommitLog offsets of entries with ``hash_value`` stored in [begin, end], newest first."""
        found: list[int] = []
        slot_at = HEADER_SIZE + (hash_value % self.slot_num) * SLOT_SIZE
        (number,) = SLOT.unpack_from(self.buffer, slot_at)
        entries_at, index_count, begin_timestamp = (
            self.entries_at,
            self.index_count,
            self.begin_timestamp,
        )
        seen = 0
        while 0 < number < index_count and len(found) < limit and seen < index_count:
            seen += 1
            entry_hash, phys, time_diff, previous = INDEX_ENTRY.unpack_from(
                self.buffer, entries_at + number * INDEX_ENTRY_SIZE
            )
            stored = begin_timestamp + time_diff * 1000
            if stored < begin - 999:  # chains run newest to oldest; times are whole seconds
                break
            if entry_hash == hash_value and begin - 999 <= stored <= end:
                found.append(phys)
            number = previous
        return found

    def sync(self) -> None:
        """Everything to disk; the checkpoint vouches for it afterwards. Runs in a worker
        thread while the event loop puts, and writes nothing itself."""
        if self.dirty:
            self.dirty = False
            self.file.wrote = self.file.size
            self.file.sync()
            newest = self.entries_at + self.index_count * INDEX_ENTRY_SIZE
            self.file.release_before(newest - RESIDENT_ENTRIES_BEHIND)

    def close(self) -> None:
        self.allocated_view.release()  # before the unmap: no view may outlive the mapping
        self.file.close()


class IndexService:
    """The index files of a store, newest last; the ``index`` dispatcher writes here."""

    def __init__(self, directory: Path, slot_num: int, index_num: int) -> None:
        if index_num < 2:  # entry 0 ends every chain: a file needs room for one more
            raise ConfigError(f"maxIndexNum is {index_num}; it must be at least 2")
        self.directory = directory
        self.slot_num = slot_num
        self.index_num = index_num
        self.files: list[IndexFile] = []
        # records below this CommitLog offset are indexed already (recovery replays them)
        self.indexed_below = 0

    def load(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for path in sorted(p for p in self.directory.iterdir() if p.name.isdigit()):
            try:
                self.files.append(IndexFile(path, self.slot_num, self.index_num))
            except ValueError as exc:
                log.warning("ignoring index file %s: %s", path, exc)
        if self.files and self.files[-1].index_count > 1:
            # the newest record again: a kill between its keys leaves some unindexed
            self.indexed_below = self.files[-1].end_phy_offset

    @property
    def last_update(self) -> tuple[int, int]:
        if not self.files:
            return 0, 0
        newest = self.files[-1]
        return newest.end_timestamp, newest.end_phy_offset

    def put(self, request: DispatchRequest) -> None:
        """Index a record a dispatcher was told of (a replica's, or recovery's replay);
        compiled when its keys fit where the newest file has disk blocks."""
        if is_rollback(request.sys_flag) or request.commit_log_offset < self.indexed_below:
            return  # rollbacks are not indexed; below the mark: indexed before a replay
        keys, uniq_key = request.keys, request.uniq_key
        if not (keys or uniq_key):
            return
        topic_crc = topic_prefix_crc(request.topic)
        encoded_keys = keys.encode() if keys else None
        encoded_uniq_key = uniq_key.encode() if uniq_key else None
        phys, stamp = request.commit_log_offset, request.store_timestamp
        newest = self.files[-1] if self.files else None
        if compiled_index_keys is not None and newest is not None:
            written = compiled_index_keys(
                newest.allocated_view,
                newest.slot_num,
                newest.index_num,
                topic_crc,
                encoded_keys,
                encoded_uniq_key,
                phys,
                stamp,
            )
            if written >= 0:
                newest.wrote_compiled(written)
                return
        self.add(key_hashes(topic_crc, encoded_keys, encoded_uniq_key), phys, stamp)

    def reserve(self, count: int) -> None:
        """Room with disk blocks for ``count`` more keys, made before their record is
        written: in the newest file, or a new one. Raises FileCreationError (DiskFullError
        on a full disk) with nothing written."""
        current = self.files[-1] if self.files else None
        if current is None or current.reserve(count) < count:
            self._new_file().reserve(count)

    def add(self, hashes: list[int], phys: int, stamp: int) -> None:
        """Index one record under its key hashes (``key_hashes``)."""
        current = self.files[-1] if self.files else None
        while hashes:
            try:
                if current is None or not current.reserve(len(hashes)):
                    current = self._new_file()
                    current.reserve(len(hashes))
            except OSError as exc:
                # the record is stored already; as Java's IndexService, the index
                # goes without its keys rather than failing the put
                log.error("record at %d not indexed: %s", phys, exc)
                return
            added = current.put(hashes, phys, stamp)
            hashes = hashes[added:]

    def _new_file(self) -> IndexFile:
        name = (
            time.strftime("%Y%m%d%H%M%S", time.localtime())
            + f"{time.time_ns() // 1_000_000 % 1000:03d}"
        )
        path = self.directory / name
        while path.exists() or (self.files and path.name <= self.files[-1].path.name):
            name = str(int(name) + 1)
            path = self.directory / name
        if self.files:
            self.files[-1].sync()
        index_file = IndexFile(path, self.slot_num, self.index_num)
        self.files.append(index_file)
        return index_file

    def query(self, topic: str, key: str, limit: int, begin: int, end: int) -> list[int]:
        hash_value = key_hash(topic, key)
        limit = min(limit, MAX_QUERY)
        found: list[int] = []
        for index_file in reversed(self.files):
            if len(found) >= limit:
                break
            if index_file.index_count <= 1:
                continue
            if index_file.end_timestamp < begin - 999 or index_file.begin_timestamp > end:
                continue
            for phys in index_file.query(hash_value, begin, end, limit):
                if phys not in found:  # the record re-indexed after a crash is listed twice
                    found.append(phys)
                    if len(found) >= limit:
                        break
        return found

    def delete_before(self, commit_log_min: int) -> int:
        """Delete index files whose every entry refers below the CommitLog's min offset."""
        deleted = 0
        while len(self.files) > 1 and self.files[0].end_phy_offset < commit_log_min:
            old = self.files.pop(0)
            old.close()
            os.unlink(old.path)
            deleted += 1
        return deleted

    def sync(self) -> None:
        for index_file in list(self.files):  # the event loop may roll a new file meanwhile
            index_file.sync()

    def close(self) -> None:
        for index_file in self.files:
            index_file.close()
        self.files.clear()
