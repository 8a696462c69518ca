"""The revive task (POP.md §5): messages popped but not acked in time come back.

It reads every revive queue in order from the offset of group CID_RMQ_SYS_REVIVE_GROUP,
keeping each checkpoint until all of its messages are acked (then it is forgotten) or
its invisible time is over (then each unacked message is put again: to the group's POP
retry topic with one more reconsume time, or to %DLQ%group once it has been retried
retryMaxTimes). The group's offset in a revive queue stays at the oldest checkpoint
still open, so after a restart or a kill -9 reading resumes there and nothing unacked
is forgotten.

Checkpoints later in the queue than that offset may have been revived already: after
putting a checkpoint's messages back, the task appends an ack of them to the
checkpoint's revive queue (its marker), so reading the queue again closes the
checkpoint instead of reviving it twice. Java needs no marker (it delays each checkpoint
to its revive time, so a queue is revived in order); ours are appended at once. The one
duplicate left: a crash (or a refused append) between a put-back and its marker brings
those messages back once more after the restart.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskStatus

from ...protocol.constants import DLQ_GROUP_TOPIC_PREFIX, Perm
from ...protocol.message import RecordError, decode_record
from ...store.api import MessageToStore
from ..processors.retry import dead_letter_topic
from .keys import (
    ACK_TAG,
    BATCH_ACK_TAG,
    CK_TAG,
    RETRY_QUEUE_NUMS,
    REVIVE_GROUP,
    is_retry,
    normal_topic,
    pop_retry_topic,
    revive_topic,
)
from .records import Ack, Checkpoint, RecordFormatError

if TYPE_CHECKING:
    from ..app import Broker

log = logging.getLogger("rocketmq.broker.pop")

SCAN_INTERVAL = 0.2  # seconds between two reads of the revive queues
READ_BATCH = 256
PUT_BACK_RETRY_MS = 5_000  # a message the store refused to take back is tried again after
MARKER_GRACE = 2.0  # seconds a stopping broker waits for the marker of what it put back
DEFAULT_RETRY_MAX_TIMES = 16
FIRST_POP_TIME = "1ST_POP_TIME"
CheckpointKey = tuple[str, int, int, str, int, str]
# appends a record (revive qid, tag, body, unique key) to the revive topic; False if refused
AppendRecord = Callable[[int, str, bytes, str], Awaitable[bool]]


@dataclass(slots=True)
class _Open:
    checkpoint: Checkpoint
    revive_qid: int
    record_offset: int  # where the checkpoint is in its revive queue
    acked: set[int] = field(default_factory=set)  # indexes into the checkpoint's messages
    retry_at: int = 0  # after a refused put-back: not before this time (ms)

    @property
    def done(self) -> bool:
        return len(self.acked) >= len(self.checkpoint.diffs)


class ReviveService:
    def __init__(self, broker: Broker, append_record: AppendRecord) -> None:
        self.broker = broker
        self._append_record = append_record
        # open checkpoints by key; a list, since a key may come twice (a checkpoint written
        # again with the same pop time): replacing the first would lose its messages
        self._open: dict[CheckpointKey, list[_Open]] = {}
        self._read_to: dict[int, int] = {}  # revive qid -> next offset to read
        self.revived = 0  # messages put back (a counter for tests and stats)
        self._scanning = anyio.Lock()  # one scan at a time: a checkpoint is revived once

    @property
    def topic(self) -> str:
        return revive_topic(self.broker.config.broker_cluster_name)

    @property
    def open_checkpoints(self) -> int:
        return sum(len(entries) for entries in self._open.values())

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        store = self.broker.store
        for qid in range(self.broker.config.revive_queue_num):
            committed = self.broker.offsets.query(REVIVE_GROUP, self.topic, qid)
            self._read_to[qid] = max(committed, store.min_offset(self.topic, qid))
        task_status.started()
        while True:
            try:
                await self.scan()
            except Exception:  # a bad record or a full disk must not end reviving
                log.exception("a POP revive round failed; retrying")
            await anyio.sleep(SCAN_INTERVAL)

    async def scan(self, now_ms: int | None = None) -> int:
        """Read what is new, put back what is due; returns how many messages came back."""
        async with self._scanning:
            return await self._scan(now_ms)

    async def _scan(self, now_ms: int | None) -> int:
        for qid in list(self._read_to):
            await self._read(qid)
        now = int(time.time() * 1000) if now_ms is None else now_ms
        revived = 0
        for key, entries in list(self._open.items()):
            for entry in list(entries):
                if not entry.done and max(entry.checkpoint.revive_time, entry.retry_at) <= now:
                    revived += await self._revive(entry, now)
            # a message that could not be put back keeps its entry open: tried again
            entries[:] = [entry for entry in entries if not entry.done]
            if not entries:
                del self._open[key]
        self._commit()
        if revived:
            self.revived += revived
            # the retry topic it may have made, and the offsets: a crash now neither hides
            # the retry nor makes the next start read the markers again
            await self.broker.topics.persist()
            await self.broker.offsets.persist()
        return revived

    async def _read(self, qid: int) -> None:
        store = self.broker.store
        while True:
            offset = self._read_to[qid]
            got = await store.get(self.topic, qid, offset, READ_BATCH)
            if not got.records:
                if got.next_begin_offset > offset:
                    self._read_to[qid] = got.next_begin_offset
                return
            for record, record_offset in zip(got.records, got.queue_offsets, strict=True):
                self._apply(qid, record, record_offset)
            self._read_to[qid] = got.next_begin_offset

    def _apply(self, qid: int, record: bytes | memoryview, record_offset: int) -> None:
        try:
            message = decode_record(record)
            tag = message.properties.get("TAGS")
            if tag == CK_TAG:
                checkpoint = Checkpoint.decode(message.body)
                if checkpoint.diffs:
                    entries = self._open.setdefault(checkpoint.key, [])
                    if entries:
                        log.warning(
                            "POP checkpoint %s shares its key with another still open: both"
                            " are kept",
                            checkpoint.unique_key(),
                        )
                    entries.append(_Open(checkpoint, qid, record_offset))
            elif tag in (ACK_TAG, BATCH_ACK_TAG):
                ack = Ack.decode(message.body)
                # none: its checkpoint is done or revived already
                for entry in self._open.get(ack.key, ()):
                    for offset in ack.ack_offsets:
                        index = entry.checkpoint.index_of(offset)
                        if index >= 0:
                            entry.acked.add(index)
        except (RecordError, RecordFormatError) as exc:
            log.warning("skipping revive record %s:%d: %s", qid, record_offset, exc)

    def _commit(self) -> None:
        oldest: dict[int, int] = {}
        for entries in self._open.values():
            for entry in entries:
                qid = entry.revive_qid
                oldest[qid] = min(oldest.get(qid, entry.record_offset), entry.record_offset)
        offsets = self.broker.offsets
        for qid, read_to in self._read_to.items():
            progress = oldest.get(qid, read_to)
            # nothing read yet (no POP ever here): no offset entry, as before POP existed
            if progress != offsets.query(REVIVE_GROUP, self.topic, qid) and progress > 0:
                offsets.commit(REVIVE_GROUP, self.topic, qid, progress)

    async def _revive(self, entry: _Open, now: int) -> int:
        """Put back the unacked messages of a due checkpoint, then its marker; those put
        back (or gone) count as acked, so the entry is done once all are."""
        checkpoint = entry.checkpoint
        revived = 0
        settled: list[int] = []  # offsets put back or gone: the marker acks them
        try:
            for index, offset in enumerate(checkpoint.offsets):
                if index in entry.acked:
                    continue
                store = self.broker.store
                got = await store.get(checkpoint.topic, checkpoint.queue_id, offset, 1)
                if not got.records or got.queue_offsets[0] != offset:
                    log.warning(
                        "POP message %s:%d@%d is gone from the store; it cannot come back",
                        checkpoint.topic,
                        checkpoint.queue_id,
                        offset,
                    )
                elif await self._put_back(checkpoint, bytes(got.records[0])):
                    revived += 1
                else:
                    entry.retry_at = now + PUT_BACK_RETRY_MS  # stays unacked: tried again
                    continue
                entry.acked.add(index)
                settled.append(offset)
                # back once: another open checkpoint of the key holding it (its marker
                # says the same on the next read) does not put it back again
                for other in self._open.get(checkpoint.key, ()):
                    other_index = other.checkpoint.index_of(offset)
                    if other_index >= 0:
                        other.acked.add(other_index)
        finally:
            if settled:  # also when stopping or failing midway: what is back stays back
                with anyio.move_on_after(MARKER_GRACE, shield=True):
                    await self._append_marker(entry, settled)
        return revived

    async def _append_marker(self, entry: _Open, offsets: list[int]) -> None:
        checkpoint = entry.checkpoint
        marker = Ack(
            offsets,
            checkpoint.start_offset,
            checkpoint.group,
            checkpoint.topic,
            checkpoint.queue_id,
            checkpoint.pop_time,
            checkpoint.broker_name,
        )
        if not await self._append_record(
            entry.revive_qid, marker.tag, marker.encode(), marker.unique_key()
        ):
            log.error(
                "the revive marker of POP checkpoint %s was refused: its messages come back"
                " once more if the broker restarts while an older checkpoint of revive queue"
                " %d is still open",
                checkpoint.unique_key(),
                entry.revive_qid,
            )

    async def _put_back(self, checkpoint: Checkpoint, record: bytes) -> bool:
        message = decode_record(record)
        group = self.broker.groups.find(checkpoint.group)
        limit = group.retry_max_times if group is not None else DEFAULT_RETRY_MAX_TIMES
        properties = dict(message.properties)
        if message.reconsume_times == 0 or FIRST_POP_TIME not in properties:
            properties[FIRST_POP_TIME] = str(checkpoint.pop_time)
        if message.reconsume_times >= limit:
            topic = dead_letter_topic(self.broker, checkpoint.group)
        elif is_retry(checkpoint.topic):
            topic = checkpoint.topic
        else:
            topic = pop_retry_topic(
                checkpoint.topic, checkpoint.group, self.broker.config.enable_retry_topic_v2
            )
            self.broker.topics.create_if_missing(
                topic, RETRY_QUEUE_NUMS, int(Perm.READ | Perm.WRITE)
            )
        again = MessageToStore.again(
            message, topic, 0, properties, reconsume_times=message.reconsume_times + 1
        )
        stored = await self.broker.put(again)
        if not stored.status.stored:
            log.error("cannot put back POP message to %s: %s", topic, stored.status.name)
        elif topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            original = normal_topic(checkpoint.topic, checkpoint.group)
            self.broker.stats.count_dead_letter(checkpoint.group, original)
        return stored.status.stored
