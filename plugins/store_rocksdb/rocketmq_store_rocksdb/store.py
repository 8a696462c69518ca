"""RocksDBStore: the MessageStore contract on one RocksDB (layout in ``layout.py``).

    <root>/db/      the RocksDB: column families commitlog, consumequeue, index, meta
    <root>/abort    exists while the store is open: found at start, the last stop was a crash

One event loop owns the store. A put builds one WriteBatch (record, consume-queue entry,
index entries) and writes it inline: RocksDB appends it to its memtables and hands it to
the write-ahead log with one write(), as the mmap store copies a record into its
mapping, and it never waits there (a stall answers OS_PAGE_CACHE_BUSY). What can block
runs in worker threads: syncing the log, reads (which may miss the cache and go to
disk), retention, opening and closing.

On a full disk RocksDB cannot open for writing (it writes a MANIFEST at every open), and
once a write fails for lack of space it takes none until reopened. Either way the store
goes on with RocksDB open read-only: reads are served, puts are refused as a full disk
is (SERVICE_NOT_AVAILABLE, Java's remark), and once the disk has room again the
database is reopened for writing, with no restart.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard, TypeVar

import anyio

from rocketmq_core.errors import ConfigError
from rocketmq_core.protocol.message import record_store_time
from rocketmq_core.store.api import (
    Dispatcher,
    DispatchRequest,
    GetResult,
    GetStatus,
    MessageToStore,
    PutResult,
    PutStatus,
    QueryResult,
    StoreClosedError,
    StoreConfig,
    TagFilter,
)
from rocketmq_core.store.flush import AsyncFlush, FlushPolicy
from rocketmq_core.store.flusher import Flusher
from rocketmq_core.store.retention import (
    DISK_CHECK_INTERVAL,
    CleanupDecision,
    DiskGuard,
    disk_full_remark,
    disk_used_percent,
)
from rocketmq_core.store.rules import (
    StoreClock,
    batch_refusal,
    dispatch_fields,
    edge_result,
    encode_record,
    enters_consume_queue,
    index_keys,
    is_rollback,
    queue_ids_by_topic,
    refusal,
    tag_matches,
    waits_for_flush,
)

from . import layout
from .database import (
    Database,
    NoSpaceToOpen,
    StoreLock,
    WriteFailed,
    WriteStalled,
    open_database,
)
from .layout import LOG_KEY, QUEUE_ENTRY, QUEUE_KEY, QUEUE_NUMBER

log = logging.getLogger("rocketmq.store.rocksdb")

T = TypeVar("T")

SCAN_LIMIT = 800  # consume-queue entries one read examines at most (as the other stores)
CLEANUP_INTERVAL = 10.0  # cleanResourceInterval
FORCED_SEGMENTS_MAX = 10  # deleteFileBatchMax: segments one forced cleanup removes
BUSY_RETRY = 0.005  # seconds between tries of a put RocksDB held back
BUSY_TIMEOUT = 1.0  # osPageCacheBusyTimeOutMills: then the put answers busy
# seconds between tries to reopen for writing while they fail: each try writes a little
REOPEN_BACKOFF_MAX = 60.0


@dataclass(slots=True)
class QueueState:
    number: int  # the queue's number in consume-queue keys
    min_offset: int
    max_offset: int  # the next offset to assign


@dataclass
class LoadedState:
    """The store's in-memory state, as read back from RocksDB."""

    queues: dict[tuple[str, int], QueueState] = field(default_factory=dict)
    next_queue_number: int = 0
    min_log_offset: int = 0
    write_offset: int = 0  # the next record's CommitLog offset
    last_record: int = -1  # offset of the newest record
    last_store_time: int = 0


