"""MmapStore: the MessageStore on RocketMQ's on-disk layout (STORE.md §1).

    <root>/commitlog/<20-digit offset>          records of every topic
    <root>/consumequeue/<topic>/<queue>/<...>   20-byte entries per queue offset
    <root>/index/<yyyyMMddHHmmssSSS>            key index
    <root>/checkpoint, abort, lock, config/
    <root>/queue_ends                           each queue's ends at the last clean stop

One event loop owns the store. Appends and dispatch run inline in ``put`` (no reput
thread: a message is in its consume queue when ``put`` returns); fdatasync, file
creation, pre-touching and deletion run in worker threads from background tasks.
"""

from __future__ import annotations

import bisect
import errno
import fcntl
import functools
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from rocketmq_core.background import run_in_background
from rocketmq_core.errors import ConfigError
from rocketmq_core.protocol.message import TRANSACTION_PREPARED, tags_code_of
from rocketmq_core.store.api import (
    Dispatcher,
    DispatchRequest,
    GetResult,
    GetStatus,
    ImmediateGet,
    MessageToStore,
    PutResult,
    PutStatus,
    QueryResult,
    QueueFilter,
    StoreClosedError,
    StoreConfig,
    TagFilter,
)
from rocketmq_core.store.flush import AsyncFlush, FlushPolicy
from rocketmq_core.store.flusher import Flusher
from rocketmq_core.store.retention import DiskGuard
from rocketmq_core.store.rules import (
    StoreClock,
    batch_refusal,
    decode_dispatch_fields,
    edge_result,
    enters_consume_queue,
    is_rollback,
    queue_ids_by_topic,
    raw_dispatch_fields,
    refusal,
    tag_matches,
    waits_for_flush,
)

from . import queue_ends, retention
from .checkpoint import Checkpoint
from .commitlog import WRITER_TOUCH_LEAD, WRITER_TOUCH_STEP, CommitLog
from .consume_queue import ENTRY, ENTRY_SIZE, ConsumeQueue
from .index import INDEX_LOW_WATER, IndexService, key_hashes, topic_prefix_crc
from .mapped_file import FileCreationError, MappedFile, PreToucher, sync_files
from .mapping import MappingBudget, mapping_limit
from .queue_ends import QueueEnds, QueueEndsSummary
from .record_requests import read_request
from .recovery import TagsCodeRule, recover
from .replication import ReplicaWriter

log = logging.getLogger("rocketmq.store.mmap")

KERNEL_INTERFACE = 5  # the calling conventions of append() and append_one() spoken here
# append_one fills a PutResult made without __init__: these fields, all of them
_PUT_RESULT_FIELDS = (
    "status",
    "commit_log_offset",
    "queue_offset",
    "commit_log_offsets",
    "store_timestamp",
    "remark",
    "store_host",
    "flush_to",
)
try:  # the compiled append (setup.py builds it when a C compiler is there)
    from . import _append
except ImportError:
    append_kernel = append_one_kernel = replica_dispatch_kernel = gather_kernel = None
else:
    append_kernel = _append.append
    # a single put whole (the checks before and the bookkeeping after the kernel's writes)
    append_one_kernel = getattr(_append, "append_one", None)  # None in a build before it
    # a slave's dispatch of the usual replicated records (None in a build before it)
    replica_dispatch_kernel = getattr(_append, "replica_dispatch", None)
    # a read's loop over its consume-queue entries (None in a build before it)
    gather_kernel = getattr(_append, "gather", None)
    if getattr(_append, "INTERFACE", 1) != KERNEL_INTERFACE:
        log.warning(
            "%s is an older build of the compiled append: every put takes the Python"
            " path until it is rebuilt (pip install -e plugins/store_mmap)",
            _append.__file__,
        )
        append_kernel = append_one_kernel = replica_dispatch_kernel = gather_kernel = None
    elif PutResult.__slots__ != _PUT_RESULT_FIELDS:  # changed in core: not filled in C
        append_one_kernel = None

SCAN_LIMIT = 800  # consume-queue entries one read examines at most (16,000 bytes in Java)
LOGICS_FLUSH_INTERVAL = 1.0  # flushIntervalConsumeQueue
# a consume queue's entries left mapped behind its writer after a flush (13,107 entries):
# consumers at the tail read those; one further behind maps its pages again
QUEUE_RESIDENT_BEHIND = 256 << 10
CLEANUP_INTERVAL = 10.0  # cleanResourceInterval
PRE_TOUCH_AHEAD = 32 << 20  # keep this much of the CommitLog faulted in ahead of the writer
# small steps: a first touch stalls the whole vCPU (2-60 us per page here, docs/perf.md), a
# broker pinned to one core runs its event loop there too, and a step holds the mapping's
# lock that the loop's own mmap and munmap calls wait for (64 KiB: 16 pages, against
# 1 MiB, took vs_nats' one-at-a-time row from 9,465 to 10,106 msg/s, p99 280 -> 255 us,
# medians of five interleaved runs)
PRE_TOUCH_STEP = 64 << 10
# the pre-toucher's rest once PRE_TOUCH_AHEAD ahead: a writer at 200 MB/s uses a third of
# that lead meanwhile
PRE_TOUCH_IDLE = 0.05
# the next CommitLog file is made once the writer is half-way through the last one; it
# looks as far ahead as a writer at WRITE_RATE_AT_MOST could get meanwhile, within these
# bounds: an idle broker wakes for it about once a second, not a hundred times
PREPARE_INTERVAL = 0.01
PREPARE_INTERVAL_AT_MOST = 1.0
WRITE_RATE_AT_MOST = 1 << 30  # bytes per second (several times what a send path reaches)
_BLANK_SIZE = 0x7FFFFFFF
QUEUE_ENDS = "queue_ends"  # the summary a clean stop leaves in the store root (queue_ends.py)


