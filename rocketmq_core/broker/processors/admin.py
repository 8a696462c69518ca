"""The admin family (CODES.md §1.2): topics, subscription groups, offsets and stats, as
mqadmin and the dashboards ask for them."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ...errors import BodyError, ResponseError
from ...protocol import fastjson
from ...protocol.bodies import KVTable, TopicConfig
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.command import RemotingCommand
from ...protocol.headers import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    ResetOffsetRequestHeader,
    TopicRequestHeader,
)
from ...protocol.heartbeat import MessageQueue
from ...protocol.message import decode_record
from ...store.api import SupportsTopicDeletion
from ..groups import SubscriptionGroupConfig
from ..topics import NOT_SENDABLE, topic_problem

if TYPE_CHECKING:
    from ...remoting.processor import RequestContext
    from ..app import Broker

BROKER_VERSION_DESC = "V4_9_4"  # what admin tools print; the protocol level we speak
BROKER_VERSION = 401


def _fields(request: RemotingCommand) -> dict[str, str]:
    return request.ext_fields or {}


# --- topics --------------------------------------------------------------------------------


def update_and_create_topic(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    header = CreateTopicRequestHeader.from_ext_fields(_fields(request))
    problem = topic_problem(header.topic)
    if problem is not None:
        raise ResponseError(ResponseCode.SYSTEM_ERROR, problem)
    if header.topic in NOT_SENDABLE or header.topic == broker.config.broker_cluster_name:
        raise ResponseError(
            ResponseCode.SYSTEM_ERROR, f"The topic[{header.topic}] is conflict with system topic."
        )
    if header.read_queue_nums <= 0 or header.write_queue_nums <= 0:
        raise ResponseError(
            ResponseCode.SYSTEM_ERROR, "readQueueNums and writeQueueNums must be at least 1"
        )
    broker.topics.update(
        TopicConfig(
            header.topic,
            header.read_queue_nums,
            header.write_queue_nums,
            header.perm,
            header.topic_filter_type or "SINGLE_TAG",
            header.topic_sys_flag or 0,
            bool(header.order),
        )
    )
    return request.response()


async def delete_topic_in_broker(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    header = TopicRequestHeader.from_ext_fields(_fields(request))
    if header.topic in NOT_SENDABLE:
        raise ResponseError(
            ResponseCode.SYSTEM_ERROR, f"The topic[{header.topic}] is a system topic"
        )
    broker.topics.delete(header.topic)
    broker.offsets.remove_topic(header.topic)
    if isinstance(broker.store, SupportsTopicDeletion):
        await broker.store.delete_topic(header.topic)
    return request.response()


def get_all_topic_config(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    return request.response(body=broker.topics.encode())


async def get_topic_stats_info(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    header = TopicRequestHeader.from_ext_fields(_fields(request))
    config = broker.topics.get(header.topic)
    if config is None:
        raise ResponseError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
    table: dict[tuple, dict[str, int]] = {}
    store = broker.store
    for queue_id in range(config.write_queue_nums):
        queue = MessageQueue(header.topic, broker.config.broker_name, queue_id)
        max_offset = max(0, store.max_offset(header.topic, queue_id))
        last = await _store_time(broker, header.topic, queue_id, max_offset - 1)
        table[_key(queue)] = {
            "lastUpdateTimestamp": last,
            "maxOffset": max_offset,
            "minOffset": max(0, store.min_offset(header.topic, queue_id)),
        }
    return request.response(body=fastjson.dumps({"offsetTable": table}, standard=False))


# --- subscription groups and offsets -------------------------------------------------------


def update_and_create_subscription_group(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
):
    if not request.body:
        raise BodyError("the body must be a SubscriptionGroupConfig (JSON)")
    broker.groups.update(SubscriptionGroupConfig.from_json(fastjson.loads(request.body)))
    return request.response()


def get_all_subscription_group_config(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
):
    return request.response(body=broker.groups.encode())


def delete_subscription_group(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    header = DeleteSubscriptionGroupRequestHeader.from_ext_fields(_fields(request))
    broker.groups.delete(header.group_name)
    if header.clean_offset:
        broker.offsets.remove_group(header.group_name)
    return request.response()


def get_all_consumer_offset(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    return request.response(body=broker.offsets.encode())


async def invoke_broker_to_reset_offset(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
):
    """Move a group's offsets on a topic to a point in time and tell its online members
    (RESET_CONSUMER_CLIENT_OFFSET), as ``mqadmin resetOffsetByTime`` asks."""
    header = ResetOffsetRequestHeader.from_ext_fields(_fields(request))
    config = broker.topics.get(header.topic)
    if config is None:
        raise ResponseError(
            ResponseCode.TOPIC_NOT_EXIST, f"[reset-offset] request topic not exist: {header.topic}"
        )
    group = broker.consumers.group(header.group)
    if group is None or not group.channels:
        raise ResponseError(
            ResponseCode.SYSTEM_ERROR,
            f"Consumer not online, so can not reset offset, Group: {header.group}"
            f" Topic: {header.topic} Timestamp: {header.timestamp}",
        )
    offsets: dict[MessageQueue, int] = {}
    for queue_id in range(config.write_queue_nums):
        committed = broker.offsets.query(header.group, header.topic, queue_id)
        if header.timestamp == -1:
            target = max(0, broker.store.max_offset(header.topic, queue_id))
        else:
            target = await broker.store.offset_by_time(header.topic, queue_id, header.timestamp)
        # without force, a reset only ever moves a group back
        offset = target if header.is_force or committed < 0 or target < committed else committed
        offsets[MessageQueue(header.topic, broker.config.broker_name, queue_id)] = offset
        broker.offsets.commit(header.group, header.topic, queue_id, offset)
    push = ResetOffsetRequestHeader(
        group=header.group,
        topic=header.topic,
        timestamp=header.timestamp,
        is_force=header.is_force,
    ).to_ext_fields()
    for channel, client in list(group.channels.items()):
        body = encode_reset_offsets(offsets, for_cpp=client.language == "CPP")
        broker.send_to_client(
            channel,
            RemotingCommand.request(
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET, push, body, oneway=True
            ),
        )
    return request.response(body=encode_reset_offsets(offsets, for_cpp=False))


def encode_reset_offsets(offsets: dict[MessageQueue, int], *, for_cpp: bool) -> bytes:
    """ResetOffsetBody: Java reads fastjson's object-keyed map, the C++ client an array
    of {brokerName, queueId, topic, offset} (REMOTING.md §11)."""
    if for_cpp:
        table = [{**queue.to_json(), "offset": offset} for queue, offset in offsets.items()]
        return fastjson.dumps({"offsetTable": table})
    keyed = {_key(queue): offset for queue, offset in offsets.items()}
    return fastjson.dumps({"offsetTable": keyed}, standard=False)


# --- clients and consumption -----------------------------------------------------------


def get_consumer_connection_list(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    header = GetConsumerConnectionListRequestHeader.from_ext_fields(_fields(request))
    group = broker.consumers.group(header.consumer_group)
    if group is None or not group.channels:
        raise ResponseError(
            ResponseCode.CONSUMER_NOT_ONLINE,
            f"the consumer group[{header.consumer_group}] not online",
        )
    connections = [
        {
            "clientAddr": getattr(channel, "peer_address", None) or "",
            "clientId": client.client_id,
            "language": client.language,
            "version": client.version,
        }
        for channel, client in group.channels.items()
    ]
    body = {
        "connectionSet": connections,
        "consumeFromWhere": group.consume_from_where.name,
        "consumeType": group.consume_type.name,
        "messageModel": group.message_model.name,
        "subscriptionTable": {
            topic: subscription.to_json() for topic, subscription in group.subscriptions.items()
        },
    }
    return request.response(body=fastjson.dumps(body))


async def get_consume_stats(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    header = GetConsumeStatsRequestHeader.from_ext_fields(_fields(request))
    group = header.consumer_group
    topics = [header.topic] if header.topic else broker.offsets.topics_of(group)
    table: dict[tuple, dict[str, int]] = {}
    for topic in topics:
        config = broker.topics.get(topic)
        if config is None:
            continue
        for queue_id in range(config.read_queue_nums):
            consumer_offset = max(0, broker.offsets.query(group, topic, queue_id))
            queue = MessageQueue(topic, broker.config.broker_name, queue_id)
            table[_key(queue)] = {
                "brokerOffset": max(0, broker.store.max_offset(topic, queue_id)),
                "consumerOffset": consumer_offset,
                "lastTimestamp": await _store_time(broker, topic, queue_id, consumer_offset - 1),
                "pullOffset": consumer_offset,
            }
    body = {"consumeTps": 0.0, "offsetTable": table}
    return request.response(body=fastjson.dumps(body, standard=False))


def get_broker_runtime_info(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    store = broker.store
    stats: dict[str, Any] = store.stats() if store is not None else {}
    now_ms = int(time.time() * 1000)
    table = {
        "brokerVersionDesc": BROKER_VERSION_DESC,
        "brokerVersion": str(BROKER_VERSION),
        "bootTimestamp": str(broker.boot_timestamp),
        "runtime": _uptime(now_ms - broker.boot_timestamp),
        "commitLogMinOffset": str(store.min_commit_log_offset),
        "commitLogMaxOffset": str(store.max_commit_log_offset),
        "msgPutTotalTodayNow": str(stats.get("puts", 0)),
        "brokerActive": "true",
    }
    for name, value in stats.items():
        table.setdefault(f"store.{name}", str(value))
    return request.response(body=KVTable(table).encode())


# --- helpers -----------------------------------------------------------------------------


def _key(queue: MessageQueue) -> tuple:
    """A MessageQueue as fastjson's object-valued map key."""
    return tuple(queue.to_json().items())


async def _store_time(broker: Broker, topic: str, queue_id: int, offset: int) -> int:
    """The store time of the message at ``offset``, 0 when there is none."""
    if offset < 0:
        return 0
    result = await broker.store.get(topic, queue_id, offset, 1)
    if not result.records:
        return 0
    return decode_record(bytes(result.records[0])).store_timestamp


def _uptime(millis: int) -> str:
    seconds = max(0, millis) // 1000
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]"
