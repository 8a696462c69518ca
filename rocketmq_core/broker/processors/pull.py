"""PULL_MESSAGE with long polling (CODES.md §4.2, STORE.md §12)."""

from __future__ import annotations

import os
from collections.abc import Awaitable
from functools import cache
from typing import TYPE_CHECKING

from ...errors import RequestRefused
from ...protocol.codes import ResponseCode
from ...protocol.command import RemotingCommand
from ...protocol.constants import PERM_READ
from ...protocol.headers import PullMessageRequestHeader, PullMessageResponseHeader
from ...protocol.heartbeat import SubscriptionData
from ...store.api import GetResult, GetStatus

if TYPE_CHECKING:
    from ...protocol.bodies.groups import SubscriptionGroupConfig
    from ...remoting.processor import RequestContext
    from ..app import Broker

COMMIT_OFFSET = 0x1
SUSPEND = 0x2
SUBSCRIPTION = 0x4
FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


def pull_code(result: GetResult, requested: int) -> int:
    status = result.status
    if status is GetStatus.FOUND:
        return ResponseCode.SUCCESS
    if status in (GetStatus.NO_MATCHED_MESSAGE, GetStatus.MESSAGE_WAS_REMOVING):
        return ResponseCode.PULL_RETRY_IMMEDIATELY
    if status in (GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.NO_MATCHED_LOGIC_QUEUE):
        return ResponseCode.PULL_OFFSET_MOVED if requested != 0 else ResponseCode.PULL_NOT_FOUND
    if status in (GetStatus.OFFSET_FOUND_NULL, GetStatus.OFFSET_OVERFLOW_ONE):
        return ResponseCode.PULL_NOT_FOUND
    return ResponseCode.PULL_OFFSET_MOVED


def pull_message(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
) -> RemotingCommand | Awaitable[RemotingCommand]:
    """The answer at once when the store reads without waiting and the pull is not held
    (no task per request); else a coroutine that reads, holds and answers."""
    broker.check_ready()
    header = PullMessageRequestHeader.from_ext_fields(request.ext_fields or {})
    group = _checked_group(broker, header)
    tags = _subscription(broker, header).tag_filter
    # a slave never takes a pull's commitOffset (HA.md §6.6)
    if header.sys_flag & COMMIT_OFFSET and not broker.config.is_slave:
        broker.offsets.commit(
            header.consumer_group, header.topic, header.queue_id, header.commit_offset
        )
    read = (header.topic, header.queue_id, header.queue_offset, header.max_msg_nums, tags)
    get_now = getattr(broker.store, "get_now", None)  # SupportsImmediateGet's
    if get_now is None:
        return _read_hold_answer(broker, ctx, request, header, group, read)
    result = get_now(*read)
    code = pull_code(result, header.queue_offset)
    if code == ResponseCode.PULL_NOT_FOUND and header.sys_flag & SUSPEND:
        return _read_hold_answer(broker, ctx, request, header, group, read)  # reads again
    return _answer(broker, request, header, group, result, code)


def _checked_group(broker: Broker, header: PullMessageRequestHeader) -> SubscriptionGroupConfig:
    """The pulling group's config, once the broker, the group and the topic allow the pull."""
    if not broker.config.broker_permission & PERM_READ:  # brokerPermission, live
        raise RequestRefused(
            ResponseCode.NO_PERMISSION,
            f"the broker[{broker.config.broker_ip1}] pulling message is forbidden",
        )
    group = broker.groups.require(header.consumer_group)
    if not group.consume_enable:
        raise RequestRefused(
            ResponseCode.NO_PERMISSION, f"subscription group no permission, {header.consumer_group}"
        )
    topic = broker.topics.get(header.topic)
    if topic is None:
        raise RequestRefused(
            ResponseCode.TOPIC_NOT_EXIST,
            f"topic[{header.topic}] not exist, apply first please!{FAQ}",
        )
    if not topic.perm & PERM_READ:
        raise RequestRefused(
            ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] pulling message is forbidden"
        )
    if not 0 <= header.queue_id < topic.read_queue_nums:
        raise RequestRefused(
            ResponseCode.INVALID_PARAMETER,
            f"queueId {header.queue_id} is out of range: topic {header.topic} has"
            f" {topic.read_queue_nums} read queues",
        )
    return group


