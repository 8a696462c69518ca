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
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocketmq_core.errors import ConfigError

from .layout import COLUMN_FAMILIES, COMMITLOG, CONSUME_QUEUE, INDEX, META

MiB = 1 << 20
# memtables: records come in big, in key order; the other families are small per message
WRITE_BUFFER = {COMMITLOG: 64 * MiB, CONSUME_QUEUE: 16 * MiB, INDEX: 16 * MiB, META: 4 * MiB}
BLOCK_CACHE = 32 * MiB  # shared by every family: recent reads mostly hit the memtables
# on disk, records are compressed in blocks (LZ4: cheap on the flush and compaction threads)
BACKGROUND_JOBS = 2


class WriteStalled(Exception):
    """RocksDB would have held the write back while compactions catch up."""


class WriteFailed(Exception):
    """RocksDB refused the write (a full disk, an I/O error, a closed database)."""


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
        """Blocking: everything written so far is durable."""
        self.db.flush_wal(True)

    def disk_bytes(self) -> int:
        """Bytes of table files (the write-ahead log comes on top)."""
        total = 0
        for family in (self.log, self.queues, self.index, self.meta):
            total += family.property_int_value("rocksdb.total-sst-files-size") or 0
        return total

    def close(self) -> None:
        """Blocking: the log synced, the database closed."""
        self.db.flush_wal(True)
        self.db.close()
        # RocksDB's LOCK goes with the last reference to a family view or handle
        self.log = self.queues = self.index = self.meta = None
        self.handles.clear()


def open_database(path: Path) -> Database:
    """Blocking: open or create the store's RocksDB under ``path``."""
    import rocksdict

    cache = rocksdict.Cache(BLOCK_CACHE)
    options = rocksdict.Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    options.set_max_background_jobs(BACKGROUND_JOBS)
    options.set_wal_recovery_mode(rocksdict.DBRecoveryMode.point_in_time())
    options.set_keep_log_file_num(4)  # RocksDB's info LOG files, not the write-ahead log
    families = {name: _family_options(rocksdict, name, cache) for name in COLUMN_FAMILIES}
    try:
        db = rocksdict.Rdict(str(path), options, column_families=families)
    except Exception as exc:
        text = str(exc)
        if "lock" in text.lower():
            raise ConfigError(
                f"the store {path} is in use by another process (RocksDB's LOCK is held)"
            ) from None
        if "No space left" in text:  # RocksDB writes a new MANIFEST at every open
            raise ConfigError(
                f"cannot open the RocksDB store {path}: its disk is full; free space there"
                " (the mmap store starts on a full disk, RocksDB cannot)"
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
    )


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
