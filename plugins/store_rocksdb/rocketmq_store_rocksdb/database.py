"""Opening the RocksDB that holds a store, and the RocksDB facts the store relies on.

Everything rocksdict-specific lives here; rocksdict is imported when a store opens, not
when the plugin is listed (docs/design.md rule 9).

- Each put is one WriteBatch: the record, its consume-queue entry and its index entries
  land together or not at all, so any prefix RocksDB recovers is consistent.
- The write-ahead log gets each batch with one write() (no user-space buffering): a
  killed process loses nothing the page cache holds. ``sync_wal`` makes it durable.
- Writes never wait inside RocksDB (``no_slowdown``): when RocksDB would stall them
  while flushes and compactions catch up, the write fails at once with WriteStalled.
- Recovery replays the log up to the first damaged batch (point-in-time recovery).
- On a full disk a read-write open fails (RocksDB writes a new MANIFEST at every open);
  a read-only open writes nothing, replays the write-ahead log into memory and takes no
  LOCK, so the store holds RocksDB's LOCK itself meanwhile (StoreLock).
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketmq_core.errors import ConfigError, StoreError

from .layout import COLUMN_FAMILIES, COMMITLOG, CONSUME_QUEUE, INDEX, META

MiB = 1 << 20
# memtables: records come in big, in key order; the other families are small per message
WRITE_BUFFER = {COMMITLOG: 64 * MiB, CONSUME_QUEUE: 16 * MiB, INDEX: 16 * MiB, META: 4 * MiB}
BLOCK_CACHE = 32 * MiB  # shared by every family: recent reads mostly hit the memtables
# on disk, records are compressed in blocks (LZ4: cheap on the flush and compaction threads)
BACKGROUND_JOBS = 2

log = logging.getLogger("rocketmq.store.rocksdb")


class WriteStalled(StoreError):
    """RocksDB would have held the write back while compactions catch up."""


class WriteFailed(StoreError):
    """RocksDB refused the write (a full disk, an I/O error, a closed database)."""


class NoSpaceToOpen(ConfigError):
    """RocksDB could not open the database read-write: its disk is full."""


@dataclass
class Database:
    """One opened RocksDB: the column families the store reads and writes."""

    db: Any  # rocksdict.Rdict
    log: Any  # the column families, as rocksdict.Rdict views
    queues: Any
    index: Any
    meta: Any
    handles: dict[str, Any]  # for WriteBatch puts
    write_options: Any
    _rocksdict: Any
    writable: bool = True  # False: opened read-only, every write is refused
    _path: str = ""
    # a log sync in the flusher's thread never runs into a close in another thread
    _closing: threading.Lock = field(default_factory=threading.Lock)
    _closed: bool = False

    def batch(self) -> Any:
        return self._rocksdict.WriteBatch(raw_mode=True)

    def write(self, batch: Any) -> None:
        """Apply ``batch`` atomically; WriteStalled or WriteFailed when it was not."""
        try:
            self.db.write(batch, self.write_options)
        except Exception as exc:  # rocksdict raises Exception with RocksDB's status text
            text = str(exc)
            if "stall" in text.lower() or "incomplete" in text.lower():
                raise WriteStalled(text) from exc
            raise WriteFailed(text) from exc

    def sync_wal(self) -> None:
        """Blocking: everything written so far is durable; OSError when it cannot be."""
        with self._closing:
            if self._closed:
                raise OSError(f"the RocksDB at {self.db_path} was closed before its log synced")
            try:
                self.db.flush_wal(True)
            except Exception as exc:  # the flusher logs an OSError and tries again
                raise OSError(f"RocksDB could not sync its log: {exc}") from exc

    @property
    def db_path(self) -> str:
        return self._path

    def disk_bytes(self) -> int:
        """Bytes of table files (the write-ahead log comes on top)."""
        total = 0
        for family in (self.log, self.queues, self.index, self.meta):
            total += family.property_int_value("rocksdb.total-sst-files-size") or 0
        return total

    def close(self) -> None:
        """Blocking: the log synced (when it can be), the database closed."""
        with self._closing:
            if self._closed:
                return
            self._closed = True
            try:
                if self.writable:
                    self.db.flush_wal(True)
            except Exception as exc:  # a write failed before (a full disk): nothing to sync
                log.warning("closing %s without syncing its log: %s", self._path, exc)
            try:
                self.db.close()
            except Exception as exc:  # rocksdict flushes first: that fails the same way
                log.warning("closing %s: %s", self._path, exc)
            finally:
                # RocksDB closes, and frees its LOCK, with the last reference to the
                # database, a family view or a handle
                self.db = self.log = self.queues = self.index = self.meta = None
                self.handles.clear()


def open_database(path: Path, read_only: bool = False) -> Database:
    """Blocking: open or create the store's RocksDB under ``path``; NoSpaceToOpen when
    its disk is too full for a read-write open. ``read_only``: open what is there,
    writing nothing (the caller holds the LOCK: StoreLock)."""
    import rocksdict

    cache = rocksdict.Cache(BLOCK_CACHE)
    options = rocksdict.Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    options.set_max_background_jobs(BACKGROUND_JOBS)
    options.set_wal_recovery_mode(rocksdict.DBRecoveryMode.point_in_time())
    options.set_keep_log_file_num(4)  # RocksDB's info LOG files, not the write-ahead log
    families = {name: _family_options(rocksdict, name, cache) for name in COLUMN_FAMILIES}
    access = rocksdict.AccessType.read_only() if read_only else rocksdict.AccessType.read_write()
    try:
        db = rocksdict.Rdict(str(path), options, column_families=families, access_type=access)
    except Exception as exc:
        text = str(exc)
        if "lock" in text.lower():
            raise ConfigError(
                f"the store {path} is in use by another process (RocksDB's LOCK is held)"
            ) from None
        if "No space left" in text:  # RocksDB writes a new MANIFEST at every open
            raise NoSpaceToOpen(
                f"cannot open the RocksDB store {path} for writing: its disk is full;"
                " free space there"
            ) from None
        if read_only and not (path / "CURRENT").exists():
            raise ConfigError(
                f"cannot create the RocksDB store {path}: its disk is full; free space there"
            ) from None
        raise ConfigError(f"cannot open the RocksDB store {path}: {text}") from None
    write_options = rocksdict.WriteOptions()
    write_options.no_slowdown = True
    return Database(
        db,
        db.get_column_family(COMMITLOG),
        db.get_column_family(CONSUME_QUEUE),
        db.get_column_family(INDEX),
        db.get_column_family(META),
        {name: db.get_column_family_handle(name) for name in COLUMN_FAMILIES},
        write_options,
        rocksdict,
        writable=not read_only,
        _path=str(path),
    )


class StoreLock:
    """RocksDB's LOCK file under a database, held by this process while RocksDB does not
    hold it (a read-only open takes none), so that no other process opens the store for
    writing meanwhile.

    It is the same POSIX record lock RocksDB takes, so it conflicts with another
    process's RocksDB and not with this process's: a read-write open here succeeds
    while it is held. Such locks belong to the process, not to a descriptor: RocksDB
    dropping its lock (a failed open, a close) drops this one too, hence ``hold`` again
    after each, and the descriptor stays open until ``release`` (closing any descriptor
    of the file would drop RocksDB's lock as well).
    """

    def __init__(self, path: Path) -> None:
        self.path = path / "LOCK"
        self._fd: int | None = None

    def hold(self) -> None:
        """Blocking: take the lock (again); ConfigError when another process holds it."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ConfigError(
                f"the store {self.path.parent} is in use by another process (RocksDB's LOCK is"
                " held)"
            ) from None

    def release(self) -> None:
        """Blocking: close the descriptor (after the database is closed)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _family_options(rocksdict: Any, family: str, cache: Any) -> Any:
    options = rocksdict.Options(raw_mode=True)
    options.set_write_buffer_size(WRITE_BUFFER[family])
    options.set_max_write_buffer_number(4)
    options.set_compression_type(rocksdict.DBCompressionType.lz4())
    table = rocksdict.BlockBasedOptions()
    table.set_block_cache(cache)
    if family in (CONSUME_QUEUE, INDEX):
        # point reads and short prefix scans: bloom filters spare misses a disk read
        table.set_bloom_filter(10, False)
    options.set_block_based_table_factory(table)
    return options