class MmapStore(ImmediateGet):
    """The ``mmap`` store plugin."""

    def __init__(self, config: StoreConfig, flush_policy: FlushPolicy | None = None) -> None:
        self.config = config
        self.policy = flush_policy or AsyncFlush.from_config(config)
        root = self.root = Path(config.root_dir)
        if config.commit_log_huge_folios and self.policy.waits:
            log.warning(
                "commitLogHugeFolios is ignored with SYNC_FLUSH: each group commit would"
                " write whole 2 MiB folios back; the CommitLog keeps 4 KiB pages"
            )
        self.commitlog = CommitLog(
            root / "commitlog",
            config.commit_log_file_size,
            config.store_host,
            # a flush per group commit writes whole folios back: 4 KiB pages there
            huge_folios=config.commit_log_huge_folios and not self.policy.waits,
            # the writer fills its pages with zeros, unless a flush per group commit
            # would write them back before it reaches them, or 2 MiB folios are wanted
            # (a written page goes into the page cache as a folio of the write's size)
            writer_fills=not config.commit_log_huge_folios and not self.policy.waits,
            page_cache_window=self._page_cache_window(config),
        )
        self.commit_log_file_size = config.commit_log_file_size
        # a slave's: writes its master's CommitLog bytes (made at the first of them)
        self._replica: ReplicaWriter | None = None
        self.index = IndexService(root / "index", config.max_hash_slot_num, config.max_index_num)
        self.checkpoint = Checkpoint(root / "checkpoint")
        self.tags_code_rules: list[TagsCodeRule] = []  # e.g. delivery times of delayed topics
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        # queues known from the last clean stop's summary, their files not loaded yet:
        # loaded on first use (``_wake``), answered from here meanwhile
        self._dormant: dict[tuple[str, int], QueueEnds] = {}
        # consume-queue files mapped at once: idle ones are unmapped (mapping.py)
        self.mappings = MappingBudget(mapping_limit(config.max_mapped_consume_queue_files))
        self._dispatchers: list[Dispatcher] = []  # all of them: recovery tells each
        self._wants: list[QueueFilter | None] = []  # each one's ``wants``, in that order
        # the built-in two write inline on appends (no DispatchRequest per record)
        self._writes_positions = False
        self._writes_index = False
        # with their ``wants(topic, queue_id)``, None for those that want every record
        self._other_dispatchers: list[tuple[Dispatcher, QueueFilter | None]] = []
        self._built_ins_first = False  # the two before any other (add_dispatcher)
        self._flusher: Flusher | None = None
        # what open() entered, each with what undoes it; close() unwinds it
        self._lifetime = AsyncExitStack()
        self._lock_fd: int | None = None
        self._opened = False
        self._closed = False
        self.disk = DiskGuard(config, root)
        self.clock = StoreClock()
        self._puts = 0
        # writes the usual puts; None, set before open: every put takes the Python path
        # (the reference; append_one is chosen at open, from this)
        self.kernel = append_kernel
        # while open, a usual single put whole; None: append() takes _put_compiled (with
        # ``kernel``) or the Python path. Set at open, when ``kernel`` is the compiled one.
        self._append_one: Callable[..., PutResult | None] | None = None
        self._append_one_state = self._state_for_append_one()
        # usual_append's and usual_append_batch's answers, kept: a caller may tell by
        # identity that nothing changed
        self._usual_append: functools.partial[PutResult | None] | None = None
        self._usual_append_batch = self._put_compiled
        self.recovered_after_crash = False
        self.replayed = 0

    def _page_cache_window(self, config: StoreConfig) -> int:
        """commitLogPageCacheWindow, with async flush where the kernel takes the advice."""
        window = config.commit_log_page_cache_window
        if window and self.policy.waits:
            log.warning(
                "commitLogPageCacheWindow is ignored with SYNC_FLUSH: its drops would delay"
                " the group commits"
            )
            return 0
        if window and not hasattr(os, "posix_fadvise"):
            log.warning("commitLogPageCacheWindow is ignored: this system has no posix_fadvise")
            return 0
        return window

    # --- lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        try:
            await self._enter(self._lifetime)
        except BaseException:
            await self._lifetime.aclose()  # a failed open leaves nothing held
            raise

    async def _enter(self, lifetime: AsyncExitStack) -> None:
        """Open the store; each step pushes onto ``lifetime`` what undoes it, so that
        unwinding it (at close, or when a later step fails) undoes them in reverse."""
        # in the event loop's thread: recovery calls the dispatchers, which may be
        # the broker's and expect to run there
        self._open_files(lifetime)
        # a disk already full refuses puts from the first one
        self.disk.check(time.time(), manual=False)
        flusher = self._flusher = Flusher(
            self.policy,
            written=lambda: self.commitlog.max_offset,
            sync=self.commitlog.sync,
            flushed=self.commitlog.max_offset,
        )
        # pushed before the tasks: it runs once they have stopped, when nothing writes
        lifetime.push_async_callback(_in_worker, self._write_clean_stop)
        tasks = await lifetime.enter_async_context(anyio.create_task_group())
        lifetime.callback(tasks.cancel_scope.cancel)  # the tasks are told to stop first
        await tasks.start(flusher.run)
        tasks.start_soon(self._flush_logics_periodically)
        tasks.start_soon(self._prepare_next_file)
        tasks.start_soon(self._clean_periodically)
        tasks.start_soon(self.disk.watch)  # writes resume once space is freed
        pre_toucher = PreToucher(
            self.commitlog.files, PRE_TOUCH_AHEAD, PRE_TOUCH_STEP, PRE_TOUCH_IDLE
        )
        pre_toucher.start()
        lifetime.push_async_callback(_in_worker, pre_toucher.stop)
        self._opened = True
        if self.kernel is append_kernel:  # not switched off (tests compare the paths)
            self._append_one = append_one_kernel

    def _open_files(self, lifetime: AsyncExitStack) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        lifetime.callback(self._release_lock)
        abort = self.root / "abort"
        self.recovered_after_crash = abort.exists()
        # taken (deleted) before anything is written: a crash from here on never trusts it
        summary = queue_ends.take(self.root / QUEUE_ENDS)
        abort.touch()
        _sync_directory(self.root)
        (self.root / "config").mkdir(exist_ok=True)
        # each undo pushed before its load: a load that fails halfway closes what it made
        lifetime.push_async_callback(_in_worker, self.commitlog.close)
        self.commitlog.load()
        self.checkpoint.load()
        lifetime.push_async_callback(_in_worker, self._close_queues)
        trusted = self._load_queues(summary)
        lifetime.push_async_callback(_in_worker, self.index.close)
        self.index.load()
        dispatchers = self._dispatchers
        end, self.replayed = recover(
            self.commitlog,
            self._queues.values(),  # a dormant queue a replayed record reaches is loaded
            dispatchers,
            start=self.checkpoint.dispatched_offset,
            check_crc=self.config.check_crc_on_recover,
            after_crash=self.recovered_after_crash,
            rules=self.tags_code_rules,
        )
        if trusted is not None and (end, self.commitlog.min_offset) != (
            trusted.commit_log_end,
            trusted.commit_log_min,
        ):
            log.warning(
                "%s: the CommitLog spans [%d, %d), not [%d, %d) as at the last clean stop:"
                " loading every consume queue",
                self.root,
                self.commitlog.min_offset,
                end,
                trusted.commit_log_min,
                trusted.commit_log_end,
            )
            self._dormant.clear()
            self._load_queues(None)
            for queue in self._queues.values():
                queue.truncate_from_phys(end)
                queue.correct_min_offset(self.commitlog.min_offset)
        # records appended from here on are new, even where a lost tail was indexed
        self.index.indexed_below = min(self.index.indexed_below, end)
        for queue in self._queues.values():
            queue.next_offset = queue.max_offset
        if self.recovered_after_crash:
            log.warning(
                "%s was not closed cleanly: recovered to CommitLog offset %d, %d records replayed",
                self.root,
                end,
                self.replayed,
            )

    def _take_lock(self) -> None:
        self._lock_fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._release_lock()
            raise ConfigError(
                f"the store {self.root} is in use by another process (its lock file is held)"
            ) from None

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def _load_queues(self, summary: QueueEndsSummary | None) -> QueueEndsSummary | None:
        """Every consume queue. After a clean stop whose summary fits this store, all
        dormant, nothing listed or read (a start costs the same with 10 or 10,000 idle
        queues); else each loaded from its files. Returns the summary it trusted."""
        root = self.root / "consumequeue"
        root.mkdir(exist_ok=True)
        if summary is not None and self._trusts(summary):
            self._dormant = summary.queues
            return summary
        for topic_dir in sorted(root.iterdir()):
            for queue_dir in sorted(topic_dir.iterdir()):
                if not queue_dir.name.isdigit():
                    continue
                key = (topic_dir.name, int(queue_dir.name))
                if key in self._queues:
                    continue  # loaded already (woken by a replayed record)
                queue = self._new_queue(*key)
                queue.load_and_recover(after_crash=self.recovered_after_crash)
                if not queue.files.files:
                    continue  # its first file was never made (a refused put): never written
                self._queues[key] = queue
        return None

    def _trusts(self, summary: QueueEndsSummary) -> bool:
        """Whether the summary describes these queues: written by the last stop, a clean
        one, against this CommitLog and this queue file size."""
        return (
            not self.recovered_after_crash
            and summary.queue_file_size == self.config.consume_queue_file_size
            and summary.commit_log_end == self.checkpoint.dispatched_offset
            and summary.commit_log_min == self.commitlog.min_offset
        )

    def _new_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        return ConsumeQueue(
            self.root / "consumequeue",
            topic,
            queue_id,
            self.config.consume_queue_file_size,
            self.mappings,
        )

    def _wake(self, key: tuple[str, int]) -> ConsumeQueue | None:
        """The dormant queue ``key`` loaded from its files, as a start without a summary
        loads it; None when ``key`` is not dormant."""
        if key not in self._dormant:
            return None
        queue = self._new_queue(*key)
        # a load that fails (no descriptors, no memory) leaves the queue dormant: never
        # forgotten, so a later put cannot start it again at offset 0 over its files
        queue.load_and_recover(after_crash=False)  # dormant only after a clean stop
        queue.correct_min_offset(self.commitlog.min_offset)
        queue.next_offset = queue.max_offset
        self._queues[key] = queue
        del self._dormant[key]
        return queue

    def _loaded_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The queue with its files loaded (woken if dormant); None if there is none."""
        key = (topic, queue_id)
        return self._queues.get(key) or self._wake(key)

    async def close(self) -> None:
        if self._closed or not self._opened:
            self._closed = True
            return
        self._closed = True
        self._append_one = None
        await self._lifetime.aclose()

    def _write_clean_stop(self) -> None:
        """Everything on disk, then what a clean stop leaves: the checkpoint at the
        CommitLog's end, the queue-ends summary, no abort file."""
        end = self._whole_records_end()
        if end < self.commitlog.max_offset:  # a replicated record still incomplete
            self._cut_commit_log(end)
        self.commitlog.sync(end)
        self._sync_queue_files()
        self.index.sync()
        self.checkpoint.dispatched_offset = end
        self.checkpoint.physic_msg_timestamp = self.checkpoint.logics_msg_timestamp = (
            self.clock.last
        )
        self.checkpoint.save()
        queue_ends.write(self.root / QUEUE_ENDS, self._queue_ends(end))
        (self.root / "abort").unlink(missing_ok=True)
        _sync_directory(self.root)

    def _queue_ends(self, commit_log_end: int) -> QueueEndsSummary:
        summary = QueueEndsSummary(
            self.commitlog.min_offset,
            commit_log_end,
            self.config.consume_queue_file_size,
            dict(self._dormant),
        )
        for key, queue in self._queues.items():
            summary.queues[key] = QueueEnds(
                queue.min_offset, queue.max_offset, queue.retention_mark()
            )
        return summary

    def _sync_queue_files(self) -> None:
        """Blocking: the written entries of every queue on disk; then the pages of those
        files more than QUEUE_RESIDENT_BEHIND behind their writer let go of."""
        dirty = [mapped for queue in list(self._queues.values()) for mapped in queue.dirty_files()]
        sync_files(dirty, self.root / "consumequeue")
        for mapped in dirty:
            mapped.release_before(mapped.wrote - QUEUE_RESIDENT_BEHIND)

    def _close_queues(self) -> None:
        for queue in self._queues.values():
            queue.close()

    def add_dispatcher(self, dispatcher: Dispatcher) -> None:
        self._dispatchers.append(dispatcher)
        self._wants.append(getattr(dispatcher, "wants", None))
        # the compiled replica dispatch writes positions and keys before telling the others
        self._built_ins_first = self._dispatchers[:2] == [self.put_position, self.put_index]
        if dispatcher == self.put_position:
            self._writes_positions = True
        elif dispatcher == self.put_index:
            self._writes_index = True
        else:
            self._other_dispatchers.append((dispatcher, getattr(dispatcher, "wants", None)))
        self._append_one_state = self._state_for_append_one()

    def _state_for_append_one(self) -> tuple:
        """What append_one reads of the store that stays the same while it is open (the
        flags change only here), and the constants it needs; _append.c names each."""
        return (
            PutResult,
            PutStatus.PUT_OK,
            StoreClock,
            WRITER_TOUCH_STEP,
            WRITER_TOUCH_LEAD,
            INDEX_LOW_WATER,
            self.disk,
            self._queues,
            self.commitlog.files,
            self.index,
            self.policy.waits,
            self._writes_positions,
            self._writes_index,
            self._other_dispatchers,
        )

    def _others_want(self, topic: str, queue_id: int) -> bool:
        """Whether another dispatcher hears of a record of this queue: building the
        request costs ~5 us a send, paid only when one of them wants it."""
        for _, wants in self._other_dispatchers:  # noqa: SIM110 (any() of a generator costs more)
            if wants is None or wants(topic, queue_id):
                return True
        return False

    def _check_open(self) -> None:
        if self._closed or not self._opened:
            state = "closed" if self._closed else "not open"
            raise StoreClosedError(f"the store {self.root} is {state}")

    # --- dispatch targets ------------------------------------------------------------------

    def put_position(self, request: DispatchRequest) -> None:
        """The ``consume_queue`` dispatcher writes here."""
        if not enters_consume_queue(request.sys_flag):
            return
        if self.mappings.over:  # recovery replays through here, one record at a time
            self.mappings.trim()
        queue = self._queue(request.topic, request.queue_id)
        queue.append(
            request.queue_offset, request.commit_log_offset, request.size, request.tags_code
        )

    def put_index(self, request: DispatchRequest) -> None:
        """The ``index`` dispatcher writes here."""
        self.index.put(request)

    def _queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue to write to: loaded, woken, or made."""
        queue = self._loaded_queue(topic, queue_id)
        if queue is None:
            queue = self._new_queue(topic, queue_id)
            try:
                queue.files.directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise FileCreationError(
                    exc.errno, f"cannot create {queue.files.directory}: {exc.strerror}"
                ) from exc
            queue.reserve(1)  # a queue that cannot have a file is never listed
            self._queues[(topic, queue_id)] = queue
        return queue

    # --- writing ---------------------------------------------------------------------------

    async def put(self, message: MessageToStore) -> PutResult:
        result = self.append(message)
        return await self.wait_durable(result) if result.flush_to >= 0 else result

    async def put_batch(self, messages: Sequence[MessageToStore]) -> PutResult:
        result = self.append_batch(messages)
        return await self.wait_durable(result) if result.flush_to >= 0 else result

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
        append_one = self._append_one  # set only while open
        if append_one is not None:
            written = append_one(self, self._append_one_state, message)
            if written is not None:
                return written
        self._check_open()
        usual = self._put_compiled([message])
        if usual is not None:
            return usual
        if self.mappings.over:  # between operations: nothing holds a view of a queue file
            self.mappings.trim()
        refused = refusal(message, self.config) or self.disk.refusal()
        if refused is not None:
            return refused
        store_time = self.clock.now()
        try:
            phys, size, queue_offset = self._append(message, store_time)
        except FileCreationError as exc:  # raised before anything was written
            return self._file_failure_result(exc)
        except ValueError as exc:
            return PutResult.refused(PutStatus.MESSAGE_ILLEGAL, str(exc))
        self._puts += 1
        flush_to = phys + size if self.policy.waits and waits_for_flush(message) else -1
        return PutResult.written([phys], queue_offset, store_time, self.config.store_host, flush_to)

    def usual_append(self) -> Callable[[MessageToStore], PutResult | None] | None:
        """``append`` of the usual message, compiled, for a caller that puts many in a
        row (the broker's runs of sends): it returns None, with nothing done, for any
        other message (``append`` then puts it) and never a result that waits for a
        flush. None while it does not apply: closed, not compiled, a flush policy that
        waits."""
        append_one = self._append_one
        if append_one is None or self.policy.waits:
            return None
        usual = self._usual_append
        if (
            usual is None
            or usual.func is not append_one
            or usual.args[1] is not self._append_one_state
        ):
            usual = self._usual_append = functools.partial(append_one, self, self._append_one_state)
        return usual

    def usual_append_batch(self) -> Callable[[list[MessageToStore]], PutResult | None] | None:
        """``append_batch`` of a usual batch (one queue's messages, at least one), compiled,
        for the broker's runs of sends: as ``usual_append``, None with nothing done for any
        other batch, and None while it does not apply."""
        if self._append_one is None or self.policy.waits:
            return None
        return self._usual_append_batch

    def append_batch(self, messages: Sequence[MessageToStore]) -> PutResult:
        self._check_open()
        usual = self._put_compiled(list(messages)) if messages else None
        if usual is not None:
            return usual
        if self.mappings.over:
            self.mappings.trim()
        refused = batch_refusal(messages, self.config)
        if refused is not None:
            return refused
        first = messages[0]
        refused = self.disk.refusal()
        if refused is not None:
            return refused
        try:
            self.commitlog.room_for_batch(messages, first.topic.encode())
            if self._writes_positions and not first.sys_flag & TRANSACTION_PREPARED:
                self._queue(first.topic, first.queue_id).reserve(len(messages))
            if self._writes_index:  # room for every key first: no batch is cut short
                self.index.reserve(sum(_key_count(message) for message in messages))
        except FileCreationError as exc:  # raised before anything was written
            return self._file_failure_result(exc)
        except ValueError as exc:
            return PutResult.refused(PutStatus.MESSAGE_ILLEGAL, str(exc))
        store_time = self.clock.now()
        append = self._append
        phys, size, first_queue_offset = append(first, store_time)
        offsets = [phys]
        for message in messages[1:]:
            phys, size, _ = append(message, store_time)
            offsets.append(phys)
        end = phys + size
        self._puts += len(messages)
        return PutResult.written(
            offsets,
            first_queue_offset,
            store_time,
            self.config.store_host,
            end if self.policy.waits and waits_for_flush(first) else -1,
        )

    def _put_compiled(self, messages: list[MessageToStore]) -> PutResult | None:
        """The put of ``messages`` (one queue's) when the compiled kernel takes them;
        None, with nothing written or taken, when the Python path must."""
        if self.kernel is None or self.disk.refusing is not None:
            return None
        store_time = self.clock.next()
        written = self._append_compiled(messages, store_time)
        if written is None:
            return None
        self.clock.last = store_time
        offsets, queue_offset, end = written
        self._puts += len(offsets)
        return PutResult.written(
            offsets,
            queue_offset,
            store_time,
            self.config.store_host,
            end if self.policy.waits and waits_for_flush(messages[0]) else -1,
        )

    def _append_compiled(
        self, messages: list[MessageToStore], store_time: int
    ) -> tuple[list[int], int, int] | None:
        """Messages of one queue written by the compiled kernel: their CommitLog offsets,
        the first one's queue offset and the CommitLog offset after them. None, with
        nothing written, when they are not the usual case (a file to create or roll,
        IPv6 hosts, a long topic, a refusal due...): then ``_append`` writes them."""
        first = messages[0]
        topic = first.topic
        queue = self._queues.get((topic, first.queue_id))
        logs = self.commitlog.files.files
        if queue is None or not logs:
            return None
        mapped = logs[-1]
        queue_offset = queue.next_offset
        entries: MappedFile | None = None
        entry_position = 0  # where the kernel writes the queue entries, when it does
        if self._writes_positions:
            files = queue.files.files
            if not files or files[-1].start + files[-1].wrote != queue_offset * ENTRY_SIZE:
                return None
            entries = files[-1]
            if entries.buffer is None:  # unmapped while idle: the Python path maps it
                return None
            entries_end = entries.wrote + len(messages) * ENTRY_SIZE
            if entries_end > entries.allocated:
                try:  # disk blocks first: a write to a hole on a full disk is a SIGBUS
                    entries.allocate_ahead(min(entries.size, entries_end))
                except FileCreationError:
                    return None  # the Python path refuses the put
            entries.used = True
            entry_position = entries.wrote
        index_file = None
        if self._writes_index:
            if not self.index.files:
                return None
            index_file = self.index.files[-1]
        assert self.kernel is not None
        # the index file's part with disk blocks: keys past it send the put to the Python
        # path, which allocates more (a write to a hole on a full disk is a SIGBUS)
        written = self.kernel(
            queue.append_context or self._append_context(queue),
            messages,
            queue_offset,
            mapped.buffer,
            mapped.wrote,
            mapped.start,
            store_time,
            entries.buffer if entries is not None else None,
            entry_position or 0,
            index_file.allocated_view if index_file is not None else None,
        )
        if written is None:
            return None
        offsets, position, keys = written
        mapped.wrote = position
        queue.next_offset = queue_offset + len(messages)
        if entries is not None:
            entries.wrote = entry_position + len(messages) * ENTRY_SIZE
        if index_file is not None:
            index_file.wrote_compiled(keys)
        # after the bookkeeping: whatever it raises, what was written is accounted for
        if position + WRITER_TOUCH_LEAD > mapped.touched:  # the background one fell behind
            mapped.fill_ahead(WRITER_TOUCH_STEP)
        end = mapped.start + position
        if self._other_dispatchers and self._others_want(topic, first.queue_id):
            ends = [*offsets[1:], end]
            for number, message in enumerate(messages):
                phys = offsets[number]
                self._dispatch_to_others(
                    message,
                    phys,
                    ends[number] - phys,
                    store_time,
                    queue_offset + number,
                    message.sys_flag,
                    raw_dispatch_fields(message),
                )
        return offsets, queue_offset, end

    def live_config_changed(self) -> None:
        """The broker changed a live key of ``config`` (maxMessageSize): the compiled
        append's cached arguments are made again on each queue's next put."""
        for queue in self._queues.values():
            queue.append_context = None

    def _append_context(self, queue: ConsumeQueue) -> tuple:
        """The compiled append's fixed arguments for ``queue`` (its ``queue`` tuple)."""
        queue.append_context = (
            queue.topic,
            queue.encoded_topic,
            queue.queue_id,
            topic_prefix_crc(queue.topic),
            self.config.store_host,
            self.config.max_message_size,
            self.index.slot_num,
            self.index.index_num,
            tags_code_of,
        )
        return queue.append_context

    def _append(self, message: MessageToStore, store_time: int) -> tuple[int, int, int]:
        """Append one record and dispatch it: the consume-queue entry and the index keys
        written here, other dispatchers told through a DispatchRequest."""
        topic, queue_id, sys_flag = message.topic, message.queue_id, message.sys_flag
        if sys_flag & TRANSACTION_PREPARED:  # prepared or rolled back: in no queue
            return self._append_outside_queues(message, store_time)
        queue = self._queues.get((topic, queue_id)) or self._queue(topic, queue_id)
        if self._writes_positions:
            queue.reserve(1)  # its file before the record: a failure here writes nothing
        fields = code, keys, uniq_key = raw_dispatch_fields(message)
        hashes = self._index_room(topic, keys, uniq_key)
        queue_offset = queue.next_offset
        phys, size, sys_flag = self.commitlog.append(
            message, queue.encoded_topic, queue_offset, store_time
        )
        queue.next_offset = queue_offset + 1
        if self._writes_positions:
            queue.append(queue_offset, phys, size, code)
        if hashes:
            self.index.add(hashes, phys, store_time)
        if self._others_want(topic, queue_id):
            self._dispatch_to_others(
                message, phys, size, store_time, queue_offset, sys_flag, fields
            )
        return phys, size, queue_offset

    def _dispatch_one(
        self, message: MessageToStore, phys: int, size: int, store_time: int, queue_offset: int
    ) -> None:
        """A record the compiled single put wrote, told to the other dispatchers that want it."""
        fields = raw_dispatch_fields(message)
        self._dispatch_to_others(
            message, phys, size, store_time, queue_offset, message.sys_flag, fields
        )

    def _index_room(self, topic: str, keys: bytes | None, uniq_key: bytes | None) -> list[int]:
        """The key hashes of a record about to be written, with room for them made in the
        index (raises FileCreationError, nothing written, on a full disk)."""
        if not self._writes_index or not (keys or uniq_key):
            return []
        hashes = key_hashes(topic_prefix_crc(topic), keys, uniq_key)
        self.index.reserve(len(hashes))
        return hashes

    def _append_outside_queues(
        self, message: MessageToStore, store_time: int
    ) -> tuple[int, int, int]:
        fields = _, keys, uniq_key = raw_dispatch_fields(message)
        # a rollback is not indexed; a prepared record is, under its keys
        rollback = is_rollback(message.sys_flag)
        hashes = None if rollback else self._index_room(message.topic, keys, uniq_key)
        phys, size, sys_flag = self.commitlog.append(message, message.topic.encode(), 0, store_time)
        if hashes:
            self.index.add(hashes, phys, store_time)
        if self._others_want(message.topic, message.queue_id):
            self._dispatch_to_others(message, phys, size, store_time, 0, sys_flag, fields)
        return phys, size, 0

    def _dispatch_to_others(
        self,
        message: MessageToStore,
        phys: int,
        size: int,
        store_time: int,
        queue_offset: int,
        sys_flag: int,
        fields: tuple[int, bytes | None, bytes | None],
    ) -> None:
        code, keys, uniq_key = decode_dispatch_fields(fields)
        request = DispatchRequest(
            message.topic,
            message.queue_id,
            phys,
            size,
            code,
            store_time,
            queue_offset,
            keys,
            uniq_key,
            sys_flag,
            message.prepared_transaction_offset,
        )
        topic, queue_id = message.topic, message.queue_id
        for dispatcher, wants in self._other_dispatchers:
            if wants is None or wants(topic, queue_id):
                dispatcher(request)

    def _file_failure_result(self, error: FileCreationError) -> PutResult:
        """CREATE_MAPPED_FILE_FAILED, with what to do about it."""
        log.error("cannot create a store file: %s", error)
        if error.errno in (errno.EMFILE, errno.ENFILE):
            advice = (
                f"{error.strerror}: the broker has no file descriptor left (each connection"
                " holds one); raise the open-files limit (ulimit -n)"
            )
        elif error.errno == errno.ENOMEM:
            advice = (
                f"{error.strerror}: no memory mapping left; lower maxMappedConsumeQueueFiles"
                " or raise vm.max_map_count"
            )
        else:
            advice = f"{error.strerror or error}: free disk space under {self.root}"
        return PutResult.refused(PutStatus.CREATE_MAPPED_FILE_FAILED, advice)

    # --- reading ---------------------------------------------------------------------------

    def get_now(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        tags: TagFilter = None,
        max_bytes: int = 256 * 1024,
    ) -> GetResult:
        """``get`` without a coroutine: nothing here waits (SupportsImmediateGet)."""
        self._check_open()
        if tags is not None and type(tags) is not frozenset:
            tags = frozenset(tags)  # what the compiled loop takes
        queue = self._loaded_queue(topic, queue_id)
        if queue is None:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
        if self.mappings.over:
            self.mappings.trim()
        min_offset, max_offset = queue.min_offset, queue.max_offset
        edge = edge_result(offset, min_offset, max_offset)
        if edge is not None:
            return edge
        result = GetResult(GetStatus.NO_MATCHED_MESSAGE, offset, min_offset, max_offset)
        records, queue_offsets = result.records, result.queue_offsets
        total = 0
        scan_left = max(SCAN_LIMIT, max_count)
        position = offset
        files = self.commitlog.files
        # the CommitLog file of the last record read: its written bytes are [low, high)
        mapping, low, high = None, 0, 0
        examined = -1  # the CommitLog offset of the last entry looked at (kept in a local)
        # the compiled loop, unless switched off (tests compare it with the one below)
        gather = gather_kernel if self.kernel is append_kernel else None
        while scan_left > 0 and position < max_offset:
            entries = queue.entries(position, scan_left)
            if not entries:
                break
            if gather is not None:
                try:
                    position, scan_left, total, examined = gather(
                        entries, position, scan_left, total, examined, files, tags,
                        max_count, max_bytes, records, queue_offsets,
                    )  # fmt: skip
                finally:
                    entries.release()
                continue
            try:
                for phys, size, code in ENTRY.iter_unpack(entries):
                    position += 1
                    scan_left -= 1
                    if size == _BLANK_SIZE:
                        continue
                    examined = phys
                    if tags is not None and not tag_matches(tags, code):
                        continue
                    if records and total + size > max_bytes:
                        position -= 1
                        scan_left = 0
                        break
                    if phys < low or phys + size > high:
                        mapped = files.find(phys)
                        if mapped is None:
                            continue  # removed by retention while queued
                        mapping, low = mapped.mapping, mapped.start
                        high = low + mapped.wrote
                        if phys + size > high:
                            continue
                    at = phys - low
                    # slicing an mmap copies out bytes; a CommitLog file is mapped until closed
                    records.append(mapping[at : at + size])  # type: ignore[index]
                    queue_offsets.append(position - 1)
                    total += size
                    if len(records) >= max_count:
                        scan_left = 0
                        break
            finally:  # before any await: the budget may unmap the file after
                entries.release()
        result.next_begin_offset = position
        result.last_examined_position = examined
        if records:
            result.status = GetStatus.FOUND
        return result

    def min_offset(self, topic: str, queue_id: int) -> int:
        key = (topic, queue_id)
        queue = self._queues.get(key) or self._dormant.get(key)
        return queue.min_offset if queue is not None else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        key = (topic, queue_id)
        queue = self._queues.get(key) or self._dormant.get(key)
        return queue.max_offset if queue is not None else 0

    def queues(self) -> dict[str, list[int]]:
        return queue_ids_by_topic([*self._queues, *self._dormant])

    def _store_time(self, queue: ConsumeQueue, offset: int) -> int:
        entry = queue.entry(offset)
        return self.commitlog.store_time_at(entry[0]) if entry is not None else -1

    async def offset_by_time(
        self, topic: str, queue_id: int, timestamp: int, boundary: str = "lower"
    ) -> int:
        self._check_open()
        queue = self._loaded_queue(topic, queue_id)
        if queue is None:
            return 0
        low, high = queue.min_offset, queue.max_offset
        if low >= high:
            return low
        offsets = range(low, high)

        def stored(queue_offset: int) -> int:
            return self._store_time(queue, queue_offset)

        if boundary == "upper":
            return low + max(bisect.bisect_right(offsets, timestamp, key=stored) - 1, 0)
        return low + bisect.bisect_left(offsets, timestamp, key=stored)

    async def earliest_store_time(self, topic: str, queue_id: int) -> int:
        self._check_open()
        queue = self._loaded_queue(topic, queue_id)
        if queue is None or queue.max_offset <= queue.min_offset:
            return -1
        return self._store_time(queue, queue.min_offset)

    async def message_at(self, commit_log_offset: int) -> bytes | None:
        self._check_open()
        record = self.commitlog.record_at(commit_log_offset)
        return bytes(record) if record is not None else None

    async def query_by_key(
        self, topic: str, key: str, max_count: int, begin: int, end: int
    ) -> QueryResult:
        self._check_open()
        last_time, last_offset = self.index.last_update
        result = QueryResult(
            index_last_update_timestamp=last_time, index_last_update_phy_offset=last_offset
        )
        for phys in self.index.query(topic, key, max_count, begin, end):
            record = self.commitlog.record_at(phys)
            if record is None:
                continue
            stored = self.commitlog.store_time_at(phys)
            if begin <= stored <= end:
                result.records.append(bytes(record))
        return result

    # --- durability, retention, counters ---------------------------------------------------

    async def flush(self) -> None:
        """Everything appended so far, and the consume queues and index, on disk."""
        self._check_open()
        assert self._flusher is not None
        await self._flusher.flush()
        await self._flush_logics()

    async def _flush_logics(self) -> None:
        """Consume queues and index to disk, then the checkpoint that vouches for them."""
        assert self._flusher is not None
        covered = self._whole_records_end()  # dispatch is inline: entries exist up to here
        stamp = self.clock.last

        def work() -> None:
            self._sync_queue_files()
            self.index.sync()

        await run_in_background(work)
        # never vouch for CommitLog bytes that are not themselves on disk
        self.checkpoint.dispatched_offset = min(covered, self._flusher.flushed)
        self.checkpoint.physic_msg_timestamp = self.checkpoint.logics_msg_timestamp = stamp
        await run_in_background(self.checkpoint.save)

    async def _flush_logics_periodically(self) -> None:
        while True:
            await anyio.sleep(LOGICS_FLUSH_INTERVAL)
            try:
                await self._flush_logics()
            except OSError as exc:
                log.error("flushing consume queues failed: %s", exc)

    async def _prepare_next_file(self) -> None:
        """Create the next CommitLog file before the writer needs it."""
        while True:
            last = self.commitlog.files.last
            wrote = last.wrote if last is not None else 0  # none yet: the first is empty
            ready = self.commitlog.next_file is not None
            await anyio.sleep(_prepare_pause(self.commitlog.files.file_size, wrote, ready))
            last = self.commitlog.files.last
            if last is None or self.commitlog.next_file is not None or last.wrote * 2 < last.size:
                continue
            try:
                # lists of files change only on the event loop; the thread just creates
                start = self.commitlog.next_file_start()
                mapped = await run_in_background(self.commitlog.create_file, start)
                self.commitlog.offer_next_file(mapped)
            except OSError as exc:
                log.warning("preparing the next CommitLog file failed: %s", exc)
                await anyio.sleep(1)

    async def _clean_periodically(self) -> None:
        # the first cleanup waits an interval (Java: 60 s): it never races the first calls
        # made on a freshly opened store; open() already decided whether to refuse puts
        while True:
            await anyio.sleep(CLEANUP_INTERVAL)
            try:
                await self._delete_expired(time.time(), manual=False)
            except OSError as exc:
                log.error("retention cleanup failed: %s", exc)

    async def delete_expired(self, now: float | None = None, force: bool = False) -> int:
        self._check_open()
        return await self._delete_expired(time.time() if now is None else now, manual=force)

    async def _delete_expired(self, now: float, manual: bool) -> int:
        decision = await anyio.to_thread.run_sync(self.disk.check, now, manual)
        if not (decision.delete_expired or decision.forcibly):
            return 0
        deleted = 0
        files = self.commitlog.files
        while len(files.files) > 1:
            oldest = files.files[0]
            if not decision.forcibly and not retention.expired(
                oldest.path, now, self.config.file_reserved_time
            ):
                break
            await run_in_background(files.delete_first().remove)
            deleted += 1
            if decision.forcibly and deleted >= 10:  # deleteFileBatchMax
                break
        if deleted:
            floor = self.commitlog.min_offset
            # a dormant queue is loaded only when retention changes it
            for key in [k for k, ends in self._dormant.items() if floor >= ends.retention_mark]:
                self._wake(key)
            for queue in list(self._queues.values()):
                queue.delete_expired(floor)
            self.index.delete_before(floor)
            log.info("deleted %d expired CommitLog files; the log now starts at %d", deleted, floor)
        return deleted

    async def delete_topic(self, topic: str) -> None:
        self._check_open()
        for key in [k for k in self._dormant if k[0] == topic]:
            del self._dormant[key]  # its files go with the topic's directory below
        for key in [k for k in self._queues if k[0] == topic]:
            queue = self._queues.pop(key)
            directory = queue.files.directory
            queue.close()
            await anyio.to_thread.run_sync(_remove_tree, directory)
        await anyio.to_thread.run_sync(_remove_tree, self.root / "consumequeue" / topic)

    # --- replication (HA.md): a master reads its CommitLog out, a slave writes it in ---

    def read_commit_log(self, offset: int, max_bytes: int) -> bytes:
        self._check_open()
        return self.commitlog.read_raw(offset, max_bytes, self._whole_records_end())

    def append_replicated(self, offset: int, data: bytes) -> None:
        self._check_open()
        if self._replica is None:
            read = functools.partial(read_request, rules=self.tags_code_rules)
            compiled = replica_dispatch_kernel is not None and self.kernel is append_kernel
            self._replica = ReplicaWriter(
                self.commitlog,
                self._dispatch_replicated,
                read,
                self._dispatch_replicated_run if compiled else None,
                cut=self._cut_commit_log,
            )
        self._replica.append(offset, data)

    def _cut_commit_log(self, end: int) -> None:
        """The CommitLog ends at ``end`` from now on: a slave's record refused or left
        incomplete, which the master sends again."""
        self.commitlog.truncate_after(end, zero=True)
        if self._flusher is not None:  # a flush running now proves nothing past ``end``
            self._flusher.note_cut(end)

    def _dispatch_replicated_run(
        self, mapped: MappedFile, offsets: list[int], start: int, progress: list[int]
    ) -> int:
        """The usual records of ``offsets[start:]`` dispatched in C, as _dispatch_replicated
        would (ReplicaWriter's ``dispatch_run``): a slave's append of 12 records at a time
        went from 14.3 to 5.4 us a record (1 KiB bodies, in process)."""
        if self.mappings.over or self.tags_code_rules or not self._built_ins_first:
            return 0  # trimmed, coded, or told in another order: in Python
        return replica_dispatch_kernel(  # type: ignore[misc]
            self,
            mapped.buffer,
            mapped.start,
            offsets,
            start,
            self._append_one_state,
            DispatchRequest,
            progress,
        )

    def _dispatch_replicated(self, request: DispatchRequest) -> None:
        """A replicated record told to every dispatcher that wants it, in their order."""
        topic, queue_id = request.topic, request.queue_id
        for dispatcher, wants in zip(self._dispatchers, self._wants, strict=True):
            if wants is None or wants(topic, queue_id):
                dispatcher(request)
        queue = self._queues.get((request.topic, request.queue_id))
        if queue is not None and enters_consume_queue(request.sys_flag):
            queue.next_offset = max(queue.next_offset, request.queue_offset + 1)
        self.clock.last = max(self.clock.last, request.store_timestamp)

    def _whole_records_end(self) -> int:
        """The CommitLog's end, short of a replicated record still incomplete."""
        replica = self._replica
        return replica.whole_end if replica is not None else self.commitlog.max_offset

    @property
    def min_commit_log_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def max_commit_log_offset(self) -> int:
        return self.commitlog.max_offset

    def stats(self) -> dict[str, Any]:
        flusher = self._flusher
        return {
            "store": "mmap",
            "root": str(self.root),
            "puts": self._puts,
            "messages": sum(
                q.max_offset - q.min_offset
                for queues in (self._queues, self._dormant)
                for q in queues.values()
            ),
            "commit_log_min_offset": self.commitlog.min_offset,
            "commit_log_max_offset": self.commitlog.max_offset,
            "commit_log_files": len(self.commitlog.files.files),
            "flushed_offset": flusher.flushed if flusher else 0,
            "flushes": flusher.flushes if flusher else 0,
            "topics": len({topic for topic, _ in [*self._queues, *self._dormant]}),
            "queues": len(self._queues) + len(self._dormant),
            "dormant_queues": len(self._dormant),
            "index_files": len(self.index.files),
            "mapped_queue_files": len(self.mappings),
            "recovered_after_crash": self.recovered_after_crash,
            "refusing_writes": self.disk.refusing,
        }


def _sync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


async def _in_worker(function: Callable[[], object]) -> None:
    """Blocking cleanup in a worker thread, shielded: it runs to its end even when the
    task that closes the store is cancelled."""
    with anyio.CancelScope(shield=True):
        await anyio.to_thread.run_sync(function)


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _key_count(message: MessageToStore) -> int:
    """How many index keys a record has: UNIQ_KEY and each KEYS token (none for a rollback)."""
    if is_rollback(message.sys_flag):
        return 0
    _, keys, uniq_key = raw_dispatch_fields(message)
    return (1 if uniq_key else 0) + (sum(1 for key in keys.split(b" ") if key) if keys else 0)


def _prepare_pause(file_size: int, wrote: int, next_ready: bool) -> float:
    """How long the next-file preparer may sleep: until a writer at ``wrote`` in the newest
    file could, at the fastest, reach the middle of the file after it when that one is
    ready, else the middle of its own."""
    room = file_size // 2 - wrote + (file_size if next_ready else 0)
    return min(max(room / WRITE_RATE_AT_MOST, PREPARE_INTERVAL), PREPARE_INTERVAL_AT_MOST)
