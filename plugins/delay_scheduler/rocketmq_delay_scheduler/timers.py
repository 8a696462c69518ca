"""Timer messages: deliver each parked message of rmq_sys_wheel_timer at its
``TIMER_OUT_MS``, skip the recalled ones, and keep what is finished across restarts.

One task does it all, so there are no races: read what was parked since last time into
the wheel, deliver the slots that are due, persist progress, sleep until the next slot
or a wake-up from the put hook. A restart reads the timer queue again from the
progress file's base and skips what it marks done.

Timers further off than the roll window are re-parked (a fresh copy) when the window
ends, so no pending timer's record is older than the window and the CommitLog's
retention never deletes one (RocketMQ's timer rolls the same way).

A recall parks a marker (``TIMER_DEL_UNIQKEY``) due with its target. Markers are read
as soon as they are parked, so their target is skipped whenever it comes due; a marker
is finished when its own slot is due, which keeps the recall alive across restarts.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskStatus

from rocketmq_core.errors import BodyError
from rocketmq_core.persist import atomic_write, read_optional
from rocketmq_core.protocol.constants import TIMER_TOPIC
from rocketmq_core.protocol.message import (
    RecordError,
    StoredMessage,
    decode_record,
)
from rocketmq_core.store.api import MessageToStore

from .checkpoint import TimerCheckpoint
from .delivery import delivered_message, now_ms
from .wheel import DoneLog, TimerWheel

if TYPE_CHECKING:
    from rocketmq_core.broker.app import Broker

log = logging.getLogger("rocketmq.timer")

READ_BATCH = 256
IDLE_CHECK = 1.0  # seconds the loop sleeps at most without a wake-up
PERSIST_INTERVAL = 1.0  # seconds between progress writes while timers fire
ERROR_PAUSE = 1.0
MAX_ROLL_WINDOW_MS = 24 * 3_600_000


class TimerService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        config = broker.config
        self.wheel = TimerWheel(config.timer_precision_ms)
        self.done = DoneLog()
        self.recalled: set[str] = set()  # UNIQ_KEYs of markers read and not yet finished
        # a third of the retention, so a parked record is re-parked long before it expires
        self.roll_window_ms = int(
            min(MAX_ROLL_WINDOW_MS, config.file_reserved_time * 3_600_000 / 3)
        )
        self.path = Path(config.store_path_root_dir) / "config" / "timerProgress"
        self.read_offset = 0  # the next timer-queue offset to read into the wheel
        self.delivered = 0
        self.rolled = 0
        self._wake = anyio.Event()
        self._last_persist = 0.0
        # what GET_TIMER_CHECK_POINT answers: the progress as last persisted, and when
        self.checkpoint = TimerCheckpoint(0, 0, 0, 0, progress=self.done.encode())

    def wake(self) -> None:
        """A timer was parked: read it into the wheel now (it may be due soonest)."""
        self._wake.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        if self.broker.config.is_slave:  # a master's service (HA.md §8)
            task_status.started()
            return
        self._load()
        self.read_offset = self.done.base
        try:
            await self._read_parked()  # everything still pending, before serving
            task_status.started()
            while True:
                try:
                    await self._turn()
                except Exception:  # a full disk must not stop the timers for good
                    log.exception("timer delivery failed; retrying in %ss", ERROR_PAUSE)
                    await anyio.sleep(ERROR_PAUSE)
        finally:
            with anyio.CancelScope(shield=True):
                await self._persist()

    # --- one turn ---------------------------------------------------------------------

    async def _turn(self) -> None:
        self._wake = anyio.Event()
        await self._read_parked()
        due = self.wheel.pop_due(now_ms())
        if due:
            await self._fire(due)
        if self.done.changed and time.monotonic() - self._last_persist >= PERSIST_INTERVAL:
            await self._persist()
        if due:
            return
        next_due = self.wheel.next_due()
        wait = IDLE_CHECK if next_due is None else min(IDLE_CHECK, (next_due - now_ms()) / 1000)
        if wait > 0:
            with anyio.move_on_after(wait):
                await self._wake.wait()

    async def _read_parked(self) -> None:
        """Put every record parked since the last read into the wheel."""
        store = self.broker.store
        while True:
            oldest = store.min_offset(TIMER_TOPIC, 0)
            if oldest > self.done.base:
                self.done.forget_below(oldest)  # expired from the store: nothing to keep
            self.read_offset = max(self.read_offset, oldest)
            if self.read_offset >= store.max_offset(TIMER_TOPIC, 0):
                return
            result = await store.get(
                TIMER_TOPIC, 0, self.read_offset, READ_BATCH, max_bytes=4 << 20
            )
            if not result.records:
                self.read_offset = max(self.read_offset + 1, result.next_begin_offset)
                continue
            now = now_ms()
            for record, offset in zip(result.records, result.queue_offsets, strict=True):
                self.read_offset = offset + 1
                if not self.done.is_done(offset):
                    self._schedule(record, offset, now)

    def _schedule(self, record: bytes | memoryview, offset: int, now: int) -> None:
        try:
            parked = decode_record(record)
            due = int(parked.properties["TIMER_OUT_MS"])
        except (RecordError, KeyError, ValueError) as exc:
            log.error("timer queue offset %d is unreadable (%s); dropped", offset, exc)
            self.done.mark(offset)
            return
        recall = parked.properties.get("TIMER_DEL_UNIQKEY")
        if recall is not None:
            self.recalled.add(recall)
        self.wheel.add(min(due, now + self.roll_window_ms), offset)

    async def _fire(self, offsets: list[int]) -> None:
        """Deliver a due slot; its recall markers are finished after its messages."""
        store = self.broker.store
        now = now_ms()
        markers = []
        for offset in offsets:
            result = await store.get(TIMER_TOPIC, 0, offset, 1)
            if not result.records:
                log.error("timer queue offset %d is gone from the store; dropped", offset)
                self.done.mark(offset)
                continue
            parked = decode_record(result.records[0])
            uniq_key = parked.properties.get("UNIQ_KEY")
            recall = parked.properties.get("TIMER_DEL_UNIQKEY")
            due = int(parked.properties["TIMER_OUT_MS"])
            if due > now + self.roll_window_ms:
                await self._put(_rolled(parked))  # still beyond the roll window: park anew
                self.rolled += 1
            elif due > now:
                self.wheel.add(due, offset)  # the end of its roll window: wait out the rest
                continue
            elif recall is not None:
                markers.append((offset, recall))
                continue  # finished after the slot's messages
            elif uniq_key in self.recalled:
                log.info("timer message %s was recalled; not delivered", uniq_key)
            else:
                await self._put(delivered_message(parked))
                self.delivered += 1
            self.done.mark(offset)
        for offset, recall in markers:
            self.recalled.discard(recall)
            self.done.mark(offset)

    async def _put(self, message: MessageToStore) -> None:
        result = await self.broker.put(message)
        if not result.status.stored:  # stored counts as delivered, slave or not
            raise RuntimeError(f"the store refused a timer message: {result.status.name}")

    # --- progress ---------------------------------------------------------------------

    def _load(self) -> None:
        data = read_optional(self.path)
        if data is None:
            return
        try:
            self.done = DoneLog.decode(data)
        except ValueError as exc:
            # the timers are still in the queue: read them all again, at worst twice
            log.error("%s is unreadable (%s); every parked timer is read again", self.path, exc)
            return
        self._checkpoint_progress(data)

    async def _persist(self) -> None:
        self._last_persist = time.monotonic()
        if not self.done.changed:
            return
        self.done.changed = False
        data = self.done.encode()
        await anyio.to_thread.run_sync(atomic_write, self.path, data)
        self._checkpoint_progress(data)

    def _checkpoint_progress(self, data: bytes) -> None:
        finished_below = self.done.base
        self.checkpoint = TimerCheckpoint(
            self._finished_before_ms(),
            0,  # no timer log here
            finished_below,
            finished_below,
            timestamp=now_ms(),
            counter=self.checkpoint.counter + 1,
            progress=data,
        )

    def _finished_before_ms(self) -> int:
        """Every timer due before this time is finished (Java's lastReadTimeMs): now, or
        the start of the earliest slot still waiting."""
        now = now_ms()
        next_due = self.wheel.next_due()
        return now if next_due is None else min(now, next_due - self.wheel.precision_ms)

    async def adopt_master_checkpoint(self, body: bytes) -> None:
        """A slave's sync: the master's timer progress, persisted as our own, so that this
        broker, once a master, delivers what the master had not finished and no more."""
        try:
            checkpoint = TimerCheckpoint.decode(body)
            if checkpoint.progress is None:
                raise ValueError(
                    "it carries no per-timer progress (a Java master's queue offsets count"
                    " what entered its timer log, not what it delivered)"
                )
            done = DoneLog.decode(checkpoint.progress)
        except ValueError as exc:
            raise BodyError(f"the master's timer checkpoint is not usable: {exc}") from None
        if checkpoint.progress != self.checkpoint.progress:
            await anyio.to_thread.run_sync(atomic_write, self.path, checkpoint.progress)
            self.done = done
        self.checkpoint = checkpoint

    def stats(self) -> dict[str, int]:
        return {
            "pending": len(self.wheel),
            "delivered": self.delivered,
            "rolled": self.rolled,
            "recalled": len(self.recalled),
        }


def _rolled(parked: StoredMessage) -> MessageToStore:
    """A fresh copy of a parked timer, to wait out the rest of its time."""
    properties = dict(parked.properties)
    properties["TIMER_ROLL_TIMES"] = str(int(properties.get("TIMER_ROLL_TIMES", "0")) + 1)
    return MessageToStore.again(
        parked, TIMER_TOPIC, 0, properties, tags_code=int(properties["TIMER_OUT_MS"])
    )
