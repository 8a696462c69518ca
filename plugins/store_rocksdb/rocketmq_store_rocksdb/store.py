"""RocksDBStore: the MessageStore contract on one RocksDB (layout in ``layout.py``).

    <root>/db/      the RocksDB: column families commitlog, consumequeue, index, meta
    <root>/abort    exists while the store is open: found at start, the last stop was a crash

One event loop owns the store. A put builds one WriteBatch (record, consume-queue entry,
index entries) and writes it inline: RocksDB appends it to its memtables and hands it to
the write-ahead log with one write(), as the mmap store copies a record into its
mapping, and it never waits there (a stall answers OS_PAGE_CACHE_BUSY). What can block
runs in worker threads: syncing the log, reads (which may miss the cache and go to
disk), retention, opening and closing.
"""

from __future__ import annotations

import bisect
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
from anyio.abc import TaskGroup

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
from rocketmq_core.store.common import (
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
from rocketmq_core.store.flush import AsyncFlush, FlushPolicy
from rocketmq_core.store.flusher import Flusher
from rocketmq_core.store.retention import CleanupDecision, DiskGuard

from . import layout
from .database import Database, WriteFailed, WriteStalled, open_database
from .layout import LOG_KEY, QUEUE_ENTRY, QUEUE_KEY, QUEUE_NUMBER

log = logging.getLogger("rocketmq.store.rocksdb")

T = TypeVar("T")

SCAN_LIMIT = 800  # consume-queue entries one read examines at most (as the other stores)
CLEANUP_INTERVAL = 10.0  # cleanResourceInterval
FORCED_SEGMENTS_MAX = 10  # deleteFileBatchMax: segments one forced cleanup removes
BUSY_RETRY = 0.005  # seconds between tries of a put RocksDB held back
BUSY_TIMEOUT = 1.0  # osPageCacheBusyTimeOutMills: then the put answers busy


@dataclass(slots=True)
class QueueState:
    number: int  # the queue's number in consume-queue keys
    min_offset: int
    max_offset: int  # the next offset to assign


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
        self._task_group: TaskGroup | None = None
        self._opened = False
        self._closed = False
        self._in_threads = 0  # calls running in worker threads: close waits for them
        self._threads_done: anyio.Event | None = None
        self.clock = StoreClock()
        self._puts = 0
        self.recovered_after_crash = False

    # --- lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        await anyio.to_thread.run_sync(self._open_database)
        assert self.db is not None
        self._flusher = Flusher(
            self.policy,
            written=lambda: self._write_offset,
            sync=lambda _upto: self.db.sync_wal(),
            flushed=self._write_offset,
        )
        self._opened = True
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        await self._task_group.start(self._flusher.run)
        self._task_group.start_soon(self._clean_periodically)
        self._task_group.start_soon(self.disk.watch)  # writes resume once space is freed

    def _open_database(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.db = open_database(self.root / "db")
        abort = self.root / "abort"
        self.recovered_after_crash = abort.exists()
        abort.touch()
        self._load()
        self.disk.check(time.time(), manual=False)  # a disk already full refuses puts at once
        if self.recovered_after_crash:
            log.warning(
                "%s was not closed cleanly: RocksDB replayed its log; the CommitLog ends at %d",
                self.root,
                self._write_offset,
            )

    def _load(self) -> None:
        """The in-memory state, from what RocksDB holds (the truth after any crash)."""
        db = self.db
        assert db is not None
        minimums: dict[int, int] = {}
        names: dict[int, tuple[str, int]] = {}
        for key, value in db.meta.items():
            prefix, (number,) = key[:1], QUEUE_NUMBER.unpack_from(key, 1)
            if prefix == layout.QUEUE_NAME_PREFIX:
                names[number] = layout.parse_queue_name(value)
            elif prefix == layout.QUEUE_MIN_PREFIX:
                minimums[number] = layout.MIN_OFFSET.unpack(value)[0]
        for number, place in names.items():
            first, last = self._queue_bounds(number)
            floor = minimums.get(number, 0)
            low = first if first is not None else floor
            high = last + 1 if last is not None else floor
            self._queues[place] = QueueState(number, max(low, floor), max(high, floor))
        self._next_queue_number = max(names, default=-1) + 1
        iterator = db.log.iter()
        iterator.seek_to_last()
        if iterator.valid():
            self._last_record = LOG_KEY.unpack(iterator.key())[0]
            record = iterator.value()
            self._write_offset = self._last_record + len(record)
            self.clock.last = record_store_time(record)
            self._index_last = (self.clock.last, self._last_record)
            iterator.seek_to_first()
            self._min_log_offset = LOG_KEY.unpack(iterator.key())[0]

    def _queue_bounds(self, number: int) -> tuple[int | None, int | None]:
        """First and last offset with an entry in queue ``number``."""
        db = self.db
        assert db is not None
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
        if self._task_group is not None:
            self._task_group.cancel_scope.cancel()
            await self._task_group.__aexit__(None, None, None)
            self._task_group = None
        with anyio.CancelScope(shield=True):
            if self._in_threads:
                self._threads_done = anyio.Event()
                await self._threads_done.wait()
            await anyio.to_thread.run_sync(self._close_database)

    def _close_database(self) -> None:
        assert self.db is not None
        self.db.close()
        (self.root / "abort").unlink(missing_ok=True)
        fd = os.open(self.root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def add_dispatcher(self, dispatcher: Dispatcher) -> None:
        self._dispatchers.append(dispatcher)

    def _check_open(self) -> Database:
        if self._closed or not self._opened:
            state = "closed" if self._closed else "not open"
            raise StoreClosedError(f"the store {self.root} is {state}")
        assert self.db is not None
        return self.db

    async def _in_thread(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in a worker thread; the database stays open until it ends."""
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

    def append(self, message: MessageToStore) -> PutResult:
        self._check_open()
        refused = refusal(message, self.config) or self.disk.refusal()
        if refused is not None:
            return refused
        return self._write((message,))

    def append_batch(self, messages: Sequence[MessageToStore]) -> PutResult:
        self._check_open()
        refused = batch_refusal(messages, self.config) or self.disk.refusal()
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
            return PutResult(
                PutStatus.OS_PAGE_CACHE_BUSY,
                remark="RocksDB is holding writes back while its compactions catch up;"
                " retry shortly",
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
        head = requests[0]
        result = PutResult(
            PutStatus.PUT_OK,
            head.commit_log_offset,
            head.queue_offset,
            [request.commit_log_offset for request in requests],
            store_time,
            "",
            self.config.store_host,
        )
        if self.policy.waits and waits_for_flush(first):
            result.flush_to = offset
        return result

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
            return PutResult(
                PutStatus.CREATE_MAPPED_FILE_FAILED,
                remark=f"{text}: free disk space under {self.root}",
            )
        return PutResult(PutStatus.UNKNOWN_ERROR, remark=f"RocksDB refused the write: {text}")

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
        db = self._check_open()
        if not 0 <= commit_log_offset < 2**63:
            return None
        return await self._in_thread(db.log.get, LOG_KEY.pack(commit_log_offset))

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

    def _query_index(self, prefix: bytes, max_count: int, begin: int, end: int) -> list[bytes]:
        """Blocking: records indexed under ``prefix`` stored in [begin, end], newest first."""
        db = self.db
        assert db is not None
        low = layout.index_key(prefix, max(begin, 0), 0)
        iterator = db.index.iter()
        iterator.seek_for_prev(layout.index_key(prefix, min(max(end, 0), 2**64 - 1), 2**64 - 1))
        keys = []
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
        if not (decision.delete_expired or decision.forcibly):
            return 0
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
        db = self._check_open()
        doomed = {place: queue for place, queue in self._queues.items() if place[0] == topic}
        if not doomed:
            return
        batch = db.batch()
        for queue in doomed.values():
            batch.delete_range(
                QUEUE_KEY.pack(queue.number, 0),
                QUEUE_KEY.pack(queue.number + 1, 0),
                db.handles[layout.CONSUME_QUEUE],
            )
            batch.delete(layout.queue_name_key(queue.number), db.handles[layout.META])
            batch.delete(layout.queue_min_key(queue.number), db.handles[layout.META])
        await self._in_thread(db.write, batch)
        for place in doomed:
            self._queues.pop(place, None)

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
            "table_file_bytes": db.disk_bytes() if db is not None and not self._closed else 0,
            "recovered_after_crash": self.recovered_after_crash,
            "refusing_writes": self.disk.refusing,
        }
