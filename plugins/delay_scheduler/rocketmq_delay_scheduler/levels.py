"""Delay levels: one task per level moves due messages from SCHEDULE_TOPIC_XXXX back to
their topic (Java's ScheduleMessageService, STORE.md §8.1).

A level's queue is in due order (one delay per level), so each task reads its queue
from the level's offset and sleeps until the head is due. The offsets are kept in
config/delayOffset.json, in Java's shape, every ``flushDelayOffsetInterval`` and at stop.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskStatus

from rocketmq_core.broker.config_files import ConfigFile
from rocketmq_core.errors import BodyError
from rocketmq_core.persist import write_config_file
from rocketmq_core.protocol import fastjson
from rocketmq_core.protocol.constants import SCHEDULE_TOPIC
from rocketmq_core.protocol.message import RecordError, decode_record

from .delivery import delay_levels, delivered_message, now_ms

if TYPE_CHECKING:
    from rocketmq_core.broker.app import Broker

log = logging.getLogger("rocketmq.delay")

READ_BATCH = 64
IDLE_CHECK = 1.0  # seconds an idle level waits for a wake-up before it looks again
ERROR_PAUSE = 10.0  # after a failed delivery, as Java's ScheduleMessageService


class DelayOffsetTable(ConfigFile):
    """config/delayOffset.json: ``{"offsetTable":{1:5,...}}``, level -> next offset."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.offsets: dict[int, int] = {}

    def load(self) -> None:
        table = self.read("a delay offset table", _parse_offset_table)
        if table is not None:
            self.offsets = table

    def advance(self, level: int, offset: int) -> None:
        if self.offsets.get(level) != offset:
            self.offsets[level] = offset
            self._dirty = True

    def encode(self) -> bytes:
        # fastjson's default form, as Java writes it: the levels as bare integer keys
        return fastjson.dumps({"offsetTable": self.offsets}, standard=False)


def _parse_offset_table(value: Any) -> dict[int, int]:
    return {int(level): int(offset) for level, offset in value["offsetTable"].items()}


class DelayLevelService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.levels_ms = delay_levels(broker.config)
        root = Path(broker.config.store_path_root_dir)
        self.table = DelayOffsetTable(str(root / "config" / "delayOffset.json"))
        self.delivered = 0
        self._wakes: dict[int, anyio.Event] = {}

    def wake(self, level: int) -> None:
        """A message was parked at ``level``: its task looks at once if it was idle."""
        event = self._wakes.get(level)
        if event is not None:
            event.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self.table.load()
        if self.broker.config.is_slave:  # a master's service (HA.md §8); the sync fills the table
            task_status.started()
            return
        try:
            async with anyio.create_task_group() as group:
                for level in range(1, len(self.levels_ms) + 1):
                    group.start_soon(self._deliver_level, level)
                group.start_soon(self._persist_periodically)
                task_status.started()
        finally:
            with anyio.CancelScope(shield=True):
                await self.table.persist()

    async def adopt_master_offsets(self, text: bytes) -> None:
        """A slave's sync (HA.md §5): the master's delayOffset.json, kept as it came."""
        try:
            offsets = _parse_offset_table(fastjson.loads(text))
        except (ValueError, AttributeError, TypeError, KeyError) as exc:
            raise BodyError(
                f"the master's delay offsets are not a delay offset table: {exc}"
            ) from None
        if offsets == self.table.offsets:
            return  # as at the last sync (what this slave holds on disk): nothing to write
        await anyio.to_thread.run_sync(write_config_file, self.table.path, text)
        self.table.offsets = offsets

    async def _persist_periodically(self) -> None:
        while True:
            await anyio.sleep(self.broker.config.flush_delay_offset_interval / 1000)
            await self.table.persist()

    async def _deliver_level(self, level: int) -> None:
        while True:
            try:
                await self._deliver_due(level)
            except Exception:  # a bad record or a full disk must not stop the level
                log.exception(
                    "delay level %d: delivery failed; retrying in %ss", level, ERROR_PAUSE
                )
                await anyio.sleep(ERROR_PAUSE)

    async def _deliver_due(self, level: int) -> None:
        """Deliver what is due at ``level``; return when idle or the head is not due."""
        store = self.broker.store
        queue_id = level - 1
        delay_ms = self.levels_ms[level - 1]
        self._wakes[level] = wake = anyio.Event()
        offset = self.table.offsets.get(level, 0)
        # within what the queue holds: its old files may be gone, or the store replaced
        offset = min(
            max(offset, store.min_offset(SCHEDULE_TOPIC, queue_id)),
            store.max_offset(SCHEDULE_TOPIC, queue_id),
        )
        result = await store.get(SCHEDULE_TOPIC, queue_id, offset, READ_BATCH, max_bytes=1 << 20)
        if not result.records:
            self.table.advance(level, offset)
            with anyio.move_on_after(IDLE_CHECK):
                await wake.wait()
            return
        for record, queue_offset in zip(result.records, result.queue_offsets, strict=True):
            try:
                parked = decode_record(record)
            except RecordError as exc:
                log.error(
                    "delay level %d: offset %d is unreadable (%s); skipped",
                    level,
                    queue_offset,
                    exc,
                )
                self.table.advance(level, queue_offset + 1)
                continue
            now = now_ms()
            due = parked.store_timestamp + delay_ms
            if due > now + delay_ms:
                due = now  # the clock went back: do not hold it longer than its delay
            while now < due:  # a loop: timers may wake a millisecond early
                await anyio.sleep((due - now) / 1000)
                now = now_ms()
            put = await self.broker.put(delivered_message(parked))
            if not put.status.stored:  # stored counts as delivered, slave or not
                raise RuntimeError(
                    f"the store refused the delivery: {put.status.name} {put.remark}"
                )
            self.delivered += 1
            self.table.advance(level, queue_offset + 1)
