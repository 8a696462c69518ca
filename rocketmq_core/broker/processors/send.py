"""SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE (CODES.md §4.1)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ...errors import ConfigError, RemoteProtocolError, RequestRefused
from ...protocol.bodies import TopicConfig
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.command import RemotingCommand
from ...protocol.compression import (
    COMPRESSION_TYPE_MASK,
    inflate_within,
    inflated_size_at_most,
)
from ...protocol.constants import PERM_WRITE, RETRY_GROUP_TOPIC_PREFIX, TIMER_TOPIC
from ...protocol.headers import SEND_V2_NAMES, SendMessageRequestHeader, SendMessageResponseHeader
from ...protocol.message import (
    COMPRESSED,
    MULTI_TAGS,
    RecordError,
    iter_batch,
    pack_host,
    property_value,
)
from ...protocol.recall import RecallHandle
from ...protocol.topic_validation import send_forbidden, topic_problem
from ...remoting.transport import parse_address
from ...store.api import MessageToStore, PutResult, PutStatus
from ..ha.put import durable_and_replicated
from .retry import dead_letter_topic, max_reconsume_times

if TYPE_CHECKING:
    from typing import TypeAlias

    from ...remoting.connection import LaterAnswer
    from ...remoting.processor import RequestContext
    from ..app import Broker
    from ..config import BrokerConfig

    # what a send processor gives the connection: an answer now (a command, or a finished
    # frame), one a callback gives later, or one a task waits for
    SendAnswer: TypeAlias = (
        RemotingCommand | bytes | LaterAnswer | Awaitable[RemotingCommand | bytes]
    )


log = logging.getLogger("rocketmq.broker")

FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


def send_message(broker: Broker, ctx: RequestContext, request: RemotingCommand) -> SendAnswer:
    """Answers inline when the store has no flush to wait for (no task per send); a
    SYNC_MASTER's answer leaves when a slave acks (still no task)."""
    broker.check_ready()
    v2 = request.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)
    header = SendMessageRequestHeader.from_ext_fields(
        request.ext_fields or {}, SEND_V2_NAMES if v2 else None
    )
    if not broker.config.broker_permission & PERM_WRITE:  # brokerPermission, live
        raise RequestRefused(
            ResponseCode.NO_PERMISSION,
            f"the broker[{broker.config.broker_ip1}] sending message is forbidden",
        )
    if broker.config.is_slave:  # before a topic is created: a slave's topics are the master's
        raise RequestRefused(ResponseCode.SERVICE_NOT_AVAILABLE, _slave_refusal(broker.config))
    topic_config = _writable_topic(broker, header)  # before the size: it may inflate the body
    body, sys_flag = _sized_body(broker.config.max_message_size, request.body, header)
    queue_id = header.queue_id
    if queue_id < 0:
        queue_id = broker.random_queue(topic_config.write_queue_nums)
    if queue_id >= max(topic_config.read_queue_nums, topic_config.write_queue_nums):
        raise RequestRefused(
            ResponseCode.INVALID_PARAMETER,
            f"queueId {queue_id} is out of range: topic {header.topic} has"
            f" {topic_config.write_queue_nums} write queues",
        )
    topic = header.topic
    properties = _with_cluster(header.properties or "", broker.config.broker_cluster_name)
    if topic_config.topic_filter_type == "MULTI_TAG":
        sys_flag |= MULTI_TAGS
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        topic, queue_id = _retry_or_dead_letter(broker, header, request, queue_id)
    born_host = _born_host(ctx.peer_address)
    store = broker.store
    recall = None
    if header.batch:
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise RequestRefused(ResponseCode.MESSAGE_ILLEGAL, "a batch cannot go to a retry topic")
        messages = _batch_messages(
            body, header, topic, queue_id, sys_flag, born_host, properties, broker.config
        )
        if broker.put_hooks.act_on(b"\x02".join(message.properties for message in messages)):
            messages = _prepared_batch(broker, messages)
        result = store.append_batch(messages)
        broker.stats.count_put_batch(messages, result)
        uniq = None
        own_properties = properties.encode()  # the batch's: WAIT is read from them
    else:
        message = MessageToStore(
            topic,
            queue_id,
            bytes(body),
            properties.encode(),
            header.flag,
            sys_flag,
            header.born_timestamp,
            born_host,
            header.reconsume_times or 0,
        )
        if broker.put_hooks.act_on(message.properties):
            message = broker.prepare(message)
        result = store.append(message)
        broker.stats.count_put(message, result)
        uniq = property_value(message.properties, b"UNIQ_KEY")
        own_properties = message.properties
        if message.topic == TIMER_TOPIC and uniq and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            recall = _recall_handle(broker, topic, message, uniq)
    ha = broker.ha
    # the CommitLog end a SYNC_MASTER waits for a slave to ack, or -1
    replica_end = ha.after_append(result, own_properties) if ha is not None else -1
    if result.flush_to >= 0 or replica_end >= 0:
        answer = functools.partial(_answer, broker, request, queue_id, uniq, recall)
        return answer_when_settled(broker, ctx, request, result, replica_end, answer)
    return _answer(broker, request, queue_id, uniq, recall, result)


