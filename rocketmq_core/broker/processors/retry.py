"""CONSUMER_SEND_MSG_BACK: a message the consumer could not handle goes to the group's
retry topic with a growing delay level, or to its dead-letter topic once it has been
retried ``retryMaxTimes`` (CODES.md §4.6, STORE.md §15)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import RequestRefused
from ...protocol.bodies import TopicConfig
from ...protocol.codes import VERSION_V3_4_9, ResponseCode
from ...protocol.command import RemotingCommand
from ...protocol.constants import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, Perm
from ...protocol.headers import ConsumerSendMsgBackRequestHeader
from ...protocol.message import decode_record
from ...store.api import MessageToStore
from ..groups import SubscriptionGroupConfig

if TYPE_CHECKING:
    from ...remoting.processor import RequestContext
    from ..app import Broker

FIRST_RETRY_LEVEL = 3  # delay level 0 means "3 + reconsumeTimes": 10 s, 30 s, 1 min, ...


async def consumer_send_msg_back(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    broker.check_ready()
    if broker.config.is_slave:  # Java's store refuses the put; the status name is the remark
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR,
            "SERVICE_NOT_AVAILABLE: this broker is a slave; messages are sent back to its master",
        )
    header = ConsumerSendMsgBackRequestHeader.from_ext_fields(request.ext_fields or {})
    group = broker.groups.require(header.group)
    if not broker.config.broker_permission & Perm.WRITE:
        raise RequestRefused(
            ResponseCode.NO_PERMISSION,
            f"the broker[{broker.config.broker_ip1}] sending message is forbidden",
        )
    if group.retry_queue_nums <= 0:
        return request.response()  # the group wants no retries: the message is dropped
    record = await broker.store.message_at(header.offset)
    if record is None:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}"
        )
    original = decode_record(record)
    properties = dict(original.properties)
    properties.setdefault("RETRY_TOPIC", original.topic)
    properties.setdefault("ORIGIN_MESSAGE_ID", original.msg_id)
    limit = max_reconsume_times(group, request, header.max_reconsume_times)
    if original.reconsume_times >= limit or header.delay_level < 0:
        topic, queue_id = dead_letter_topic(broker, header.group), 0
        properties.pop("DELAY", None)
    else:
        retry = retry_topic(broker, group)
        topic = retry.topic_name
        queue_id = broker.random_queue(retry.write_queue_nums)
        level = header.delay_level or FIRST_RETRY_LEVEL + original.reconsume_times
        properties["DELAY"] = str(level)
    message = MessageToStore.again(
        original, topic, queue_id, properties, reconsume_times=original.reconsume_times + 1
    )
    result = await broker.put(broker.prepare(message))
    if not result.ok:  # stored but not flushed or on no slave fails the send-back too
        raise RequestRefused(ResponseCode.SYSTEM_ERROR, result.status.name)
    broker.stats.count_send_back(header.group, properties["RETRY_TOPIC"])
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        broker.stats.count_dead_letter(header.group, properties["RETRY_TOPIC"])
    return request.response()


def max_reconsume_times(
    group: SubscriptionGroupConfig, request: RemotingCommand, asked: int | None
) -> int:
    """The group's retryMaxTimes, or the client's own limit from version 121 (V3_4_9) on."""
    if request.version >= VERSION_V3_4_9 and asked is not None:
        return asked
    return group.retry_max_times


def retry_topic(broker: Broker, group: SubscriptionGroupConfig) -> TopicConfig:
    """%RETRY%group, created with the group's retryQueueNums on first use."""
    return broker.topics.create_if_missing(
        RETRY_GROUP_TOPIC_PREFIX + group.group_name,
        max(1, group.retry_queue_nums),
        int(Perm.READ | Perm.WRITE),
    )


def dead_letter_topic(broker: Broker, group: str) -> str:
    """%DLQ%group (one queue), created on the first dead letter."""
    topic = DLQ_GROUP_TOPIC_PREFIX + group
    broker.topics.create_if_missing(topic, 1, int(Perm.READ | Perm.WRITE))
    return topic