async def _read_hold_answer(
    broker: Broker,
    ctx: RequestContext,
    request: RemotingCommand,
    header: PullMessageRequestHeader,
    group: SubscriptionGroupConfig,
    read: tuple,
) -> RemotingCommand:
    """Read, hold the pull when nothing is there (long polling) until a record arrives or
    the suspend time passes, read again, answer. The read and the hold's registration
    are one step of this task (nothing yields between them): a record appended after
    the processor's own read, before this task ran, is seen here or wakes the hold."""
    get_now = getattr(broker.store, "get_now", None)
    result = get_now(*read) if get_now is not None else await broker.store.get(*read)
    topic, queue_id, offset, _count, tags = read
    if pull_code(result, offset) == ResponseCode.PULL_NOT_FOUND and header.sys_flag & SUSPEND:
        timeout = (
            header.suspend_timeout_millis
            if broker.config.long_polling_enable
            else broker.config.short_polling_time_mills
        ) / 1000
        if await broker.pulls.hold(topic, queue_id, offset, tags, timeout, ctx.connection):
            result = await broker.store.get(*read)
    return _answer(broker, request, header, group, result, pull_code(result, offset))


def _answer(
    broker: Broker,
    request: RemotingCommand,
    header: PullMessageRequestHeader,
    group: SubscriptionGroupConfig,
    result: GetResult,
    code: int,
) -> RemotingCommand:
    broker.stats.count_get(header.consumer_group, header.topic, result)
    if code == ResponseCode.SUCCESS:
        broker.pull_rates.record(header.consumer_group, header.topic, len(result.records))
    suggested = suggest_which_broker_id(broker, result, group)
    next_begin_offset = result.next_begin_offset
    if (
        code == ResponseCode.PULL_OFFSET_MOVED
        and broker.config.is_slave
        and not broker.config.offset_check_in_slave
    ):
        # a slave may simply be behind: retry, at the master when there is one (HA.md §6.5)
        code = ResponseCode.PULL_RETRY_IMMEDIATELY
        suggested = group.broker_id
        next_begin_offset = header.queue_offset
    reply = PullMessageResponseHeader(
        suggest_which_broker_id=suggested,
        next_begin_offset=next_begin_offset,
        min_offset=result.min_offset,
        max_offset=result.max_offset,
    )
    return request.response(
        code,
        result.status.name,
        reply.to_ext_fields(),
        result.body if code == ResponseCode.SUCCESS else b"",
    )


def suggest_which_broker_id(
    broker: Broker, result: GetResult, group: SubscriptionGroupConfig
) -> int:
    """Where the consumer should pull this queue next (HA.md §6.3): a slave
    (whichBrokerWhenConsumeSlowly, 1) when the last consume-queue entry the read looked at,
    returned or filtered out, is so far behind the CommitLog end that it cannot be in
    memory, else the group's brokerId (0)."""
    if not broker.config.slave_read_enable:
        return 0
    if result.last_examined_position < 0:
        return group.broker_id  # no entry looked at: nothing says the consumer is behind
    behind = broker.store.max_commit_log_offset - result.last_examined_position
    memory = broker.config.total_physical_memory or total_physical_memory()
    if behind > memory * broker.config.access_message_in_memory_max_ratio / 100:
        return group.which_broker_when_consume_slowly
    return group.broker_id


@cache
def total_physical_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _subscription(broker: Broker, header: PullMessageRequestHeader) -> SubscriptionData:
    if header.sys_flag & SUBSCRIPTION:
        return SubscriptionData.of(header.topic, header.subscription, header.sub_version)
    registered = broker.consumers.subscription(header.consumer_group, header.topic)
    if registered is None:
        raise RequestRefused(
            ResponseCode.SUBSCRIPTION_NOT_EXIST,
            f"the consumer's subscription not exist: group {header.consumer_group},"
            f" topic {header.topic}; it is registered by the consumer's heartbeat",
        )
    if registered.sub_version < header.sub_version:
        raise RequestRefused(
            ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
        )
    return registered