class RocksDBStore:
    """The ``rocksdb`` store plugin."""

    def __init__(self, config: StoreConfig, flush_policy: FlushPolicy | None = None) -> None:
        self.config = config
        self.policy = flush_policy or AsyncFlush.from_config(config)
        self.root = Path(config.root_dir)
        self.disk = DiskGuard(config, self.root)
        self.db: Database | None = None
        self._queues: dict[tuple[str, int], QueueState] = {}
        self._next_queue_number = 0
        self._min_log_offset = 0
        self._write_offset = 0  # the next record's CommitLog offset
        self._last_record = -1  # offset of the newest record
        self._index_last = (0, 0)  # store time and offset of the newest indexed record
        self._dispatchers: list[Dispatcher] = []
        self._flusher: Flusher | None = None
        self._lifetime = AsyncExitStack()  # what open entered; close leaves it in reverse
        self._opened = False
        self._closed = False
        self._in_threads = 0  # calls running in worker threads: close waits for them
        self._threads_done: anyio.Event | None = None
        self.clock = StoreClock()
        self._puts = 0
        self.recovered_after_crash = False
        # RocksDB's LOCK, held by the store while RocksDB is open read-only (and holds none)
        self._lock = StoreLock(self.root / "db")
        # why RocksDB takes no writes now (open read-only, or a write found the disk full):
        # the remark puts are refused with; None while it takes them
        self._not_writable: str | None = None
        self._reopening: anyio.Event | None = None  # set while the database is swapped
        self._deleted_while_read_only: set[str] = set()  # written at the reopen

    # --- lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        # whatever fails here, what was entered before is left again (database closed,
        # LOCK freed); once open, the stack is the store's to leave at close
        async with AsyncExitStack() as stack:
            self.db = await anyio.to_thread.run_sync(self._open_database)
            stack.push_async_callback(self._close_database)
            await anyio.to_thread.run_sync(self._mark_open)
            self._adopt(await anyio.to_thread.run_sync(self._load, self.db))
            if not self.db.writable:
                self._refuse_writes(
                    f"The RocksDB store under {self.root} is open read-only: its disk was full"
                    " when it opened. It takes writes again, with no restart, once space is"
                    " freed there."
                )
            if self.recovered_after_crash:
                log.warning(
                    "%s was not closed cleanly: RocksDB replayed its log; the CommitLog ends at %d",
                    self.root,
                    self._write_offset,
                )
            self._flusher = Flusher(
                self.policy,
                written=lambda: self._write_offset,
                sync=self._sync_wal,
                flushed=self._write_offset,
            )
            task_group = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(task_group.cancel_scope.cancel)  # left first: the tasks end
            await task_group.start(self._flusher.run)
            task_group.start_soon(self._clean_periodically)
            task_group.start_soon(self.disk.watch)  # writes resume once space is freed
            task_group.start_soon(self._reopen_when_space)
            self._opened = True
            self._lifetime = stack.pop_all()

    def _open_database(self) -> Database:
        """Blocking: RocksDB opened for writing or, when its disk is too full for that,
        read-only with the LOCK held by the store."""
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / "db"
        try:
            return open_database(path)
        except NoSpaceToOpen as exc:
            log.error("%s; opening it read-only meanwhile: reads are served, puts refused", exc)
        try:
            self._lock.hold()
            return open_database(path, read_only=True)
        except NoSpaceToOpen:  # a store never created: there is nothing to read
            self._lock.release()
            raise ConfigError(
                f"cannot create the RocksDB store {path}: its disk is full; free space there"
            ) from None
        except BaseException:
            self._lock.release()
            raise

    def _mark_open(self) -> None:
        """Blocking: the abort marker (found: the last stop was a crash), the disk checked."""
        abort = self.root / "abort"
        self.recovered_after_crash = abort.exists()
        try:
            abort.touch()
        except OSError as exc:  # a full disk: the next open cannot tell a crash, no more
            log.warning("cannot create %s: %s", abort, exc)
        self.disk.check(time.time(), manual=False)  # a disk already full refuses puts at once

    def _load(self, db: Database) -> LoadedState:
        """Blocking: the in-memory state, from what RocksDB holds (the truth after any crash)."""
        state = LoadedState()
        minimums: dict[int, int] = {}
        names: dict[int, tuple[str, int]] = {}
        for key, value in db.meta.items():
            try:
                prefix, (number,) = key[:1], QUEUE_NUMBER.unpack_from(key, 1)
                if prefix == layout.QUEUE_NAME_PREFIX:
                    names[number] = layout.parse_queue_name(value)
                elif prefix == layout.QUEUE_MIN_PREFIX:
                    minimums[number] = layout.MIN_OFFSET.unpack(value)[0]
            except (struct.error, UnicodeDecodeError) as exc:
                raise ConfigError(
                    f"the RocksDB store {self.root / 'db'} holds a meta entry it cannot read"
                    f" ({key!r}: {exc}); restore the store from a copy or move it aside"
                ) from None
        for number, place in names.items():
            first, last = self._queue_bounds(db, number)
            floor = minimums.get(number, 0)
            low = first if first is not None else floor
            high = last + 1 if last is not None else floor
            state.queues[place] = QueueState(number, max(low, floor), max(high, floor))
        state.next_queue_number = max(names, default=-1) + 1
        iterator = db.log.iter()
        iterator.seek_to_last()
        if iterator.valid():
            state.last_record = LOG_KEY.unpack(iterator.key())[0]
            record = iterator.value()
            state.write_offset = state.last_record + len(record)
            state.last_store_time = record_store_time(record)
            iterator.seek_to_first()
            state.min_log_offset = LOG_KEY.unpack(iterator.key())[0]
        return state

    def _adopt(self, state: LoadedState) -> None:
        """Take ``state`` as the store's: the write path goes on from it."""
        self._queues = state.queues
        self._next_queue_number = state.next_queue_number
        self._min_log_offset = state.min_log_offset
        self._write_offset = state.write_offset
        self._last_record = state.last_record
        self.clock.last = max(self.clock.last, state.last_store_time)
        if state.last_record >= 0:
            self._index_last = (state.last_store_time, state.last_record)

    @staticmethod
    def _queue_bounds(db: Database, number: int) -> tuple[int | None, int | None]:
        """Blocking: first and last offset with an entry in queue ``number``."""
        iterator = db.queues.iter()
        iterator.seek(QUEUE_KEY.pack(number, 0))
        if not iterator.valid():
            return None, None
        found, first = QUEUE_KEY.unpack(iterator.key())
        if found != number:
            return None, None
        iterator.seek_for_prev(QUEUE_KEY.pack(number, 2**64 - 1))
        return first, QUEUE_KEY.unpack(iterator.key())[1]

    async def close(self) -> None:
        if self._closed or not self._opened:
            self._closed = True
            return
        self._closed = True  # from here every call refuses
        await self._lifetime.aclose()

    async def _close_database(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._threads_idle()
            await anyio.to_thread.run_sync(self._close_database_files)

    def _close_database_files(self) -> None:
        """Blocking: the database closed, the LOCK freed; the abort marker goes unless this
        is a failed open of a store that had crashed (the next open should say so)."""
        try:
            if self.db is not None:
                self.db.close()
        finally:
            self._lock.release()
        if self._opened or not self.recovered_after_crash:
            (self.root / "abort").unlink(missing_ok=True)
        fd = os.open(self.root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # --- a full disk: read-only, then writable again ---------------------------------------

    def _refuse_writes(self, why: str) -> None:
        """From now on puts are refused with Java's disk-full remark and ``why``, until the
        database is reopened for writing."""
        used = disk_used_percent(self.root)  # one statfs, when the store stops writing
        self._not_writable = f"{disk_full_remark(used)} {why}"

    def _writes_refused(self) -> PutResult | None:
        if self._not_writable is None:
            return None
        return PutResult.refused(PutStatus.SERVICE_NOT_AVAILABLE, self._not_writable)

    async def _reopen_when_space(self) -> None:
        """While RocksDB takes no writes, reopen it for writing once the disk is below
        diskSpaceWarningLevelRatio (DiskGuard's verdict), less often while that fails."""
        delay = DISK_CHECK_INTERVAL
        while True:
            await anyio.sleep(delay)
            if self._not_writable is None or self.disk.refusing is not None:
                delay = DISK_CHECK_INTERVAL
                continue
            writable = await self._reopen()
            delay = DISK_CHECK_INTERVAL if writable else min(delay * 2, REOPEN_BACKOFF_MAX)

    async def _reopen(self) -> bool:
        """Swap the database for one open for writing, and the state for what it holds;
        calls in worker threads wait meanwhile. True when it took."""
        with anyio.CancelScope(shield=True):  # never left half swapped
            self._reopening = anyio.Event()
            assert self._flusher is not None
            try:
                # the flusher's WAL sync is on the database too, in a thread of its own
                async with self._flusher.paused():
                    await self._threads_idle()
                    state = await anyio.to_thread.run_sync(self._reopen_database)
            finally:
                self._reopening.set()
                self._reopening = None
            if state is None:
                return False
            if state.write_offset != self._write_offset:
                log.warning(
                    "RocksDB reopened with its CommitLog ending at %d (it ended at %d)",
                    state.write_offset,
                    self._write_offset,
                )
            self._adopt(state)
            self._not_writable = None
            log.warning("%s: RocksDB is open for writing again; puts are taken", self.root)
            return True
        return False  # not reached: nothing cancels the shielded scope itself

    def _reopen_database(self) -> LoadedState | None:
        """Blocking: ``self.db`` reopened for writing, and what it holds; None when the disk
        is still too full (``self.db`` is then a read-only one)."""
        old = self.db
        assert old is not None
        path = self.root / "db"
        if old.writable:  # a write failed: RocksDB takes no more until it is reopened
            old.close()
            old = None
        try:
            db = open_database(path)
        except Exception as exc:  # still full, or any other failure: read-only, retried later
            if isinstance(exc, NoSpaceToOpen):
                log.warning("%s; staying read-only", exc)
            else:
                log.error("reopening %s for writing failed: %s; staying read-only", path, exc)
            if old is None:
                self.db = open_database(path, read_only=True)
            self._lock.hold()  # RocksDB's failed open dropped it
            return None
        if old is not None:
            old.close()  # the read-only one: RocksDB holds the LOCK now
        self.db = db
        try:
            (self.root / "abort").touch()  # when the full disk refused it at the open
        except OSError as exc:
            log.warning("cannot create %s: %s", self.root / "abort", exc)
        state = self._load(db)
        # topics deleted meanwhile (delete_topic waits while this runs)
        doomed = {place for place in state.queues if place[0] in self._deleted_while_read_only}
        if doomed:
            try:
                db.write(self._deletion_batch(db, [state.queues[place] for place in doomed]))
            except WriteFailed as exc:
                log.error("topics deleted while read-only stay in RocksDB: %s", exc)
            for place in doomed:
                del state.queues[place]
        self._deleted_while_read_only.clear()
        return state

    def _sync_wal(self, _upto: int) -> None:
        """The flusher's sync, on the database open now (a reopen swaps it)."""
        db = self.db
        assert db is not None  # the flusher runs only while the store is open
        db.sync_wal()

    def add_dispatcher(self, dispatcher: Dispatcher) -> None:
        self._dispatchers.append(dispatcher)

    async def _threads_idle(self) -> None:
        """Wait until no call runs in a worker thread."""
        while self._in_threads:
            self._threads_done = anyio.Event()
            await self._threads_done.wait()

    def _check_open(self) -> Database:
        if self._closed or not self._opened:
            state = "closed" if self._closed else "not open"
            raise StoreClosedError(f"the store {self.root} is {state}")
        assert self.db is not None
        return self.db

    async def _in_thread(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in a worker thread; the database stays open until it ends
        (``function`` takes ``self.db`` there: a reopen may have swapped it meanwhile)."""
        while self._reopening is not None:
            await self._reopening.wait()
        self._check_open()
        self._in_threads += 1
        try:
            return await anyio.to_thread.run_sync(function, *args)
        finally:
            self._in_threads -= 1
            if not self._in_threads and self._threads_done is not None:
                self._threads_done.set()

    # --- writing ---------------------------------------------------------------------------

    async def put(self, message: MessageToStore) -> PutResult:
        result = await self._until_not_busy(self.append, message)
        return await self.wait_durable(result) if result.flush_to >= 0 else result

    async def put_batch(self, messages: Sequence[MessageToStore]) -> PutResult:
        result = await self._until_not_busy(self.append_batch, messages)
        return await self.wait_durable(result) if result.flush_to >= 0 else result

    async def _until_not_busy(self, append: Callable[[Any], PutResult], what: Any) -> PutResult:
        """``append(what)`` again while RocksDB holds writes back, for up to BUSY_TIMEOUT."""
        result = append(what)
        if result.status is not PutStatus.OS_PAGE_CACHE_BUSY:
            return result  # the common case: no clock read
        deadline = time.monotonic() + BUSY_TIMEOUT
        while result.status is PutStatus.OS_PAGE_CACHE_BUSY and time.monotonic() < deadline:
            await anyio.sleep(BUSY_RETRY)
            result = append(what)
        return result

    async def wait_durable(self, result: PutResult) -> PutResult:
        if result.flush_to < 0:
            return result
        assert self._flusher is not None
        return await self._flusher.settle(result)

    def when_durable(self, result: PutResult, settled: Callable[[PutResult], None]) -> bool:
        """SupportsDurableCallback: the flusher's group commit, without a task waiting."""
        if result.flush_to < 0:
            return True
        assert self._flusher is not None
        return self._flusher.when_settled(result, settled)

    def append(self, message: MessageToStore) -> PutResult:
        self._check_open()
        refused = refusal(message, self.config) or self.disk.refusal() or self._writes_refused()
        if refused is not None:
            return refused
        return self._write((message,))

    def append_batch(self, messages: Sequence[MessageToStore]) -> PutResult:
        self._check_open()
        refused = (
            batch_refusal(messages, self.config) or self.disk.refusal() or self._writes_refused()
        )
        if refused is not None:
            return refused
        return self._write(messages)

    def _write(self, messages: Sequence[MessageToStore]) -> PutResult:
        """Messages of one queue in one WriteBatch; the store's state moves on only once
        RocksDB took it, and dispatchers hear of the records after that."""
        db = self.db
        assert db is not None
        first = messages[0]
        place = (first.topic, first.queue_id)
        queue = self._queues.get(place)
        number = queue.number if queue is not None else self._next_queue_number
        next_queue_offset = queue.max_offset if queue is not None else 0
        new_queue = False  # numbered by this batch: a queue starts with its first entry
        store_time = self.clock.now()
        offset = self._write_offset
        batch = db.batch()
        requests = []
        for message in messages:
            queue_offset = 0  # prepared and rolled-back records: in no queue, offset 0
            in_queue = enters_consume_queue(message.sys_flag)
            if in_queue:
                queue_offset = next_queue_offset
                next_queue_offset += 1
                if queue is None and not new_queue:
                    new_queue = True
                    batch.put(
                        layout.queue_name_key(number),
                        layout.queue_name(*place),
                        db.handles[layout.META],
                    )
            record, sys_flag = encode_record(
                message, queue_offset, offset, store_time, self.config.store_host
            )
            code, keys, uniq_key = dispatch_fields(message)
            request = DispatchRequest(
                message.topic,
                message.queue_id,
                offset,
                len(record),
                code,
                store_time,
                queue_offset,
                keys,
                uniq_key,
                sys_flag,
                message.prepared_transaction_offset,
            )
            self._stage(batch, request, record, number if in_queue else None)
            requests.append(request)
            offset += len(record)
        try:
            db.write(batch)
        except WriteStalled:
            return PutResult.refused(
                PutStatus.OS_PAGE_CACHE_BUSY,
                "RocksDB is holding writes back while its compactions catch up; retry shortly",
            )
        except WriteFailed as exc:
            return self._write_failure(exc)
        # written: from here on the state follows, and nothing can fail
        if new_queue:
            self._queues[place] = queue = QueueState(number, 0, 0)
            self._next_queue_number += 1
        if queue is not None:
            queue.max_offset = next_queue_offset
        last = requests[-1]
        if self.config.message_index_enable and not is_rollback(last.sys_flag):
            self._index_last = (store_time, last.commit_log_offset)
        self._last_record = last.commit_log_offset
        self._write_offset = offset
        self._puts += len(requests)
        for request in requests:
            for dispatcher in self._dispatchers:
                dispatcher(request)
        return PutResult.written(
            [request.commit_log_offset for request in requests],
            requests[0].queue_offset,
            store_time,
            self.config.store_host,
            offset if self.policy.waits and waits_for_flush(first) else -1,
        )

    def _stage(
        self, batch: Any, request: DispatchRequest, record: bytearray, number: int | None
    ) -> None:
        """Put ``request``'s record, consume-queue entry (``number``: its queue's, None:
        in no queue) and index entries into ``batch``."""
        db = self.db
        assert db is not None
        handles = db.handles
        batch.put(LOG_KEY.pack(request.commit_log_offset), bytes(record), handles[layout.COMMITLOG])
        if number is not None:
            entry = QUEUE_ENTRY.pack(
                request.commit_log_offset, request.size, request.tags_code, request.store_timestamp
            )
            batch.put(
                QUEUE_KEY.pack(number, request.queue_offset), entry, handles[layout.CONSUME_QUEUE]
            )
        if self.config.message_index_enable and not is_rollback(request.sys_flag):
            for key in index_keys(request.keys, request.uniq_key):
                if layout.fits_index(key):
                    prefix = layout.index_prefix(request.topic, key)
                    entry = layout.index_key(
                        prefix, request.store_timestamp, request.commit_log_offset
                    )
                    batch.put(entry, b"", handles[layout.INDEX])

    def _write_failure(self, error: WriteFailed) -> PutResult:
        text = str(error)
        log.error("RocksDB refused a write: %s", text)
        if "no space" in text.lower():
            # RocksDB takes no write after this one until it is reopened (measured)
            self._refuse_writes(
                f"RocksDB under {self.root} stopped taking writes when its disk filled. It takes"
                " them again, with no restart, once space is freed there."
            )
            return PutResult.refused(
                PutStatus.CREATE_MAPPED_FILE_FAILED,
                f"{text}: free disk space under {self.root}",
            )
        return PutResult.refused(PutStatus.UNKNOWN_ERROR, f"RocksDB refused the write: {text}")

    # --- reading ---------------------------------------------------------------------------

    async def get(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        tags: TagFilter = None,
        max_bytes: int = 256 * 1024,
    ) -> GetResult:
        self._check_open()
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
        edge = edge_result(offset, queue.min_offset, queue.max_offset)
        if edge is not None:
            return edge
        result = GetResult(GetStatus.NO_MATCHED_MESSAGE, offset, queue.min_offset, queue.max_offset)
        await self._in_thread(self._read_queue, queue.number, result, max_count, tags, max_bytes)
        if result.records:
            result.status = GetStatus.FOUND
        return result

    def _read_queue(
        self, number: int, result: GetResult, max_count: int, tags: TagFilter, max_bytes: int
    ) -> None:
        """Blocking: fill ``result`` from ``result.next_begin_offset`` up to its max offset."""
        db = self.db
        assert db is not None
        start = result.next_begin_offset
        # no iterate_upper_bound: rocksdict keeps a pointer to the bound, not a copy
        end = QUEUE_KEY.pack(number, result.max_offset)
        iterator = db.queues.iter()
        iterator.seek(QUEUE_KEY.pack(number, start))
        wanted: list[tuple[int, bytes]] = []  # queue offset, record key
        total = 0
        scanned = 0
        limit = max(SCAN_LIMIT, max_count)
        while scanned < limit and iterator.valid():
            key = iterator.key()
            if key >= end:
                break
            queue_offset = QUEUE_KEY.unpack(key)[1]
            phys, size, code, _stored = QUEUE_ENTRY.unpack(iterator.value())
            result.last_examined_position = phys
            scanned += 1
            if tag_matches(tags, code):
                if wanted and total + size > max_bytes:
                    break
                wanted.append((queue_offset, LOG_KEY.pack(phys)))
                total += size
            result.next_begin_offset = queue_offset + 1
            if len(wanted) >= max_count:
                break
            iterator.next()
        if not wanted:
            return
        records = db.log.get([key for _offset, key in wanted])
        for (queue_offset, _key), record in zip(wanted, records, strict=True):
            if record is not None:  # None: removed by retention meanwhile
                result.records.append(record)
                result.queue_offsets.append(queue_offset)

    def min_offset(self, topic: str, queue_id: int) -> int:
        queue = self._queues.get((topic, queue_id))
        return queue.min_offset if queue is not None else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        queue = self._queues.get((topic, queue_id))
        return queue.max_offset if queue is not None else 0

    def queues(self) -> dict[str, list[int]]:
        return queue_ids_by_topic(self._queues)

    def _entry(self, number: int, queue_offset: int) -> tuple[int, int, int, int] | None:
        """Blocking: (offset, size, tags code, store time) of one consume-queue entry."""
        assert self.db is not None
        value = self.db.queues.get(QUEUE_KEY.pack(number, queue_offset))
        return QUEUE_ENTRY.unpack(value) if value is not None else None

    async def offset_by_time(
        self, topic: str, queue_id: int, timestamp: int, boundary: str = "lower"
    ) -> int:
        self._check_open()
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            return 0
        low, high = queue.min_offset, queue.max_offset
        if low >= high:
            return low
        return await self._in_thread(
            self._search_time, queue.number, low, high, timestamp, boundary
        )

    def _search_time(self, number: int, low: int, high: int, timestamp: int, boundary: str) -> int:
        """Blocking: bisect the queue's entries by store time."""

        def stored(queue_offset: int) -> int:
            entry = self._entry(number, queue_offset)
            return entry[3] if entry is not None else -1  # gone: older than anything kept

        offsets = range(low, high)
        if boundary == "upper":  # the last stored at or before ``timestamp``
            return low + max(bisect.bisect_right(offsets, timestamp, key=stored) - 1, 0)
        return low + bisect.bisect_left(offsets, timestamp, key=stored)

    async def earliest_store_time(self, topic: str, queue_id: int) -> int:
        self._check_open()
        queue = self._queues.get((topic, queue_id))
        if queue is None or queue.max_offset <= queue.min_offset:
            return -1
        entry = await self._in_thread(self._entry, queue.number, queue.min_offset)
        return entry[3] if entry is not None else -1

    async def message_at(self, commit_log_offset: int) -> bytes | None:
        self._check_open()
        if not 0 <= commit_log_offset < 2**63:
            return None
        return await self._in_thread(self._record_at, LOG_KEY.pack(commit_log_offset))

    def _record_at(self, key: bytes) -> bytes | None:
        assert self.db is not None
        return self.db.log.get(key)

    async def query_by_key(
        self, topic: str, key: str, max_count: int, begin: int, end: int
    ) -> QueryResult:
        self._check_open()
        last_time, last_offset = self._index_last
        result = QueryResult(
            index_last_update_timestamp=last_time, index_last_update_phy_offset=last_offset
        )
        if layout.fits_index(key) and max_count > 0:
            result.records = await self._in_thread(
                self._query_index, layout.index_prefix(topic, key), max_count, begin, end
            )
        return result

    def _query_index(
        self, prefix: bytes, max_count: int, begin: int, end: int
    ) -> list[bytes | memoryview]:
        """Blocking: records indexed under ``prefix`` stored in [begin, end], newest first."""
        db = self.db
        assert db is not None
        low = layout.index_key(prefix, max(begin, 0), 0)
        iterator = db.index.iter()
        iterator.seek_for_prev(layout.index_key(prefix, min(max(end, 0), 2**64 - 1), 2**64 - 1))
        keys: list[bytes] = []
        while iterator.valid() and len(keys) < max_count:
            entry = iterator.key()
            if entry < low or not entry.startswith(prefix):
                break
            keys.append(LOG_KEY.pack(layout.index_entry_offset(entry)))
            iterator.prev()
        return [record for record in db.log.get(keys) if record is not None] if keys else []

    # --- durability, retention, counters ---------------------------------------------------

    async def flush(self) -> None:
        """Everything appended so far on disk (the write-ahead log synced)."""
        self._check_open()
        assert self._flusher is not None
        await self._flusher.flush()

    async def _clean_periodically(self) -> None:
        # the first cleanup waits an interval: it never races a freshly opened store
        while True:
            await anyio.sleep(CLEANUP_INTERVAL)
            try:
                await self._delete_expired(time.time(), manual=False)
            except (OSError, WriteFailed) as exc:
                log.error("retention cleanup failed: %s", exc)

    async def delete_expired(self, now: float | None = None, force: bool = False) -> int:
        self._check_open()
        return await self._delete_expired(time.time() if now is None else now, manual=force)

    async def _delete_expired(self, now: float, manual: bool) -> int:
        decision = await self._in_thread(self.disk.check, now, manual)
        if not (decision.delete_expired or decision.forcibly) or self._not_writable is not None:
            return 0  # nothing expired, or RocksDB takes no writes (a delete is one)
        by_number = {queue.number: queue for queue in self._queues.values()}
        bounds = {number: (q.min_offset, q.max_offset) for number, q in by_number.items()}
        deleted, floor, minimums = await self._in_thread(
            self._delete_segments, now, decision, bounds
        )
        if deleted:
            self._min_log_offset = floor
            for number, low in minimums.items():  # a queue deleted meanwhile: no harm
                queue = by_number[number]
                queue.min_offset = max(queue.min_offset, low)
            log.info(
                "deleted %d expired CommitLog segments; the log now starts at %d", deleted, floor
            )
        return deleted

    def _delete_segments(
        self, now: float, decision: CleanupDecision, bounds: dict[int, tuple[int, int]]
    ) -> tuple[int, int, dict[int, int]]:
        """Blocking: drop the oldest expired segments of the log (never the one holding the
        newest record), with the consume-queue and index entries that point into them.
        Returns (segments deleted, the log's new first offset, raised queue minimums)."""
        db = self.db
        assert db is not None
        size = self.config.commit_log_file_size
        reserved_ms = self.config.file_reserved_time * 3_600_000
        segment = self._min_log_offset // size
        newest = max(self._last_record, 0) // size
        deleted = 0
        iterator = db.log.iter()
        while segment < newest:
            iterator.seek_for_prev(LOG_KEY.pack((segment + 1) * size - 1))
            if iterator.valid() and LOG_KEY.unpack(iterator.key())[0] >= segment * size:
                last_written = record_store_time(iterator.value())
                if not decision.forcibly and now * 1000 - last_written <= reserved_ms:
                    break
            segment += 1
            deleted += 1
            if decision.forcibly and deleted >= FORCED_SEGMENTS_MAX:
                break
        if not deleted:
            return 0, self._min_log_offset, {}
        cut = segment * size
        iterator.seek(LOG_KEY.pack(cut))
        floor = LOG_KEY.unpack(iterator.key())[0] if iterator.valid() else self._write_offset
        batch = db.batch()
        batch.delete_range(LOG_KEY.pack(0), LOG_KEY.pack(cut), db.handles[layout.COMMITLOG])
        minimums = {}
        for number, (low, high) in bounds.items():
            new_low = self._first_kept(number, low, high, floor)
            if new_low > low:
                minimums[number] = new_low
                batch.delete_range(
                    QUEUE_KEY.pack(number, 0),
                    QUEUE_KEY.pack(number, new_low),
                    db.handles[layout.CONSUME_QUEUE],
                )
                batch.put(
                    layout.queue_min_key(number),
                    layout.MIN_OFFSET.pack(new_low),
                    db.handles[layout.META],
                )
        db.write(batch)
        # the space comes back when the range is compacted away, not at the delete
        db.log.compact_range(None, LOG_KEY.pack(cut))
        self._drop_index_below(floor)
        return deleted, floor, minimums

    def _first_kept(self, number: int, low: int, high: int, floor: int) -> int:
        """Blocking: the first queue offset in [low, high) whose record is at or past
        ``floor`` (entries are in log order), ``high`` if none is."""

        def kept(queue_offset: int) -> bool:
            entry = self._entry(number, queue_offset)
            return entry is not None and entry[0] >= floor

        return low + bisect.bisect_left(range(low, high), True, key=kept)

    def _drop_index_below(self, floor: int) -> None:
        """Blocking: index entries of records before ``floor`` go (a scan of the index:
        retention runs rarely, and its keys are not in log order)."""
        db = self.db
        assert db is not None
        batch, pending = db.batch(), 0
        for key in db.index.keys():  # noqa: SIM118 (iterating an Rdict yields its items)
            if layout.index_entry_offset(key) < floor:
                batch.delete(key, db.handles[layout.INDEX])
                pending += 1
                if pending >= 10_000:
                    db.write(batch)
                    batch, pending = db.batch(), 0
        if pending:
            db.write(batch)

    async def delete_topic(self, topic: str) -> None:
        self._check_open()
        while self._reopening is not None:  # a reopen writes the deletions pending
            await self._reopening.wait()
        doomed = {place: queue for place, queue in self._queues.items() if place[0] == topic}
        if not doomed:
            return
        if self._not_writable is not None:  # forgotten now, removed from RocksDB at the reopen
            self._deleted_while_read_only.add(topic)
        else:
            await self._in_thread(self._delete_queues, list(doomed.values()))
        for place in doomed:
            self._queues.pop(place, None)

    def _delete_queues(self, queues: list[QueueState]) -> None:
        """Blocking: the entries, names and minimums of ``queues`` deleted."""
        assert self.db is not None
        self.db.write(self._deletion_batch(self.db, queues))

    @staticmethod
    def _deletion_batch(db: Database, queues: list[QueueState]) -> Any:
        batch = db.batch()
        for queue in queues:
            batch.delete_range(
                QUEUE_KEY.pack(queue.number, 0),
                QUEUE_KEY.pack(queue.number + 1, 0),
                db.handles[layout.CONSUME_QUEUE],
            )
            batch.delete(layout.queue_name_key(queue.number), db.handles[layout.META])
            batch.delete(layout.queue_min_key(queue.number), db.handles[layout.META])
        return batch

    @property
    def min_commit_log_offset(self) -> int:
        return self._min_log_offset

    @property
    def max_commit_log_offset(self) -> int:
        return self._write_offset

    def stats(self) -> dict[str, Any]:
        flusher = self._flusher
        db = self.db
        return {
            "store": "rocksdb",
            "root": str(self.root),
            "puts": self._puts,
            "messages": sum(q.max_offset - q.min_offset for q in self._queues.values()),
            "commit_log_min_offset": self._min_log_offset,
            "commit_log_max_offset": self._write_offset,
            "flushed_offset": flusher.flushed if flusher else 0,
            "flushes": flusher.flushes if flusher else 0,
            "topics": len({topic for topic, _ in self._queues}),
            "queues": len(self._queues),
            # not while a reopen swaps the database in a worker thread
            "table_file_bytes": db.disk_bytes() if self._readable(db) else 0,
            "recovered_after_crash": self.recovered_after_crash,
            "refusing_writes": self.disk.refusing or self._not_writable,
            "read_only": db is not None and not db.writable,
        }

    def _readable(self, db: Database | None) -> TypeGuard[Database]:
        return db is not None and self._opened and not self._closed and self._reopening is None
