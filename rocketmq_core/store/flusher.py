"""The Flusher: runs a FlushPolicy against one log, off the event loop.

``sync(upto)`` is the store's blocking "make bytes up to ``upto`` durable" (fdatasync
of mapped files, a WAL sync, ...); it runs in a worker thread. Puts that must wait
register with ``wait_durable``; every waiter that arrives while a flush runs is
covered by the next one, so concurrent puts share one fdatasync (group commit).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio
from anyio.abc import TaskStatus

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
        self._waiters: list[tuple[int, anyio.Event]] = []
        self._wakeup: anyio.Event | None = None
        self._lock: anyio.Lock | None = None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Flush as the policy says, until cancelled."""
        self._wakeup = anyio.Event()
        task_status.started()
        while True:
            dirty = self._written() - self.flushed
            delay = self.policy.delay(dirty, self._clock() - self._last_flush, len(self._waiters))
            if delay > 0:
                with anyio.move_on_after(delay):
                    await self._wakeup.wait()
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
            self._last_flush = self._clock()
            self._wake_covered()

    def _wake_covered(self) -> None:
        if not self._waiters:
            return
        still_waiting = []
        for end, event in self._waiters:
            if end <= self.flushed:
                event.set()
            else:
                still_waiting.append((end, event))
        self._waiters = still_waiting

    async def wait_durable(self, end: int) -> bool:
        """Wait until bytes below ``end`` are durable; False after the policy's timeout."""
        if end <= self.flushed:
            return True
        event = anyio.Event()
        self._waiters.append((end, event))
        if self._wakeup is not None:
            self._wakeup.set()
        with anyio.move_on_after(self.policy.timeout):
            await event.wait()
        if end > self.flushed:
            self._waiters = [(e, ev) for e, ev in self._waiters if ev is not event]
            return False
        return True
