"""The Flusher: runs a FlushPolicy against one log, off the event loop.

``sync(upto)`` is the store's blocking "make bytes up to ``upto`` durable" (fdatasync
of mapped files, a WAL sync, ...); it runs in a worker thread. Puts that must wait
register with ``wait_durable`` (a task waits) or ``when_settled`` (a callback, called by
the flush or the deadline: what the send path uses, as a task per send costs more than
the send); every put that arrives while a flush runs is covered by the next one, so
concurrent puts share one fdatasync (group commit).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable

import anyio
from anyio.abc import TaskStatus

from .api import PutResult, PutStatus
from .flush import FlushPolicy

log = logging.getLogger("rocketmq.store")


class Flusher:
    def __init__(
        self,
        policy: FlushPolicy,
        *,
        written: Callable[[], int],
        sync: Callable[[int], None],
        flushed: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy
        self.flushed = flushed  # everything below this offset is durable
        self.flushes = 0
        self.failure: BaseException | None = None
        self._written = written
        self._sync = sync
        self._clock = clock
        self._last_flush = clock()
        # puts waiting share one event per flush (no timer or event per put: they cost
        # more than the put); the loop wakes them at flushes and at their deadlines.
        # (end, deadline) of each waiting put, in arrival order: both ascend, so a flush
        # takes its covered puts off the front, and the front has the next deadline
        self._waiting = 0
        self._pending: deque[tuple[int, float]] = deque()
        # (end, deadline, result, settled) of each put told by callback, in arrival order
        self._callbacks: deque[tuple[int, float, PutResult, Callable[[PutResult], None]]]
        self._callbacks = deque()
        self._flushed_event: anyio.Event | None = None
        self._deadline_added: anyio.Event | None = None
        self._wakeup: anyio.Event | None = None
        self._lock: anyio.Lock | None = None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Flush as the policy says, until cancelled."""
        self._wakeup = anyio.Event()
        try:
            await self._run(task_status)
        finally:  # stopped: no flush and no deadline will tell the callbacks left
            callbacks, self._callbacks = self._callbacks, deque()
            for _end, _deadline, result, settled in callbacks:
                result.status = PutStatus.FLUSH_DISK_TIMEOUT
                result.remark = "the store stopped before a flush covered it"
                _tell(settled, result)

    async def _run(self, task_status: TaskStatus[None]) -> None:
        async with anyio.create_task_group() as task_group:
            # a separate task, so that waiters time out even while a slow flush runs
            task_group.start_soon(self._expire_deadlines)
            task_status.started()
            while True:
                dirty = self._written() - self.flushed
                waiting = self._waiting + len(self._callbacks)
                delay = self.policy.delay(dirty, self._clock() - self._last_flush, waiting)
                if delay > 0:
                    wakeup = self._wakeup = self._wakeup or anyio.Event()
                    with anyio.move_on_after(delay):
                        await wakeup.wait()
                    self._wakeup = anyio.Event()
                    continue
                await self.flush()

    async def flush(self) -> None:
        """Make everything written so far durable; wake the puts it covers."""
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            target = self._written()
            if target > self.flushed:
                try:
                    await anyio.to_thread.run_sync(self._sync, target)
                except OSError as exc:
                    # waiters time out (FLUSH_DISK_TIMEOUT); the next flush tries again
                    self.failure = exc
                    log.error("flush up to offset %d failed: %s", target, exc)
                    await anyio.sleep(0.1)
                    return
                self.failure = None
                self.flushed = target
                self.flushes += 1
                pending = self._pending
                while pending and pending[0][0] <= target:
                    pending.popleft()  # durable: its deadline is no longer anyone's
                callbacks = self._callbacks
                while callbacks and callbacks[0][0] <= target:
                    _end, _deadline, result, settled = callbacks.popleft()
                    _tell(settled, result)
            self._last_flush = self._clock()
            self._wake_waiters()

    def _wake_waiters(self) -> None:
        if self._flushed_event is not None:
            self._flushed_event.set()
            self._flushed_event = None

    async def _expire_deadlines(self) -> None:
        """Wake waiters, and tell callbacks, when the deadline of one not yet durable
        passes."""
        pending, callbacks = self._pending, self._callbacks
        while True:
            if not pending and not callbacks:
                self._deadline_added = anyio.Event()
                await self._deadline_added.wait()
                continue
            # a flush meanwhile only takes puts off the front: later deadlines come later
            first = min(queued[0][1] for queued in (pending, callbacks) if queued)
            await anyio.sleep(max(0.0, first - self._clock()))
            now = self._clock()
            expired = False
            while pending and pending[0][1] <= now:
                pending.popleft()
                expired = True
            while callbacks and callbacks[0][1] <= now:
                _end, _deadline, result, settled = callbacks.popleft()
                _tell(settled, self._timed_out(result))
            if expired:
                self._wake_waiters()  # they look at the clock and give up

    def _timed_out(self, result: PutResult) -> PutResult:
        result.status = PutStatus.FLUSH_DISK_TIMEOUT
        result.remark = f"not on disk within {self.policy.timeout:g} s (syncFlushTimeout)"
        return result

    def when_settled(self, result: PutResult, settled: Callable[[PutResult], None]) -> bool:
        """``settle`` without a task: True when ``result`` has nothing to wait for (its
        records are durable already; ``settled`` is not called); else False, and
        ``settled(result)`` once they are durable up to ``result.flush_to``, or with
        FLUSH_DISK_TIMEOUT after the policy's timeout. ``settled`` runs in the flush or
        the deadline task: it must not raise, and must not block."""
        end = result.flush_to
        if end < 0 or end <= self.flushed:
            return True
        if not self._pending and not self._callbacks and self._deadline_added is not None:
            self._deadline_added.set()
        self._callbacks.append((end, self._clock() + self.policy.timeout, result, settled))
        if self._wakeup is not None:
            self._wakeup.set()
        return False

    async def wait_durable(self, end: int) -> bool:
        """Wait until bytes below ``end`` are durable; False after the policy's timeout."""
        if end <= self.flushed:
            return True
        deadline = self._clock() + self.policy.timeout
        if not self._pending and self._deadline_added is not None:
            self._deadline_added.set()
        self._pending.append((end, deadline))
        self._waiting += 1
        try:
            if self._wakeup is not None:
                self._wakeup.set()
            while end > self.flushed:
                if self._clock() >= deadline:
                    return False
                if self._flushed_event is None:
                    self._flushed_event = anyio.Event()
                await self._flushed_event.wait()
            return True
        finally:
            self._waiting -= 1

    async def settle(self, result: PutResult) -> PutResult:
        """A store's ``wait_durable``: ``result`` once its records are durable up to
        ``result.flush_to``; FLUSH_DISK_TIMEOUT after the policy's timeout."""
        if result.flush_to >= 0 and not await self.wait_durable(result.flush_to):
            self._timed_out(result)
        return result


def _tell(settled: Callable[[PutResult], None], result: PutResult) -> None:
    try:
        settled(result)
    except Exception:  # the flush and the deadline task must go on for the others
        log.exception("a put's durability callback failed")
