"""Admin requests on queue offsets: a group's reset by time, and a queue's min, max
and by-timestamp offsets (SEARCH_OFFSET_BY_TIMESTAMP, GET_MIN/MAX_OFFSET)."""

from __future__ import annotations

from ...protocol.bodies import ConsumeStats as BrokerConsumeStats
from ...protocol.bodies import ResetOffsetBody
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.headers import (
    GetConsumeStatsRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    OffsetResponseHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from ...protocol.heartbeat import MessageQueue
from ..admin_types import AdminError, QueueOffset, ResetOffsetResult
from ..instance import Header
from .base import AdminBase, queue_name

LATEST = -1  # reset_offset_by_time: to the end of every queue (Java's -1)


class OffsetAdmin(AdminBase):
    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> ResetOffsetResult:
        """Move ``group``'s offsets on ``topic`` to the first message stored at or after
        ``timestamp_ms`` (LATEST: the end). Each broker tells the group's online
        consumers (INVOKE_BROKER_TO_RESET_OFFSET); where the group is offline, the
        offsets are committed directly (mqadmin's resetOffsetByTimeOld). Without
        ``force`` an offset only ever moves back."""
        result = ResetOffsetResult(group, topic, timestamp_ms)
        header = ResetOffsetRequestHeader(
            group=group, topic=topic, timestamp=timestamp_ms, is_force=force
        )
        for name, address in await self._route_masters(topic):
            what = f"resetting the offsets of {group!r} on {topic!r} on {name}"
            try:
                response = await self._broker(
                    address, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header, what=what
                )
            except AdminError as exc:
                if not _group_offline(exc):
                    raise
                result.offsets += await self._reset_offline(
                    name, address, group, topic, timestamp_ms, force
                )
                continue
            offsets = ResetOffsetBody.decode(response.body).offset_table if response.body else {}
            result.offsets += [
                QueueOffset(queue, offset, True) for queue, offset in sorted(offsets.items())
            ]
        return result

    async def _reset_offline(
        self, name: str, address: str, group: str, topic: str, timestamp: int, force: bool
    ) -> list[QueueOffset]:
        what = f"resetting the offsets of {group!r} on {topic!r} on {name}"
        response = await self._broker(
            address,
            RequestCode.GET_CONSUME_STATS,
            GetConsumeStatsRequestHeader(consumer_group=group, topic=topic),
            what=what,
        )
        moved: list[QueueOffset] = []
        table = BrokerConsumeStats.decode(response.body).offset_table
        for queue, entry in sorted(table.items(), key=lambda pair: pair[0]):
            if queue.topic != topic:
                continue
            current = entry.consumer_offset
            if timestamp == LATEST:
                target = await self._offset_at(address, RequestCode.GET_MAX_OFFSET, queue, what)
            else:
                target = await self._search(address, queue, timestamp, "lower", what)
            if not force and target >= current:
                moved.append(QueueOffset(queue, current, False))
                continue
            await self._broker(
                address,
                RequestCode.UPDATE_CONSUMER_OFFSET,
                UpdateConsumerOffsetRequestHeader(
                    consumer_group=group,
                    topic=topic,
                    queue_id=queue.queue_id,
                    commit_offset=target,
                ),
                what=what,
            )
            moved.append(QueueOffset(queue, target, False))
        return moved

    async def _route_masters(self, topic: str) -> list[tuple[str, str]]:
        route = await self.topic_route(topic)
        masters = [
            (b.broker_name, b.master_addr)
            for b in sorted(route.broker_datas, key=lambda b: b.broker_name)
            if b.master_addr
        ]
        if not masters:
            raise AdminError(f"topic {topic!r} has no broker master to change offsets on")
        return masters

    async def search_offset(
        self, queue: MessageQueue, timestamp: int, *, boundary: str = "lower"
    ) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the offset of the first message stored at or after
        ``timestamp`` (``boundary="upper"``: the last one at or before it)."""
        address = await self._queue_address(queue)
        return await self._search(address, queue, timestamp, boundary, "searching an offset")

    async def _search(
        self, address: str, queue: MessageQueue, timestamp: int, boundary: str, what: str
    ) -> int:
        response = await self._broker(
            address,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            SearchOffsetRequestHeader(
                topic=queue.topic,
                queue_id=queue.queue_id,
                timestamp=timestamp,
                boundary_type=boundary,
            ),
            what=f"{what} in {queue_name(queue)}",
        )
        return OffsetResponseHeader.from_ext_fields(response.ext_fields or {}).offset

    async def max_offset(self, queue: MessageQueue) -> int:
        """GET_MAX_OFFSET: the offset the next message of ``queue`` will get."""
        address = await self._queue_address(queue)
        return await self._offset_at(address, RequestCode.GET_MAX_OFFSET, queue, "max offset")

    async def min_offset(self, queue: MessageQueue) -> int:
        """GET_MIN_OFFSET: the offset of the oldest message ``queue`` still holds."""
        address = await self._queue_address(queue)
        return await self._offset_at(address, RequestCode.GET_MIN_OFFSET, queue, "min offset")

    async def _offset_at(self, address: str, code: int, queue: MessageQueue, what: str) -> int:
        header: Header
        if code == RequestCode.GET_MAX_OFFSET:
            header = GetMaxOffsetRequestHeader(topic=queue.topic, queue_id=queue.queue_id)
        else:
            header = GetMinOffsetRequestHeader(topic=queue.topic, queue_id=queue.queue_id)
        response = await self._broker(
            address, code, header, what=f"reading the {what} of {queue_name(queue)}"
        )
        return OffsetResponseHeader.from_ext_fields(response.ext_fields or {}).offset


def _group_offline(exc: AdminError) -> bool:
    """A broker's way of saying the group has no online consumer to tell (Java answers
    CONSUMER_NOT_ONLINE; older brokers SYSTEM_ERROR with the same remark)."""
    if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:
        return True
    return exc.code == ResponseCode.SYSTEM_ERROR and "not online" in str(exc)
