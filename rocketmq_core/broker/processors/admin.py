"""The admin family (CODES.md §1.2): topics, subscription groups, offsets and stats, as
mqadmin and the dashboards ask for them."""

from __future__ import annotations

import logging
import math
import shutil
import time
from typing import TYPE_CHECKING, Any

from ...config_update import apply_config_update
from ...errors import BodyError, RequestRefused
from ...protocol.bodies import (
    Connection,
    ConsumerConnection,
    ConsumeStats,
    ConsumeStatsList,
    GroupList,
    KVTable,
    OffsetWrapper,
    ProducerConnection,
    QueryConsumeTimeSpanBody,
    QueueTimeSpan,
    ResetOffsetBody,
    SubscriptionGroupConfig,
    TopicConfig,
    TopicList,
    TopicOffset,
    TopicStatsTable,
)
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.command import RemotingCommand
from ...protocol.constants import SYSTEM_TOPICS
from ...protocol.headers import (
    CloneGroupOffsetRequestHeader,
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetBrokerConfigResponseHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    ResetOffsetRequestHeader,
    TopicRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from ...protocol.heartbeat import MessageQueue
from ...protocol.message import decode_record, record_store_time
from ...protocol.topic_validation import is_system_topic, system_topic_refusal, topic_problem
from ...store.api import SupportsTopicDeletion
from ..clients import Channel, ClientChannel
from ..stats import GROUP_GET_NUMS, java_double

if TYPE_CHECKING:
    from ...remoting.processor import RequestContext
    from ..app import Broker

BROKER_VERSION_DESC = "V4_9_4"  # what admin tools print; the protocol level we speak
BROKER_VERSION = 401

log = logging.getLogger("rocketmq.broker")


def _fields(request: RemotingCommand) -> dict[str, str]:
    return request.ext_fields or {}


# --- topics --------------------------------------------------------------------------------


def update_and_create_topic(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    _refuse_on_slave(broker)
    header = CreateTopicRequestHeader.from_ext_fields(_fields(request))
    _check_changeable(broker, header.topic)
    if header.read_queue_nums <= 0 or header.write_queue_nums <= 0:
        raise RequestRefused(
            ResponseCode.INVALID_PARAMETER, "readQueueNums and writeQueueNums must be at least 1"
        )
    most = broker.config.max_topic_queue_nums
    if max(header.read_queue_nums, header.write_queue_nums) > most:
        raise RequestRefused(
            ResponseCode.INVALID_PARAMETER,
            f"readQueueNums {header.read_queue_nums} and writeQueueNums"
            f" {header.write_queue_nums}: at most {most} queues are allowed (maxTopicQueueNums)",
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
    _refuse_on_slave(broker)
    header = TopicRequestHeader.from_ext_fields(_fields(request))
    _check_changeable(broker, header.topic)
    broker.topics.delete(header.topic)
    broker.offsets.remove_topic(header.topic)
    if isinstance(broker.store, SupportsTopicDeletion):
        await broker.store.delete_topic(header.topic)
    return request.response()


def _refuse_on_slave(broker: Broker) -> None:
    """A slave's topics and groups are its master's (4.9.4+ answers this way)."""
    if broker.config.is_slave:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR,
            "Can't modify topic or subscription group from slave broker, please execute it"
            " from master broker.",
        )


def _check_changeable(broker: Broker, topic: str) -> None:
    """Refuse an admin change to an invalid name or to a system topic, with
    INVALID_PARAMETER as Java 5.x answers (4.9 answered SYSTEM_ERROR)."""
    problem = topic_problem(topic)
    if problem is not None:
        raise RequestRefused(ResponseCode.INVALID_PARAMETER, problem)
    if is_system_topic(topic, broker.topics.system_topics):
        raise RequestRefused(ResponseCode.INVALID_PARAMETER, system_topic_refusal(topic))


def get_all_topic_config(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    return request.response(body=broker.topics.encode())


def get_topic_config(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    """One topic's config: TopicConfigAndQueueMapping, whose mapping (static topics,
    5.x) this broker never has, so just the TopicConfig."""
    header = TopicRequestHeader.from_ext_fields(_fields(request))
    config = broker.topics.get(header.topic)
    if config is None:
        raise RequestRefused(
            ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {header.topic}"
        )
    return request.response(body=config.encode())


def get_system_topic_list_from_broker(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
):
    return request.response(body=TopicList(sorted(SYSTEM_TOPICS)).encode())


async def get_topic_stats_info(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    header = TopicRequestHeader.from_ext_fields(_fields(request))
    config = broker.topics.get(header.topic)
    if config is None:
        raise RequestRefused(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
    stats = TopicStatsTable()
    store = broker.store
    for queue_id in range(config.write_queue_nums):
        queue = MessageQueue(header.topic, broker.config.broker_name, queue_id)
        max_offset = max(0, store.max_offset(header.topic, queue_id))
        stats.offset_table[queue] = TopicOffset(
            min_offset=max(0, store.min_offset(header.topic, queue_id)),
            max_offset=max_offset,
            last_update_timestamp=await _store_time(broker, header.topic, queue_id, max_offset - 1),
        )
    return request.response(body=stats.encode())


# --- subscription groups and offsets -------------------------------------------------------


def update_and_create_subscription_group(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
):
    _refuse_on_slave(broker)
    if not request.body:
        raise BodyError("the body must be a SubscriptionGroupConfig (JSON)")
    broker.groups.update(SubscriptionGroupConfig.decode(request.body))
    return request.response()


def get_all_subscription_group_config(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
):
    return request.response(body=broker.groups.encode())


def get_subscription_group_config(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    """One group's config. Unlike Java, a read never creates the group (Java's lookup
    auto-creates it when autoCreateSubscriptionGroup is on)."""
    header = GetSubscriptionGroupConfigRequestHeader.from_ext_fields(_fields(request))
    config = broker.groups.table.get(header.group)
    if config is None:
        raise RequestRefused(
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
            f"No group in this broker. group: {header.group}",
        )
    return request.response(body=config.encode())


def delete_subscription_group(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    _refuse_on_slave(broker)
    header = DeleteSubscriptionGroupRequestHeader.from_ext_fields(_fields(request))
    broker.groups.delete(header.group_name)
    if header.clean_offset:
        broker.offsets.remove_group(header.group_name)
    return request.response()


def get_all_consumer_offset(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    return request.response(body=broker.offsets.encode())


def clone_group_offset(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    """Copy the committed offsets of ``srcGroup`` to ``destGroup``, on one topic or on
    every topic the source group has offsets for (``mqadmin cloneGroupOffset``)."""
    header = CloneGroupOffsetRequestHeader.from_ext_fields(_fields(request))
    source = header.src_group
    if header.topic and header.topic.strip():
        topics = [header.topic]
    else:
        topics = broker.offsets.topics_of(source)
    online = broker.consumers.group(source)
    for topic in topics:
        if broker.topics.get(topic) is None:
            log.warning("[cloneGroupOffset] topic %s does not exist: not cloned", topic)
            continue
        # an online source group only lends offsets of topics it still subscribes to
        subscribed = online.subscriptions if online is not None else {}
        if not header.offline and subscribed and topic not in subscribed:
            log.warning("[cloneGroupOffset] %s does not subscribe to %s: not cloned", source, topic)
            continue
        for queue_id, offset in broker.offsets.offsets(source, topic).items():
            broker.offsets.commit(header.dest_group, topic, queue_id, offset)
    return request.response()


async def invoke_broker_to_reset_offset(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
):
    """Move a group's offsets on a topic to a point in time and tell its online members
    (RESET_CONSUMER_CLIENT_OFFSET), as ``mqadmin resetOffsetByTime`` asks."""
    header = ResetOffsetRequestHeader.from_ext_fields(_fields(request))
    config = broker.topics.get(header.topic)
    if config is None:
        raise RequestRefused(
            ResponseCode.TOPIC_NOT_EXIST, f"[reset-offset] request topic not exist: {header.topic}"
        )
    group = broker.consumers.group(header.group)
    if group is None or not group.channels:
        raise RequestRefused(
            ResponseCode.CONSUMER_NOT_ONLINE,  # what mqadmin falls back on (offline reset)
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
    reset = ResetOffsetBody(offsets)
    for channel, client in list(group.channels.items()):
        # the C++ client reads only its own form of the body (REMOTING.md §11)
        body = reset.encode(for_cpp=client.language == "CPP")
        broker.send_to_client(
            channel,
            RemotingCommand.request(
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET, push, body, oneway=True
            ),
        )
    return request.response(body=reset.encode())


# --- clients and consumption -----------------------------------------------------------


def get_consumer_connection_list(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    header = GetConsumerConnectionListRequestHeader.from_ext_fields(_fields(request))
    group = broker.consumers.group(header.consumer_group)
    if group is None or not group.channels:
        raise RequestRefused(
            ResponseCode.CONSUMER_NOT_ONLINE,
            f"the consumer group[{header.consumer_group}] not online",
        )
    body = ConsumerConnection(
        _connections(group.channels),
        dict(group.subscriptions),
        group.consume_type,
        group.message_model,
        group.consume_from_where,
    )
    return request.response(body=body.encode())


def get_producer_connection_list(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    header = GetProducerConnectionListRequestHeader.from_ext_fields(_fields(request))
    channels = broker.producers.group(header.producer_group)
    if not channels:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR, f"the producer group[{header.producer_group}] not exist"
        )
    return request.response(body=ProducerConnection(_connections(channels)).encode())


def query_topic_consume_by_who(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    """The groups consuming a topic: online subscribers and groups with offsets on it."""
    header = TopicRequestHeader.from_ext_fields(_fields(request))
    groups = set(broker.consumers.groups_of_topic(header.topic))
    groups.update(broker.offsets.groups_of(header.topic))
    return request.response(body=GroupList(sorted(groups)).encode())


async def get_consume_stats(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    header = GetConsumeStatsRequestHeader.from_ext_fields(_fields(request))
    group = header.consumer_group
    topics = [header.topic] if header.topic else broker.offsets.topics_of(group)
    stats = ConsumeStats()
    for topic in topics:
        config = broker.topics.get(topic)
        if config is None:
            continue
        for queue_id in range(config.read_queue_nums):
            consumer_offset = max(0, broker.offsets.query(group, topic, queue_id))
            queue = MessageQueue(topic, broker.config.broker_name, queue_id)
            stats.offset_table[queue] = OffsetWrapper(
                broker_offset=max(0, broker.store.max_offset(topic, queue_id)),
                consumer_offset=consumer_offset,
                pull_offset=consumer_offset,
                last_timestamp=await _store_time(broker, topic, queue_id, consumer_offset - 1),
            )
    stats.consume_tps = broker.pull_rates.tps(group, topics)
    return request.response(body=stats.encode())


async def query_consume_time_span(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    """Per queue of a topic: the store times of its first and last messages, of the
    group's last consumed one, and how long the next one has waited (0: none)."""
    header = QueryConsumeTimeSpanRequestHeader.from_ext_fields(_fields(request))
    topic = header.topic
    config = broker.topics.get(topic)
    if config is None:
        raise RequestRefused(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
    store = broker.store
    now_ms = int(time.time() * 1000)
    spans = QueryConsumeTimeSpanBody()
    for queue_id in range(config.write_queue_nums):
        max_offset = max(0, store.max_offset(topic, queue_id))
        committed = broker.offsets.query(header.group, topic, queue_id)
        min_time = max(0, await store.earliest_store_time(topic, queue_id))
        max_time = await _store_time(broker, topic, queue_id, max_offset - 1)
        if committed > 0:
            consume_time = await _store_time(broker, topic, queue_id, committed - 1)
        else:
            consume_time = min_time
        delay = 0
        next_offset = max(committed, store.min_offset(topic, queue_id), 0)
        if next_offset < max_offset:
            next_time = await _store_time(broker, topic, queue_id, next_offset)
            delay = max(0, now_ms - next_time) if next_time else 0
        queue = MessageQueue(topic, broker.config.broker_name, queue_id)
        spans.consume_time_span_set.append(
            QueueTimeSpan(queue, min_time, max_time, consume_time, delay)
        )
    return request.response(body=spans.encode())


async def get_broker_runtime_info(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    """The keys Java's broker gives (METRICS.md §3.1) in its formats, then the role and
    replication state, then the store's own figures as ``store.<name>``."""
    store = broker.store
    stats: dict[str, Any] = store.stats()
    now_ms = int(time.time() * 1000)
    table = {
        "brokerVersionDesc": BROKER_VERSION_DESC,
        "brokerVersion": str(BROKER_VERSION),
        "bootTimestamp": str(broker.boot_timestamp),
        "runtime": _uptime(now_ms - broker.boot_timestamp),
        "startAcceptSendRequestTimeStamp": "0",
        "earliestMessageTimeStamp": str(await _earliest_message_time(broker)),
        "commitLogMinOffset": str(store.min_commit_log_offset),
        "commitLogMaxOffset": str(store.max_commit_log_offset),
        "brokerActive": "true",
    }
    table.update(broker.stats.runtime_info())
    table.update(_store_runtime_info(broker, stats))
    table.update(runtime_info_defaults())
    table.update(_replication_info(broker))
    for name, value in stats.items():
        table.setdefault(f"store.{name}", str(value))
    return request.response(body=KVTable(table).encode())


# sendThreadPoolQueueCapacity and friends: Java's defaults (this broker queues no requests)
_QUEUE_CAPACITIES = {"send": 10000, "pull": 100000, "query": 20000}
_LATENCY_BUCKETS = (
    "[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]",
    "[500ms~1s]", "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]",
)  # fmt: skip


def runtime_info_defaults() -> dict[str, str]:
    """Keys the exporter requires (METRICS.md §4) for figures this broker does not
    measure: put and get latencies, thread-pool queues, the transient store pool."""
    info = {
        "putMessageEntireTimeMax": "0",
        "getMessageEntireTimeMax": "0",
        # every bucket, so parsers find all 13; no put is timed (it would slow the send path)
        "putMessageDistributeTime": "".join(f"{bucket}:0 " for bucket in _LATENCY_BUCKETS),
        "putLatency99": "0.00",
        "putLatency999": "0.00",
        "dispatchMaxBuffer": "0",
        "pageCacheLockTimeMills": "0",
        "remainTransientStoreBufferNumbs": "2147483647",  # Integer.MAX_VALUE: no pool
        "EndTransactionQueueSize": "0",
        "EndTransactionThreadPoolQueueCapacity": "100000",
    }
    for pool, capacity in _QUEUE_CAPACITIES.items():
        info[f"{pool}ThreadPoolQueueSize"] = "0"
        info[f"{pool}ThreadPoolQueueCapacity"] = str(capacity)
        info[f"{pool}ThreadPoolQueueHeadWaitTimeMills"] = "0"
    return info


def _store_runtime_info(broker: Broker, stats: dict[str, Any]) -> dict[str, str]:
    """Disk use of the store's directory and what is not yet flushed or dispatched."""
    store = broker.store
    root = broker.config.store_path_root_dir
    commit_log_dir = broker.config.store_path_commit_log or root
    flushed = stats.get("flushed_offset", store.max_commit_log_offset)
    return {
        "commitLogDiskRatio": _disk_ratio(commit_log_dir),
        "consumeQueueDiskRatio": _disk_ratio(root),
        "commitLogDirCapacity": _capacity(commit_log_dir),
        "remainHowManyDataToFlush": human_bytes(max(0, store.max_commit_log_offset - flushed)),
        "dispatchBehindBytes": "0",  # the stores dispatch as they append
    }


def _disk_ratio(path: str) -> str:
    """The used fraction of the partition holding ``path``; -1 when it is missing."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return "-1"
    return java_double((usage.total - usage.free) / usage.total if usage.total else 0.0)


def _capacity(path: str) -> str:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return "Total : 0 B, Free : 0 B."
    return f"Total : {human_bytes(usage.total)}, Free : {human_bytes(usage.free)}."


def human_bytes(count: int) -> str:
    """Bytes as Java's UtilAll.humanReadableByteCount(count, false): ``1.5 MiB``."""
    if count < 1024:
        return f"{count} B"
    exponent = min(int(math.log(count, 1024)), 6)
    return f"{count / 1024**exponent:.1f} {'KMGTPE'[exponent - 1]}iB"


async def _earliest_message_time(broker: Broker) -> int:
    """Store time of the first message of the CommitLog; -1 when it holds none."""
    store = broker.store
    if store.max_commit_log_offset <= store.min_commit_log_offset:
        return -1
    record = await store.message_at(store.min_commit_log_offset)
    return record_store_time(record) if record else -1


def view_broker_stats_data(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    """One statistic over the last minute, hour and day (mqadmin statsAll, the exporter)."""
    header = ViewBrokerStatsDataRequestHeader.from_ext_fields(_fields(request))
    data = broker.stats.data(header.stats_name, header.stats_key)
    if data is None:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR,
            f"The stats <{header.stats_name}> <{header.stats_key}> not exist",
        )
    return request.response(body=data.encode())


async def get_broker_consume_stats(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    """Every subscription group's progress on each topic it has offsets in (with
    ``isOrder``, order topics only), and the total lag."""
    header = GetConsumeStatsInBrokerHeader.from_ext_fields(_fields(request))
    body = ConsumeStatsList(broker_addr=broker.config.broker_addr)
    for group in sorted(broker.groups.table):
        per_topic = []
        for topic in broker.offsets.topics_of(group):
            config = broker.topics.get(topic)
            if config is None or (header.is_order and not config.order):
                continue
            online = broker.consumers.group(group)
            subscribed = online.subscriptions if online is not None else {}
            if subscribed and topic not in subscribed:
                continue  # the online group no longer subscribes to it
            stats = await _topic_consume_stats(broker, group, topic, config.write_queue_nums)
            stats.consume_tps = broker.stats.minute_tps(GROUP_GET_NUMS, f"{topic}@{group}")
            body.total_diff += stats.total_diff
            per_topic.append(stats)
        body.consume_stats_list.append({group: per_topic})
    return request.response(body=body.encode())


async def _topic_consume_stats(broker: Broker, group: str, topic: str, queues: int):
    stats = ConsumeStats()
    for queue_id in range(queues):
        consumer_offset = max(0, broker.offsets.query(group, topic, queue_id))
        stats.offset_table[MessageQueue(topic, broker.config.broker_name, queue_id)] = (
            OffsetWrapper(
                broker_offset=max(0, broker.store.max_offset(topic, queue_id)),
                consumer_offset=consumer_offset,
                last_timestamp=await _store_time(broker, topic, queue_id, consumer_offset - 1),
            )
        )
    return stats


def _replication_info(broker: Broker) -> dict[str, str]:
    """Role and replication state (`rocketmq cluster list`). Java's runtime info has none
    of this; the names are its config keys and HAService's fields (HA.md)."""
    config = broker.config
    info = {"brokerRole": config.broker_role, "brokerId": str(config.broker_id)}
    ha = broker.ha
    if ha is None:  # a store that does not replicate: an ASYNC_MASTER without slaves
        return info
    if config.is_slave:
        client = ha.client
        info["haMasterAddress"] = ha.ha_master_address() or ""
        info["masterAddr"] = ha.master_address or ""
        connected = client is not None and client.connected_to is not None
        info["haMasterConnected"] = "true" if connected else "false"
    else:
        acked = ha.progress.acked
        info["haServerAddr"] = config.ha_server_addr
        info["haConnectionCount"] = str(ha.progress.connections)
        info["push2SlaveMaxOffset"] = str(acked)
        # the master's view of its slaves' lag, in bytes, as Java's store computes it
        info["slaveFallBehindMuch"] = str(broker.store.max_commit_log_offset - acked)
    return info


# --- the broker's configuration -----------------------------------------------------------


async def update_broker_config(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    """``key=value`` lines applied to the running broker (``mqadmin updateBrokerConfig``)."""
    values = apply_config_update(
        broker.config,
        request.body,
        black_list=broker.config.black_listed(),
        read_only=broker.config.startup_only_keys(),
        source="UPDATE_BROKER_CONFIG",
    )
    if values:
        await broker.config_updated(values.keys())
    return request.response()


def get_broker_config(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    """The effective configuration as properties text (no secrets), its DataVersion in
    ``version``."""
    header = GetBrokerConfigResponseHeader(version=broker.config_version.encode().decode())
    return request.response(
        ext_fields=header.to_ext_fields(), body=broker.config.to_text(secrets=False).encode()
    )


# --- helpers -----------------------------------------------------------------------------


def _connections(channels: dict[Channel, ClientChannel]) -> list[Connection]:
    """A connectionSet (ConsumerConnection, ProducerConnection): one entry per client."""
    return [
        Connection(
            client.client_id,
            getattr(channel, "peer_address", None) or "",
            client.language,
            client.version,
        )
        for channel, client in channels.items()
    ]


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