def _slave_refusal(config: BrokerConfig) -> str:
    return (
        "service not available now. It may be caused by one of the following reasons: the"
        " broker's disk is full, messages are put to the slave, message store has been shut"
        f" down, etc. Here broker {config.broker_name} (brokerId {config.broker_id},"
        f" {config.broker_addr}) is a SLAVE: send to its master"
    )


def _recall_handle(broker: Broker, topic: str, message: MessageToStore, uniq: bytes) -> str:
    """What the producer may later cancel the timer message with (RECALL_MESSAGE)."""
    deliver_ms = message.tags_code or 0  # the delay scheduler keeps the delivery time here
    return RecallHandle(topic, broker.config.broker_name, deliver_ms, uniq.decode()).encode()


def answer_when_settled(
    broker: Broker,
    ctx: RequestContext,
    request: RemotingCommand,
    result: PutResult,
    replica_end: int,
    answer: Callable[[PutResult], RemotingCommand | bytes],
) -> SendAnswer:
    """A send that waits for its flush (``result.flush_to`` >= 0: SYNC_FLUSH), for a
    slave's ack of ``replica_end`` (>= 0: SYNC_MASTER), or both: ``answer(result)`` once
    they are done, with the status of what failed (HA.md §3). A store that tells a
    callback (SupportsDurableCallback) lets it leave with no task waiting; a task per
    send cost more than the send, and a group commit wakes the whole group at once."""
    if result.flush_to < 0:
        return answer_when_replicated(broker, ctx, request, result, replica_end, answer)
    when_durable = getattr(broker.store, "when_durable", None)
    if when_durable is None:
        return _answer_when_durable(broker, result, replica_end, answer)
    replica = result.status  # SLAVE_NOT_AVAILABLE already, when after_append found none
    later = ctx.connection.answer_later(request)

    def reply(settled: PutResult) -> None:
        later.answer(_called_back(answer, settled, ctx, request))

    def durable(settled: PutResult) -> None:
        if replica_end < 0:
            if replica is not PutStatus.PUT_OK:
                settled.status = replica
            reply(settled)
            return

        def replicated(acked: bool) -> None:
            if not acked:
                settled.status = PutStatus.FLUSH_SLAVE_TIMEOUT
            reply(settled)

        assert broker.ha is not None  # replica_end >= 0 comes from it
        if broker.ha.progress.acked >= replica_end:  # a slave acked during the flush
            reply(settled)
        else:
            broker.ha.when_replicated(replica_end, replicated)

    try:
        settled_now = when_durable(result, durable)
    except BaseException:
        later.withdraw()  # the dispatch answers with the error instead
        raise
    if not settled_now:
        return later
    later.withdraw()  # durable already: nothing was registered, the answer is now
    if replica_end >= 0:
        return answer_when_replicated(broker, ctx, request, result, replica_end, answer)
    if replica is not PutStatus.PUT_OK:
        result.status = replica
    return answer(result)


async def _answer_when_durable(
    broker: Broker,
    result: PutResult,
    replica_end: int,
    answer: Callable[[PutResult], RemotingCommand | bytes],
) -> RemotingCommand | bytes:
    """answer_when_settled with a store that has no callback: a task waits."""
    return answer(await durable_and_replicated(broker, result, replica_end))


def answer_when_replicated(
    broker: Broker,
    ctx: RequestContext,
    request: RemotingCommand,
    result: PutResult,
    replica_end: int,
    answer: Callable[[PutResult], RemotingCommand | bytes],
) -> LaterAnswer:
    """A SYNC_MASTER send with nothing to flush: ``answer(result)`` leaves once a slave
    acks ``replica_end``, or with FLUSH_SLAVE_TIMEOUT after slaveTimeout (HA.md §3); no
    task waits meanwhile."""
    assert broker.ha is not None  # replica_end >= 0 comes from it
    later = ctx.connection.answer_later(request)

    def replicated(acked: bool) -> None:
        if not acked:
            result.status = PutStatus.FLUSH_SLAVE_TIMEOUT
        later.answer(_called_back(answer, result, ctx, request))

    try:
        broker.ha.when_replicated(replica_end, replicated)
    except BaseException:
        later.withdraw()  # the dispatch answers with the error instead
        raise
    return later


