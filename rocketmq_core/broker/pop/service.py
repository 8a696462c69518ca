"""PopService: POP, ACK, CHANGE_INVISIBLE_TIME, PEEK and NOTIFICATION as calls (POP.md).

The remoting processors and the gRPC proxy both call these methods; they raise
RequestRefused (a ResponseCode and a remark) for a request that cannot be served.
A POP reads each queue from the group's offset; for an ordinary POP it first appends a
checkpoint to the revive topic and then moves the group's offset past what it hands out,
so a message is either before the offset and in a checkpoint, or after it: none is lost.
"""

from __future__ import annotations

import itertools
import logging
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskStatus

from ...errors import RequestRefused
from ...protocol.codes import ResponseCode
from ...protocol.constants import Perm
from ...protocol.heartbeat import SubscriptionData
from ...protocol.message import decode_record
from ...store.api import GetResult, GetStatus, MessageToStore, PutResult, PutStatus
from ..ha.put import append_replicated, durable_and_replicated
from ..transaction_check import encoded_record
from .handles import (
    PopHandle,
    build_handle,
    msg_offset_entry,
    offset_info_entry,
    order_count_entry,
)
from .keys import ORDER_REVIVE_QUEUE, RETRY_QUEUE_NUMS, is_retry, pop_retry_topic, revive_topic
from .order import OrderTable
from .records import Ack, BatchAckEntry, Checkpoint, revive_record
from .revive import ReviveService
from .waiting import PopHoldService

if TYPE_CHECKING:
    from ..app import Broker

log = logging.getLogger("rocketmq.broker.pop")

MAX_POP_NUMS = 32
INIT_MODE_MIN = 0
# a held request rechecks this often whether the broker is stopping
HOLD_SLICE = 0.5
# a request whose client waited longer than its poll time plus this is answered at once
POLL_LATE_MS = 500
_RETRY_READ = {
    GetStatus.OFFSET_TOO_SMALL,
    GetStatus.OFFSET_OVERFLOW_BADLY,
    GetStatus.OFFSET_FOUND_NULL,
}
_SKIPPED = {
    GetStatus.NO_MATCHED_MESSAGE,
    GetStatus.OFFSET_FOUND_NULL,
    GetStatus.MESSAGE_WAS_REMOVING,
    GetStatus.NO_MATCHED_LOGIC_QUEUE,
}


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class PoppedMessage:
    record: bytes  # stored layout; a retry message re-encoded under the asked topic
    topic: str  # the real topic it was read from (a POP retry topic for a retry)
    queue_id: int
    queue_offset: int
    handle: str  # its POP_CK / receipt handle (without the proxy's commit-log field)


@dataclass(slots=True)
class PopResult:
    code: int  # SUCCESS, POLLING_TIMEOUT or POLLING_FULL
    pop_time: int
    invisible_time: int
    revive_qid: int
    rest_num: int = 0
    messages: list[PoppedMessage] = field(default_factory=list)
    start_offset_info: list[str] = field(default_factory=list)
    msg_offset_info: list[str] = field(default_factory=list)
    order_count_info: list[str] = field(default_factory=list)

    @property
    def body(self) -> bytes:
        return b"".join(message.record for message in self.messages)


@dataclass(slots=True)
class ChangedInvisible:
    pop_time: int
    invisible_time: int
    revive_qid: int
    handle: str  # the message's new handle: use it for the next ack or change


@dataclass(slots=True)
class RecordPut:
    """A revive record appended to the store: what may be left is its flush, a slave's
    ack of it, or (the store was busy) its append."""

    tag: str
    message: MessageToStore
    result: PutResult
    replica_end: int  # the CommitLog end a SYNC_MASTER waits for a slave to ack, or -1

    @property
    def busy(self) -> bool:
        """The store held the append back (RocksDB): ``PopService.settle`` retries it."""
        return self.result.status is PutStatus.OS_PAGE_CACHE_BUSY

    @property
    def settled(self) -> bool:
        """Nothing is left to wait for: ``result`` is the record's outcome."""
        return not self.busy and self.result.flush_to < 0 and self.replica_end < 0

    def stored(self, result: PutResult) -> bool:
        """Whether the record is stored (``result``: as settled); a failure is logged."""
        if not result.status.stored:
            log.error(
                "cannot append a POP %s record: %s %s", self.tag, result.status.name, result.remark
            )
        return result.status.stored


