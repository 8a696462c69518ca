"""The Flusher: runs a FlushPolicy against one log, off the event loop.

``sync(upto)`` is the store's blocking "make bytes up to ``upto`` durable" (fdatasync
of mapped files, a WAL sync, ...); it runs in a worker thread, of the lowest priority
when no put waits for it (``background.run_in_background``). Puts that must wait
register with ``when_settled`` (a callback, called by the flush or the deadline: what the
send path uses, as a task per send costs more than the send) or ``wait_durable`` (a task
waits, on that callback); every put that arrives while a flush runs is covered by the
next one, so concurrent puts share one fdatasync (group commit).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskStatus

from ..background import run_in_background
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
        # the lowest cut (``note_cut``) while the running flush runs: it proves no more
        self._cut_below = flushed
        # (end, deadline, told) of each waiting put, in arrival order: both ascend, so a
        # flush takes its covered puts off the front, and the front has the next deadline;
        # ``told(None)`` once durable, ``told(why)`` when not (no timer or task per put)
        self._watching: deque[tuple[int, float, Callable[[str | None], None]]] = deque()
        self._deadline_added: anyio.Event | None = None
        self._wakeup: anyio.Event | None = None
        self._lock: anyio.Lock | None = None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Flush as the policy says, until cancelled."""
        try:
            await self._run(task_status)
        finally:  # stopped: no flush and no deadline will tell the puts left
            watching, self._watching = self._watching, deque()
            for _end, _deadline, told in watching:
                _tell(told, "the store stopped before a flush covered it")

    async def _run(self, task_status: TaskStatus[None]) -> None:
        self._wakeup = anyio.Event()
        async with anyio.create_task_group() as task_group:
            # a separate task, so that waiters time out even while a slow flush runs
            task_group.start_soon(self._expire_deadlines)
            task_status.started()
            while True:
                dirty = self._written() - self.flushed
                waiting = len(self._watching)
                delay = self.policy.delay(dirty, self._clock() - self._last_flush, waiting)
                if delay > 0:
                    with anyio.move_on_after(delay):
                        await self._wakeup.wait()
                    self._wakeup = anyio.Event()
                    continue
                await self.flush()

    async def flush(self) -> None:
        """Make everything written so far durable; wake the puts it covers."""
        async with self._flush_lock():
            target = self._written()
            if target > self.flushed:
                self._cut_below = target
                # a flush no put waits for (async) yields the core to the loop's requests
                run = anyio.to_thread.run_sync if self.policy.waits else run_in_background
                try:
                    await run(self._sync, target)
                except OSError as exc:
                    # waiters time out (FLUSH_DISK_TIMEOUT); the next flush tries again
                    self.failure = exc
                    log.error("flush up to offset %d failed: %s", target, exc)
                    await anyio.sleep(0.1)
                    return
                self.failure = None
                target = min(target, self._cut_below)  # a cut meanwhile: what it kept
                self.flushed = target
                self.flushes += 1
                watching = self._watching
                while watching and watching[0][0] <= target:
                    _end, _deadline, told = watching.popleft()
                    _tell(told, None)
            self._last_flush = self._clock()

    def note_cut(self, end: int) -> None:
        """The log was cut back to ``end`` (a slave refusing a replicated record: the
        master sends the rest again). Nothing from ``end`` on is durable any more, even
        where a flush running now reaches past it: the bytes written there again are
        the next flush's. Only a store no put waits on is cut (a slave): a put waiting
        past ``end`` would be told only once the log is that long again."""
        self.flushed = min(self.flushed, end)
        self._cut_below = min(self._cut_below, end)

    @asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """No flush runs inside (one running ends first): for a store that swaps what
        ``sync`` works on."""
        async with self._flush_lock():
            yield

    def _flush_lock(self) -> anyio.Lock:
        if self._lock is None:  # made in the event loop (anyio's Lock needs one)
            self._lock = anyio.Lock()
        return self._lock

    async def _expire_deadlines(self) -> None:
        """Tell the puts whose deadline passed before a flush covered them."""
        watching = self._watching
        while True:
            if not watching:
                self._deadline_added = anyio.Event()
                await self._deadline_added.wait()
                continue
            # a flush meanwhile only takes puts off the front: later deadlines come later
            await anyio.sleep(max(0.0, watching[0][1] - self._clock()))
            now = self._clock()
            while watching and watching[0][1] <= now:
                _end, _deadline, told = watching.popleft()
                _tell(told, self._too_late())

    def _too_late(self) -> str:
        return f"not on disk within {self.policy.timeout:g} s (syncFlushTimeout)"

    def _watch(self, end: int, told: Callable[[str | None], None]) -> None:
        """``told`` once bytes below ``end`` (not durable yet) are, or why they are not."""
        if not self._watching and self._deadline_added is not None:
            self._deadline_added.set()
        self._watching.append((end, self._clock() + self.policy.timeout, told))
        if self._wakeup is not None:
            self._wakeup.set()

    def when_settled(self, result: PutResult, settled: Callable[[PutResult], None]) -> bool:
        """``settle`` without a task: True when ``result`` has nothing to wait for (its
        records are durable already; ``settled`` is not called); else False, and
        ``settled(result)`` once they are durable up to ``result.flush_to``, or with
        FLUSH_DISK_TIMEOUT after the policy's timeout. ``settled`` runs in the flush or
        the deadline task: it must not raise, and must not block."""
        end = result.flush_to
        if end < 0 or end <= self.flushed:
            return True

        def told(why: str | None) -> None:
            if why is not None:
                result.status, result.remark = PutStatus.FLUSH_DISK_TIMEOUT, why
            settled(result)

        self._watch(end, told)
        return False

    async def wait_durable(self, end: int) -> bool:
        """Wait until bytes below ``end`` are durable; False after the policy's timeout."""
        if end <= self.flushed:
            return True
        done = anyio.Event()
        reasons: list[str | None] = []

        def told(why: str | None) -> None:
            reasons.append(why)
            done.set()

        self._watch(end, told)
        await done.wait()
        return reasons[0] is None

    async def settle(self, result: PutResult) -> PutResult:
        """A store's ``wait_durable``: ``result`` once its records are durable up to
        ``result.flush_to``; FLUSH_DISK_TIMEOUT after the policy's timeout."""
        if result.flush_to >= 0 and not await self.wait_durable(result.flush_to):
            result.status, result.remark = PutStatus.FLUSH_DISK_TIMEOUT, self._too_late()
        return result


def _tell(told: Callable[[str | None], None], why: str | None) -> None:
    try:
        told(why)
    except Exception:  # the flush and the deadline task must go on for the others
        log.exception("a put's durability callback failed")