def _called_back(
    answer: Callable[[PutResult], RemotingCommand | bytes],
    result: PutResult,
    ctx: RequestContext,
    request: RemotingCommand,
) -> RemotingCommand | bytes:
    """``answer(result)`` in a callback (the flusher's, a slave's reader): a refusal is the
    answer it stands for, and any other error a SYSTEM_ERROR, since the caller must go on."""
    try:
        return answer(result)
    except RequestRefused as refused:
        return request.response(refused.code, refused.remark)
    except Exception as exc:
        log.exception("cannot answer a send to %s", ctx.peer_address)
        return request.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")


def _answer(
    broker: Broker,
    request: RemotingCommand,
    queue_id: int,
    uniq: bytes | None,
    recall: str | None,
    result: PutResult,
) -> RemotingCommand:
    """The answer to a stored send (the result last: a partial of it answers a callback)."""
    if not result.status.stored:
        raise RequestRefused(result.status.response_code, result.remark or result.status.name)
    # the SendMessageResponseHeader filled in place: a header object costs ~1 us a send
    fields = _answer_template(broker.config.region_id, broker.config.trace_on).copy()
    fields[_MSG_ID] = ",".join(result.msg_ids)
    fields[_QUEUE_ID] = str(queue_id)
    fields[_QUEUE_OFFSET] = str(result.queue_offset)
    if uniq:
        fields[_TRANSACTION_ID] = uniq.decode()
    if recall is not None:
        fields[_RECALL_HANDLE] = recall
    return request.response(result.status.response_code, result.remark or None, fields)


_MSG_ID, _QUEUE_ID, _QUEUE_OFFSET, _TRANSACTION_ID, _RECALL_HANDLE = map(
    SendMessageResponseHeader.wire_name,
    ("msg_id", "queue_id", "queue_offset", "transaction_id", "recall_handle"),
)


@functools.lru_cache(maxsize=8)
def _answer_template(region_id: str, trace_on: bool) -> dict[str, str]:
    """The answer's fields that are the same for every send of a broker."""
    return SendMessageResponseHeader(
        msg_id="", queue_id=0, queue_offset=0, region_id=region_id, trace_on=trace_on
    ).to_ext_fields()


def _sized_body(limit: int, body: bytes, header: SendMessageRequestHeader) -> tuple[bytes, int]:
    """The body to store and its sysFlag, once the body as the producer gave it (inflated,
    for a compressed one; a batch's whole body) is known to fit maxMessageSize.

    Java's clients check the raw body before compressing; checking it here as well
    keeps a small compressed body from storing more than a consumer was promised.
    A compressed body larger than the limit whose raw form fits is stored raw.
    """
    sys_flag = header.sys_flag
    if not sys_flag & COMPRESSED:
        if len(body) > limit:
            raise RequestRefused(ResponseCode.MESSAGE_ILLEGAL, _too_large(header, len(body), limit))
        return body, sys_flag
    if not header.batch:
        bound = inflated_size_at_most(body, sys_flag)
        if bound is not None and bound <= limit:
            return body, sys_flag  # it cannot inflate past the limit: no need to inflate it
    try:
        # keep the inflated body only when it replaces the compressed one: a body over the
        # limit, or a whole batch (the C++ client 1.2.3 compresses those) to split
        keep = limit if len(body) > limit or header.batch else -1
        length, raw = inflate_within(body, sys_flag, keep, 2 * limit)
    except RemoteProtocolError as exc:
        raise RequestRefused(ResponseCode.MESSAGE_ILLEGAL, str(exc)) from None
    if length > limit:
        size = f"more than {2 * limit}" if length > 2 * limit else str(length)
        raise RequestRefused(ResponseCode.MESSAGE_ILLEGAL, _too_large(header, size, limit))
    if raw is not None:
        return raw, sys_flag & ~(COMPRESSED | COMPRESSION_TYPE_MASK)
    return body, sys_flag


def _too_large(header: SendMessageRequestHeader, size: int | str, limit: int) -> str:
    what = "the batch body" if header.batch else "the message body"
    inflated = " (inflated)" if header.sys_flag & COMPRESSED else ""
    return (
        f"{what} is {size} bytes{inflated}; maxMessageSize is {limit}:"
        " split it, or raise maxMessageSize on the broker and the producer"
    )


def _writable_topic(broker: Broker, header: SendMessageRequestHeader) -> TopicConfig:
    topic = header.topic
    problem = topic_problem(topic)
    if problem is not None:
        raise RequestRefused(ResponseCode.INVALID_PARAMETER, problem)
    if send_forbidden(topic):
        raise RequestRefused(
            ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
        )
    config = broker.topics.get(topic)
    if config is None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        config = broker.topics.create_if_missing(topic, 1)
    if config is None:
        config = broker.topics.create_in_send(
            topic, header.default_topic, header.default_topic_queue_nums, 0
        )
    if config is None:
        raise RequestRefused(
            ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!{FAQ}"
        )
    if not config.perm & PERM_WRITE:
        raise RequestRefused(
            ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden"
        )
    return config