@dataclass(slots=True)
class _PopRequest:
    group: str
    topic: str
    max_nums: int
    invisible_time: int
    init_mode: int
    tags: frozenset[int] | None
    order: bool
    attempt_id: str | None
    pop_time: int
    revive_qid: int


class PopService:
    """The broker service "pop": the calls above, long polling, and the revive task."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.holds = PopHoldService(lambda holds: broker.store.add_dispatcher(holds))
        self.order = OrderTable()
        self.revive = ReviveService(broker, self._append_revive_record)
        self._busy: set[tuple[str, str, int]] = set()  # queues a POP is reading now
        self._ck_counter = itertools.count()

    @property
    def revive_topic(self) -> str:
        return revive_topic(self.broker.config.broker_cluster_name)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        try:
            if self.broker.config.is_slave:  # revive is a master's work (as Java's)
                task_status.started()
                await anyio.sleep_forever()
            self.broker.topics.create_if_missing(
                self.revive_topic, self.broker.config.revive_queue_num, int(Perm.READ | Perm.WRITE)
            )
            await self.revive.run(task_status=task_status)
        finally:
            self.holds.release_all()

    # --- POP --------------------------------------------------------------------------------

    async def pop(
        self,
        group: str,
        topic: str,
        queue_id: int = -1,
        *,
        max_nums: int = MAX_POP_NUMS,
        invisible_time: int = 60_000,
        poll_time: int = 0,
        born_time: int = 0,
        init_mode: int = 1,
        exp_type: str | None = None,
        exp: str | None = None,
        order: bool = False,
        attempt_id: str | None = None,
    ) -> PopResult:
        """Hand out up to ``max_nums`` messages of ``topic`` (``queue_id`` -1: any queue),
        invisible to others for ``invisible_time`` ms; with nothing to hand out, wait up
        to ``poll_time`` ms for some."""
        topic_config = self._readable_topic(topic, queue_id)
        self._consuming_group(group)
        if not 0 < max_nums <= MAX_POP_NUMS:
            raise RequestRefused(
                ResponseCode.INVALID_PARAMETER,
                f"maxMsgNums {max_nums} is out of range: POP takes 1 to {MAX_POP_NUMS} messages",
            )
        if invisible_time <= 0:
            raise RequestRefused(
                ResponseCode.INVALID_PARAMETER,
                f"invisibleTime {invisible_time} must be a positive number of milliseconds",
            )
        if exp_type not in (None, "", "TAG"):
            raise RequestRefused(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                f"expType {exp_type!r} is not supported by this broker: use TAG",
            )
        tags = SubscriptionData.of(topic, exp).tag_filter
        deadline = time.monotonic() + poll_time / 1000
        late = born_time > 0 and now_ms() - born_time - poll_time > POLL_LATE_MS
        while True:
            pop_time = now_ms()
            request = _PopRequest(
                group,
                topic,
                max_nums,
                invisible_time,
                init_mode,
                tags,
                order,
                attempt_id,
                pop_time,
                ORDER_REVIVE_QUEUE if order else self._next_revive_qid(),
            )
            result = await self._pop_once(request, topic_config.read_queue_nums, queue_id)
            if result.messages:
                return result
            remaining = deadline - time.monotonic()
            if poll_time <= 0 or late or remaining <= 0 or not self.broker.ready:
                result.code = ResponseCode.POLLING_TIMEOUT
                return result
            if self.holds.full(topic):
                result.code = ResponseCode.POLLING_FULL
                return result
            await self.holds.hold(topic, group, queue_id, min(remaining, HOLD_SLICE))

    async def _pop_once(self, request: _PopRequest, read_queues: int, queue_id: int) -> PopResult:
        result = PopResult(
            ResponseCode.SUCCESS, request.pop_time, request.invisible_time, request.revive_qid
        )
        queue_ids = [queue_id] if queue_id >= 0 else _rotated(read_queues)
        retry_topic = pop_retry_topic(
            request.topic, request.group, self.broker.config.enable_retry_topic_v2
        )
        retry_first = random.randrange(100) < self.broker.config.pop_from_retry_probability
        if retry_first and not request.order:
            await self._pop_topic(request, retry_topic, result)
        for qid in queue_ids:
            await self._pop_queue(request, request.topic, qid, result)
        if not retry_first and not request.order and len(result.messages) < request.max_nums:
            await self._pop_topic(request, retry_topic, result)
        return result

    async def _pop_topic(self, request: _PopRequest, topic: str, result: PopResult) -> None:
        config = self.broker.topics.get(topic)
        if config is not None:
            for qid in _rotated(config.read_queue_nums):
                await self._pop_queue(request, topic, qid, result)

    async def _pop_queue(
        self, request: _PopRequest, topic: str, queue_id: int, result: PopResult
    ) -> None:
        store = self.broker.store
        key = (topic, request.group, queue_id)
        offset = self._pop_offset(request.group, topic, queue_id, request.init_mode)
        wanted = request.max_nums - len(result.messages)
        if key in self._busy or wanted <= 0:
            result.rest_num += max(0, store.max_offset(topic, queue_id) - offset)
            return
        if request.order and self.order.blocked(key, request.attempt_id, request.pop_time):
            return
        self._busy.add(key)
        try:
            tags = None if is_retry(topic) else request.tags
            got = await store.get(topic, queue_id, offset, wanted, tags)
            if got.status in _RETRY_READ and got.next_begin_offset != offset:
                # the offset fell out of the queue's range: start where the store says
                offset = got.next_begin_offset
                self.broker.offsets.commit(request.group, topic, queue_id, offset)
                got = await store.get(topic, queue_id, offset, wanted, tags)
            result.rest_num += max(0, got.max_offset - got.next_begin_offset)
            if got.records:
                await self._hand_out(request, topic, queue_id, offset, got, result)
            elif got.status in _SKIPPED and got.next_begin_offset > offset:
                self.broker.offsets.commit(request.group, topic, queue_id, got.next_begin_offset)
        finally:
            self._busy.discard(key)

    async def _hand_out(
        self,
        request: _PopRequest,
        topic: str,
        queue_id: int,
        offset: int,
        got: GetResult,
        result: PopResult,
    ) -> None:
        broker_name = self.broker.config.broker_name
        key = (topic, request.group, queue_id)
        if request.order:
            counts = self.order.popped(
                key,
                got.queue_offsets,
                request.attempt_id,
                request.pop_time,
                request.invisible_time,
            )
            for queue_offset, count in counts.items():
                result.order_count_info.append(
                    order_count_entry(topic, queue_id, queue_offset, count)
                )
            result.order_count_info.append(
                offset_info_entry(topic, queue_id, min(counts.values(), default=0))
            )
        else:
            checkpoint = Checkpoint(
                offset,
                request.pop_time,
                request.invisible_time,
                queue_id,
                topic,
                request.group,
                broker_name,
                [queue_offset - offset for queue_offset in got.queue_offsets],
            )
            if not await self._append_revive_record(
                request.revive_qid, "ck", checkpoint.encode(), checkpoint.unique_key()
            ):
                return  # not handed out: the offset stays, the messages come next time
            self.broker.offsets.commit(request.group, topic, queue_id, got.next_begin_offset)
        result.start_offset_info.append(offset_info_entry(topic, queue_id, offset))
        result.msg_offset_info.append(msg_offset_entry(topic, queue_id, got.queue_offsets))
        for record, queue_offset in zip(got.records, got.queue_offsets, strict=True):
            handle = build_handle(
                offset,
                request.pop_time,
                request.invisible_time,
                request.revive_qid,
                topic,
                broker_name,
                queue_id,
                queue_offset,
            )
            data = bytes(record)
            if is_retry(topic):  # handed out under the topic the client asked for
                message = decode_record(data)
                message.properties.setdefault("POP_CK", handle)
                message.topic = request.topic
                data = encoded_record(message)
            result.messages.append(PoppedMessage(data, topic, queue_id, queue_offset, handle))
        self.broker.stats.count_get(request.group, topic, got)

    def _pop_offset(self, group: str, topic: str, queue_id: int, init_mode: int) -> int:
        offset = self.broker.offsets.query(group, topic, queue_id)
        if offset >= 0:
            return offset
        store = self.broker.store
        if init_mode == INIT_MODE_MIN or is_retry(topic) or store.min_offset(topic, queue_id) <= 0:
            offset = store.min_offset(topic, queue_id)
        else:
            offset = max(0, store.max_offset(topic, queue_id) - 1)
        self.broker.offsets.commit(group, topic, queue_id, offset)
        return offset

    def _next_revive_qid(self) -> int:
        return next(self._ck_counter) % self.broker.config.revive_queue_num

    def _put_revive_record(
        self, revive_qid: int, tag: str, body: bytes, unique_key: str
    ) -> RecordPut:
        """Append a revive record as Broker.put stores what the broker makes itself, but
        without waiting: ``settle`` waits for what is left, when anything is."""
        message = revive_record(
            self.revive_topic,
            revive_qid,
            tag,
            body,
            unique_key,
            now_ms(),
            self.broker.store.config.store_host,
        )
        put = RecordPut(tag, message, *append_replicated(self.broker, message))
        if not put.busy:  # a busy one is counted when settle appends it again
            self.broker.stats.count_stored(message, put.result)
        return put

    async def settle(self, put: RecordPut) -> PutResult:
        """``put``'s result once flushed and replicated as the broker's policy says; a
        busy store's append retried as Broker.put retries it."""
        if put.busy:  # appended again (with HA once, as put_replicated appends)
            return await self.broker.put(put.message)
        return await durable_and_replicated(self.broker, put.result, put.replica_end)

    async def _append_revive_record(
        self, revive_qid: int, tag: str, body: bytes, unique_key: str
    ) -> bool:
        put = self._put_revive_record(revive_qid, tag, body, unique_key)
        return put.stored(await self.settle(put))

    # --- ACK --------------------------------------------------------------------------------

    def ack(
        self, group: str, topic: str, queue_id: int, extra_info: str, offset: int
    ) -> RecordPut | None:
        """Acknowledge the message at ``offset``: ``topic`` is the real one (the handle's
        retry flag applied), as 4.x/5.x clients send it. Returns the ack record appended,
        for the caller to answer once ``settle``d (``RecordPut.stored``), or None when the
        ack is done (a FIFO message's: nothing is stored)."""
        handle = PopHandle.parse(extra_info)
        topic = handle.real_topic(topic, group)
        self._acked_offset_in_range(topic, queue_id, offset)
        if handle.orderly:
            self._ack_orderly(group, topic, queue_id, offset)
            return None
        self._check_revive_qid(handle.revive_qid)
        ack = Ack(
            [offset],
            handle.ck_queue_offset,
            group,
            topic,
            queue_id,
            handle.pop_time,
            handle.broker_name,
        )
        return self._put_revive_record(handle.revive_qid, ack.tag, ack.encode(), ack.unique_key())

    async def batch_ack(self, broker_name: str, entries: list[BatchAckEntry]) -> None:
        for entry in entries:
            topic = PopHandle(0, 0, 0, 0, entry.retry, "", 0).real_topic(entry.topic, entry.group)
            offsets = [entry.start_offset + index for index in entry.indexes]
            if not offsets:
                continue
            if entry.revive_qid == ORDER_REVIVE_QUEUE:
                for offset in offsets:
                    self._ack_orderly(entry.group, topic, entry.queue_id, offset)
                continue
            self._check_revive_qid(entry.revive_qid)
            ack = Ack(
                offsets,
                entry.start_offset,
                entry.group,
                topic,
                entry.queue_id,
                entry.pop_time,
                broker_name or self.broker.config.broker_name,
            )
            if not await self._append_revive_record(
                entry.revive_qid, ack.tag, ack.encode(), ack.unique_key()
            ):
                raise RequestRefused(
                    ResponseCode.SYSTEM_ERROR, "the ack could not be stored; retry"
                )

    def _ack_orderly(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        commit = self.order.ack((topic, group, queue_id), offset)
        if commit > self.broker.offsets.query(group, topic, queue_id):
            self.broker.offsets.commit(group, topic, queue_id, commit)
        self.holds.notify(topic, group)  # the queue may be free for the next batch

    # --- CHANGE_INVISIBLE_TIME --------------------------------------------------------------

    async def change_invisible(
        self,
        group: str,
        topic: str,
        queue_id: int,
        extra_info: str,
        offset: int,
        invisible_time: int,
    ) -> ChangedInvisible:
        """Make the message at ``offset`` visible again ``invisible_time`` ms from now."""
        handle = PopHandle.parse(extra_info)
        topic = handle.real_topic(topic, group)
        self._acked_offset_in_range(topic, queue_id, offset)
        now = now_ms()
        if handle.orderly:
            self.order.change_invisible((topic, group, queue_id), offset, now + invisible_time)
            new_handle = build_handle(
                offset,
                now,
                invisible_time,
                ORDER_REVIVE_QUEUE,
                topic,
                handle.broker_name,
                queue_id,
                offset,
            )
            return ChangedInvisible(now, invisible_time, ORDER_REVIVE_QUEUE, new_handle)
        self._check_revive_qid(handle.revive_qid)
        # never in the POP's own millisecond: a checkpoint is named by its queue, start
        # offset and pop time, and the ack of the old one below would cancel the new one
        # too (a change of the batch's first message right after the POP)
        now = max(now, handle.pop_time + 1)
        # a one-message checkpoint for the new time first, then the old one acked
        checkpoint = Checkpoint(
            offset, now, invisible_time, queue_id, topic, group, handle.broker_name, [0]
        )
        if not await self._append_revive_record(
            handle.revive_qid, "ck", checkpoint.encode(), checkpoint.unique_key()
        ):
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR, "the new checkpoint could not be stored"
            )
        ack = Ack(
            [offset],
            handle.ck_queue_offset,
            group,
            topic,
            queue_id,
            handle.pop_time,
            handle.broker_name,
        )
        if not await self._append_revive_record(
            handle.revive_qid, ack.tag, ack.encode(), ack.unique_key()
        ):
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                f"the new invisible time of {topic}:{queue_id}@{offset} is stored but the old"
                " one could not be cancelled (the revive topic refused the ack): the message"
                " may come back at both times; retry the change with the same handle",
            )
        new_handle = build_handle(
            offset,
            now,
            invisible_time,
            handle.revive_qid,
            topic,
            handle.broker_name,
            queue_id,
            offset,
        )
        return ChangedInvisible(now, invisible_time, handle.revive_qid, new_handle)

    # --- PEEK, NOTIFICATION, POLLING_INFO ---------------------------------------------------

    async def peek(self, group: str, topic: str, queue_id: int, max_nums: int) -> list[bytes]:
        """Up to ``max_nums`` messages a POP would hand out next; nothing changes."""
        config = self._readable_topic(topic, queue_id)
        self._consuming_group(group)
        records: list[bytes] = []
        sources = self._sources(group, topic, config.read_queue_nums, queue_id, with_retry=True)
        for source, qid in sources:
            if len(records) >= max_nums:
                break
            offset = self._next_offset(group, source, qid)
            got = await self.broker.store.get(source, qid, offset, max_nums - len(records))
            records.extend(bytes(record) for record in got.records)
        return records

    async def notification(
        self,
        group: str,
        topic: str,
        queue_id: int = -1,
        *,
        poll_time: int = 0,
        order: bool = False,
        attempt_id: str | None = None,
    ) -> tuple[bool, bool]:
        """(has a message to POP, polling full), waiting up to ``poll_time`` ms for one."""
        config = self._readable_topic(topic, queue_id)
        self._consuming_group(group)
        deadline = time.monotonic() + poll_time / 1000
        while True:
            if self._has_message(group, topic, config.read_queue_nums, queue_id, order, attempt_id):
                return True, False
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.broker.ready:
                return False, False
            if self.holds.full(topic):
                return False, True
            await self.holds.hold(topic, group, queue_id, min(remaining, HOLD_SLICE))

    def polling_info(self, group: str, topic: str, queue_id: int) -> int:
        self._readable_topic(topic, queue_id)
        return self.holds.count(topic, group, queue_id)

    def _has_message(
        self,
        group: str,
        topic: str,
        read_queues: int,
        queue_id: int,
        order: bool,
        attempt_id: str | None,
    ) -> bool:
        now = now_ms()
        for source, qid in self._sources(group, topic, read_queues, queue_id, with_retry=not order):
            if order and self.order.blocked((source, group, qid), attempt_id, now):
                continue
            if self._next_offset(group, source, qid) < self.broker.store.max_offset(source, qid):
                return True
        return False

    def _sources(
        self, group: str, topic: str, read_queues: int, queue_id: int, with_retry: bool
    ) -> list[tuple[str, int]]:
        """The queues a POP of ``topic`` reads (``queue_id`` -1: all), then the queues of
        the group's POP retry topic when it has one and ``with_retry``."""
        sources = [(topic, qid) for qid in ([queue_id] if queue_id >= 0 else range(read_queues))]
        retry = self.broker.topics.get(
            pop_retry_topic(topic, group, self.broker.config.enable_retry_topic_v2)
        )
        if retry is not None and with_retry:
            sources += [(retry.topic_name, qid) for qid in range(retry.read_queue_nums)]
        return sources

    def _next_offset(self, group: str, topic: str, queue_id: int) -> int:
        """Where the group's next POP of the queue starts; nothing is committed (unlike
        ``_pop_offset``): a group that never popped it starts at its first message."""
        offset = self.broker.offsets.query(group, topic, queue_id)
        return offset if offset >= 0 else self.broker.store.min_offset(topic, queue_id)

    # --- checks ---------------------------------------------------------------------------

    def _readable_topic(self, topic: str, queue_id: int):
        self.broker.check_ready()
        if not self.broker.config.broker_permission & Perm.READ:
            raise RequestRefused(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.broker.config.broker_ip1}] popping message is forbidden",
            )
        config = self.broker.topics.get(topic)
        if config is None:
            raise RequestRefused(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not config.perm & Perm.READ:
            raise RequestRefused(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] popping message is forbidden"
            )
        if queue_id >= config.read_queue_nums:
            raise RequestRefused(
                ResponseCode.INVALID_PARAMETER,
                f"queueId {queue_id} is out of range: topic {topic} has"
                f" {config.read_queue_nums} read queues (-1 pops any)",
            )
        return config

    def _consuming_group(self, group: str) -> None:
        config = self.broker.groups.require(group)
        if not config.consume_enable:
            raise RequestRefused(
                ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}"
            )

    def _acked_offset_in_range(self, topic: str, queue_id: int, offset: int) -> None:
        config = self.broker.topics.get(topic)
        if config is None:
            raise RequestRefused(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not 0 <= queue_id < config.read_queue_nums:
            raise RequestRefused(
                ResponseCode.MESSAGE_ILLEGAL,
                f"queueId {queue_id} is out of range: topic {topic} has"
                f" {config.read_queue_nums} read queues",
            )
        low = self.broker.store.min_offset(topic, queue_id)
        high = self.broker.store.max_offset(topic, queue_id)
        if not low <= offset < high:
            raise RequestRefused(
                ResponseCode.NO_MESSAGE,
                f"offset {offset} is not in queue {topic}:{queue_id}"
                f" (it holds {low} to {high - 1})",
            )

    def _check_revive_qid(self, revive_qid: int) -> None:
        if not 0 <= revive_qid < self.broker.config.revive_queue_num:
            raise RequestRefused(
                ResponseCode.INVALID_PARAMETER,
                f"the handle's reviveQid {revive_qid} is not a revive queue of this broker"
                f" (0 to {self.broker.config.revive_queue_num - 1}, or 999 for orderly)",
            )


def _rotated(count: int) -> list[int]:
    """Queue ids 0..count-1 from a random start, so POPs share the queues out."""
    start = random.randrange(count) if count > 0 else 0
    return [(start + i) % count for i in range(count)]


__all__ = ["RETRY_QUEUE_NUMS", "ChangedInvisible", "PopResult", "PopService", "PoppedMessage"]
