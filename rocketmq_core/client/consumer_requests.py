"""One PULL_MESSAGE and its result, and the offset queries every consumer needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..errors import ResponseError, RocketMQError
from ..protocol.bodies import TopicRouteData
from ..protocol.codes import RequestCode, ResponseCode
from ..protocol.constants import MASTER_ID, Perm
from ..protocol.headers import (
    CustomHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    OffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from ..protocol.heartbeat import MessageQueue, SubscriptionData
from ..protocol.message import iter_records
from .instance import ClientInstance
from .message import MAX_OFFSET, MIN_OFFSET, ReceivedMessage

# PullSysFlag (CODES.md §3.4)
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4

_PULL_ACCEPT = (
    ResponseCode.SUCCESS,
    ResponseCode.PULL_NOT_FOUND,
    ResponseCode.PULL_RETRY_IMMEDIATELY,
    ResponseCode.PULL_OFFSET_MOVED,
)


class PullStatus(Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_STATUS: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[ReceivedMessage] = field(default_factory=list)
    # the stored records as the broker sent them (pull_records only)
    records: bytes = b""


class ConsumerError(RocketMQError):
    """A consumer used in a way it cannot work; the message says what to change."""


def broker_address(instance: ClientInstance, queue: MessageQueue) -> str:
    address = instance.broker_address(queue.broker_name)
    if address is None:
        raise ConsumerError(f"no address known for broker {queue.broker_name!r}")
    return address


async def pull_records(
    instance: ClientInstance,
    group: str,
    queue: MessageQueue,
    offset: int,
    subscription: SubscriptionData,
    *,
    max_nums: int = 32,
    suspend: float = 0.0,
    commit_offset: int = -1,
    timeout: float | None = None,
) -> PullResult:
    """Pull from ``offset``, keeping the stored records undecoded in ``records`` (for
    readers that decode in bulk); ``suspend`` > 0 lets the broker hold the request
    until a message arrives (long polling). The broker filters tags by hash only."""
    suggested = instance.pull_broker_ids.get((group, queue), MASTER_ID)
    found = instance.read_address(queue.broker_name, suggested)
    if found is None:
        raise ConsumerError(f"no address known for broker {queue.broker_name!r}")
    address, broker_id = found
    flags = FLAG_SUBSCRIPTION
    if suspend > 0:
        flags |= FLAG_SUSPEND
    if commit_offset > 0 and broker_id == MASTER_ID:  # a slave ignores it (HA.md §6.6)
        flags |= FLAG_COMMIT_OFFSET
    header = PullMessageRequestHeader(
        consumer_group=group,
        topic=queue.topic,
        queue_id=queue.queue_id,
        queue_offset=offset,
        max_msg_nums=max_nums,
        sys_flag=flags,
        commit_offset=max(commit_offset, 0),
        suspend_timeout_millis=int(suspend * 1000),
        sub_version=subscription.sub_version,
        subscription=subscription.sub_string,
        expression_type=subscription.expression_type,
    )
    response = await instance.invoke(
        address,
        RequestCode.PULL_MESSAGE,
        header,
        timeout=timeout or (suspend + instance.config.request_timeout),
        accept=_PULL_ACCEPT,
    )
    reply = PullMessageResponseHeader.from_ext_fields(response.ext_fields)
    instance.pull_broker_ids[(group, queue)] = reply.suggest_which_broker_id
    status = _STATUS[response.code]
    records = (response.body or b"") if status is PullStatus.FOUND else b""
    return PullResult(
        status, reply.next_begin_offset, reply.min_offset, reply.max_offset, records=records
    )


async def pull_message(
    instance: ClientInstance,
    group: str,
    queue: MessageQueue,
    offset: int,
    subscription: SubscriptionData,
    **options: Any,
) -> PullResult:
    """pull_records, decoded into ``messages``; messages whose tag is not subscribed are
    dropped here (the broker's tag hash can collide)."""
    result = await pull_records(instance, group, queue, offset, subscription, **options)
    if result.records:
        tags = set(subscription.tags_set)
        bounds = {MIN_OFFSET: str(result.min_offset), MAX_OFFSET: str(result.max_offset)}
        for stored in iter_records(result.records):
            message = ReceivedMessage.of(stored, queue.broker_name)
            if tags and message.tags not in tags:
                continue
            message.properties.update(bounds)
            result.messages.append(message)
        result.records = b""
    return result


async def _offset_request(
    instance: ClientInstance, queue: MessageQueue, code: int, header: CustomHeader
) -> int:
    response = await instance.invoke(broker_address(instance, queue), code, header)
    return OffsetResponseHeader.from_ext_fields(response.ext_fields).offset


async def max_offset(instance: ClientInstance, queue: MessageQueue) -> int:
    header = GetMaxOffsetRequestHeader(topic=queue.topic, queue_id=queue.queue_id)
    return await _offset_request(instance, queue, RequestCode.GET_MAX_OFFSET, header)


async def min_offset(instance: ClientInstance, queue: MessageQueue) -> int:
    header = GetMinOffsetRequestHeader(topic=queue.topic, queue_id=queue.queue_id)
    return await _offset_request(instance, queue, RequestCode.GET_MIN_OFFSET, header)


async def search_offset(instance: ClientInstance, queue: MessageQueue, timestamp_ms: int) -> int:
    """The first offset stored at or after ``timestamp_ms``."""
    header = SearchOffsetRequestHeader(
        topic=queue.topic, queue_id=queue.queue_id, timestamp=timestamp_ms
    )
    return await _offset_request(instance, queue, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header)


async def query_committed_offset(instance: ClientInstance, group: str, queue: MessageQueue) -> int:
    """The group's committed offset on ``queue``, -1 when it has none.

    Asks the broker not to answer 0 for a young queue (its default, for old clients),
    so that where a new group starts is what its consume_from says."""
    header = QueryConsumerOffsetRequestHeader(
        consumer_group=group,
        topic=queue.topic,
        queue_id=queue.queue_id,
        set_zero_if_not_found=False,
    )
    try:
        return await _offset_request(instance, queue, RequestCode.QUERY_CONSUMER_OFFSET, header)
    except ResponseError as exc:
        if exc.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        raise


async def commit_offset(
    instance: ClientInstance, group: str, queue: MessageQueue, offset: int
) -> bool:
    """Commit at the queue's master, else (the master gone) at a slave, which keeps it
    until its next sync with the master (HA.md §6.7); True when the master took it."""
    header = UpdateConsumerOffsetRequestHeader(
        consumer_group=group, topic=queue.topic, queue_id=queue.queue_id, commit_offset=offset
    )
    master = instance.master_address(queue.broker_name)
    await instance.invoke(
        master or broker_address(instance, queue), RequestCode.UPDATE_CONSUMER_OFFSET, header
    )
    return master is not None


async def readable_queues(instance: ClientInstance, topic: str) -> list[MessageQueue]:
    """Every queue consumers may read, sorted as rebalance needs them (ROUTE.md §7)."""
    route = await instance.topic_route(topic)
    return queues_of(topic, route)


def queues_of(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    queues = [
        MessageQueue(topic, data.broker_name, queue_id)
        for data in route.queue_datas
        if data.perm & Perm.READ
        for queue_id in range(data.read_queue_nums)
    ]
    return sorted(queues)