def _retry_or_dead_letter(
    broker: Broker, header: SendMessageRequestHeader, request: RemotingCommand, queue_id: int
) -> tuple[str, int]:
    """A message re-sent to %RETRY%group goes to %DLQ%group past maxReconsumeTimes."""
    group = header.topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
    limit = max_reconsume_times(broker.groups.require(group), request, header.max_reconsume_times)
    if (header.reconsume_times or 0) > limit:
        return dead_letter_topic(broker, group), 0
    return header.topic, queue_id


def _with_cluster(properties: str, cluster: str) -> str:
    if "CLUSTER\x01" in properties:
        return properties
    if properties and not properties.endswith("\x02"):
        properties += "\x02"
    return f"{properties}CLUSTER\x01{cluster}\x02"


@functools.lru_cache(maxsize=4096)
def _born_host(peer: str) -> bytes:
    # cached: a connection sends many messages, and parsing an address costs ~10 us
    try:
        host, port = parse_address(peer)
        return pack_host(host, port)
    except (ConfigError, ValueError):  # not an IP peer (a test transport)
        return pack_host("127.0.0.1", 0)


def _batch_messages(
    body: bytes,
    header: SendMessageRequestHeader,
    topic: str,
    queue_id: int,
    sys_flag: int,
    born_host: bytes,
    batch_properties: str,
    config: BrokerConfig,
) -> list[MessageToStore]:
    batch_level = _batch_level_pairs(batch_properties.encode())
    most = config.max_batch_message_count
    from . import send_fast  # its compiled helper and switch (it imports this module)

    helper = send_fast.COMPILED
    if helper is not None and type(body) is bytes:  # None: a body the Python code reads
        made = helper.batch_messages(
            body, topic, queue_id, sys_flag, header.born_timestamp, born_host,
            header.reconsume_times or 0, batch_level, most, MessageToStore,
        )  # fmt: skip
        if made is not None:
            return made
    messages: list[MessageToStore] = []
    try:
        for item in iter_batch(bytes(body)):
            if len(messages) == most:  # refused before the rest is read
                raise RequestRefused(
                    ResponseCode.MESSAGE_ILLEGAL,
                    f"the batch holds more than {most} messages (maxBatchMessageCount):"
                    " send it in smaller batches",
                )
            properties = _merge(item.properties, batch_level)
            messages.append(
                MessageToStore(
                    topic,
                    queue_id,
                    item.body,
                    properties,
                    item.flag,
                    sys_flag,
                    header.born_timestamp,
                    born_host,
                    header.reconsume_times or 0,
                )
            )
    except RecordError as exc:
        raise RequestRefused(ResponseCode.MESSAGE_ILLEGAL, f"bad batch body: {exc}") from None
    if not messages:
        raise RequestRefused(ResponseCode.MESSAGE_ILLEGAL, "the batch holds no messages")
    return messages


def _prepared_batch(broker: Broker, messages: list[MessageToStore]) -> list[MessageToStore]:
    """The batch's records through the put hooks; they must still share one queue."""
    prepared = [broker.prepare(message) for message in messages]
    first = prepared[0]
    if any(m.topic != first.topic or m.queue_id != first.queue_id for m in prepared):
        raise RequestRefused(
            ResponseCode.MESSAGE_ILLEGAL,
            "the records of a batch must stay in one queue: send messages with different"
            " delays, deliver times or transactions one by one",
        )
    return prepared


def _batch_level_pairs(batch_level: bytes) -> list[tuple[bytes, bytes, bytes]]:
    """Each batch-level property as (``name\\x01``, ``\\x02name\\x01``, ``pair\\x02``):
    what ``_merge`` looks for and adds, worked out once per batch."""
    pairs = []
    for pair in batch_level.split(b"\x02"):
        name, separator, _value = pair.partition(b"\x01")
        if separator and name:
            pairs.append((name + b"\x01", b"\x02" + name + b"\x01", pair + b"\x02"))
    return pairs


def _merge(own: bytes, batch_level: list[tuple[bytes, bytes, bytes]]) -> bytes:
    """The record's own properties plus batch-level keys it does not have (MESSAGE.md §6)."""
    merged = own if not own or own.endswith(b"\x02") else own + b"\x02"
    for first, inside, pair in batch_level:
        if not (own.startswith(first) or inside in own):
            merged += pair
    return merged
