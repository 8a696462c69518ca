"""Messages between the two protocols: a gRPC Message as the properties and flags of a
remoting send, and a stored message as the gRPC Message a consumer receives
(GRPC.md §5, §6)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

# the longest a 5.x producer may hold off check-backs, the broker's own limit: Apache's
# proxy refuses longer (maxTransactionRecoverySecond)
from rocketmq_core.broker.transactions import MAX_CHECK_IMMUNITY_S
from rocketmq_core.protocol.message import (
    COMPRESSED,
    TRANSACTION_PREPARED,
    StoredMessage,
    host_address,
)

from .status import Code, ProxyError
from .v2 import definition_pb2 as pb

TAGS = "TAGS"
KEYS = "KEYS"
UNIQ_KEY = "UNIQ_KEY"
WAIT = "WAIT"
PGROUP = "PGROUP"
TRAN_MSG = "TRAN_MSG"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
SHARDING_KEY = "__SHARDINGKEY"
TRACE_CONTEXT = "TRACE_CONTEXT"
BORN_HOST = "__BORNHOST"
CHECK_IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"
RECONSUME_TIME = "RECONSUME_TIME"
POP_CK = "POP_CK"
DELAY = "DELAY"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"

# properties the broker and the protocol own: a user property may not use these names
SYSTEM_PROPERTY_NAMES = frozenset(
    {
        *(TAGS, KEYS, UNIQ_KEY, WAIT, PGROUP, TRAN_MSG, TIMER_DELIVER_MS, SHARDING_KEY),
        *(TRACE_CONTEXT, BORN_HOST, CHECK_IMMUNITY, RECONSUME_TIME, POP_CK, DELAY),
        *(TIMER_DELAY_MS, "MAX_RECONSUME_TIMES", "REAL_TOPIC", "REAL_QID", "RETRY_TOPIC"),
        *("MIN_OFFSET", "MAX_OFFSET", "ORIGIN_MESSAGE_ID", "TIMER_OUT_MS", "CLUSTER"),
        *("1ST_POP_TIME", "__transactionId__", "TRANSACTION_CHECK_TIMES", DLQ_ORIGIN_TOPIC),
        *("TRAN_PREPARED_QUEUE_OFFSET", "TRAN_GIVEN_UP_HALF_OFFSET", "TRAN_DECIDED_LATE"),
        DLQ_ORIGIN_MESSAGE_ID,
    }
)


@dataclass(slots=True)
class OutgoingMessage:
    """What a remoting send needs of one gRPC message."""

    topic: str
    message_id: str
    properties: dict[str, str]
    body: bytes
    sys_flag: int
    born_timestamp: int  # ms
    message_group: str | None
    transactional: bool


def timestamp_ms(value: Timestamp) -> int:
    return value.seconds * 1000 + value.nanos // 1_000_000


def to_timestamp(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def to_duration(ms: int) -> Duration:
    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def outgoing(message: pb.Message, peer_host: str) -> OutgoingMessage:
    """The remoting send of ``message``; ProxyError for what RocketMQ's proxy refuses."""
    system = message.system_properties
    topic = message.topic.name
    if not topic:
        raise ProxyError(Code.ILLEGAL_TOPIC, "the message names no topic")
    if not system.message_id:
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, f"a message to {topic!r} has no message id")
    for name in message.user_properties:
        if name in SYSTEM_PROPERTY_NAMES:
            raise ProxyError(
                Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                f"user property {name!r} is a system property name: rename it",
            )
    properties = dict(message.user_properties)
    properties[UNIQ_KEY] = system.message_id
    properties[PGROUP] = topic  # a 5.x producer's group is its topic
    properties[WAIT] = "true"
    if system.HasField("tag") and system.tag:
        properties[TAGS] = system.tag
    if system.keys:
        properties[KEYS] = " ".join(system.keys)
    kind = system.message_type
    group = system.message_group if system.HasField("message_group") else None
    if kind == pb.FIFO and not group:
        raise ProxyError(
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"FIFO message {system.message_id} has no message group",
        )
    if group:
        properties[SHARDING_KEY] = group
    if system.HasField("delivery_timestamp"):
        properties[TIMER_DELIVER_MS] = str(timestamp_ms(system.delivery_timestamp))
    elif kind == pb.DELAY:
        raise ProxyError(
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"DELAY message {system.message_id} has no delivery timestamp",
        )
    if system.HasField("trace_context"):
        properties[TRACE_CONTEXT] = system.trace_context
    properties[BORN_HOST] = system.born_host or peer_host
    sys_flag = 0
    if system.body_encoding == pb.GZIP:
        sys_flag |= COMPRESSED
    transactional = kind == pb.TRANSACTION
    if transactional:
        properties[TRAN_MSG] = "true"
        sys_flag |= TRANSACTION_PREPARED
        if system.HasField("orphaned_transaction_recovery_duration"):
            seconds = system.orphaned_transaction_recovery_duration.seconds
            if seconds > MAX_CHECK_IMMUNITY_S:
                raise ProxyError(
                    Code.BAD_REQUEST,
                    f"transaction message {system.message_id} asks for an orphaned"
                    f" transaction recovery duration of {seconds} s; the most is"
                    f" {MAX_CHECK_IMMUNITY_S} s",
                )
            properties[CHECK_IMMUNITY] = str(max(0, seconds))
    if system.HasField("delivery_attempt"):
        properties[RECONSUME_TIME] = str(max(0, system.delivery_attempt - 1))
    return OutgoingMessage(
        topic=topic,
        message_id=system.message_id,
        properties=properties,
        body=message.body,
        sys_flag=sys_flag,
        born_timestamp=timestamp_ms(system.born_timestamp),
        message_group=group,
        transactional=transactional,
    )


def _message_type(properties: dict[str, str]) -> pb.MessageType:
    if properties.get(TRAN_MSG, "").lower() == "true":
        return pb.TRANSACTION
    if TIMER_DELIVER_MS in properties or DELAY in properties or TIMER_DELAY_MS in properties:
        return pb.DELAY
    if properties.get(SHARDING_KEY):
        return pb.FIFO
    return pb.NORMAL


def incoming(
    stored: StoredMessage,
    topic: str,
    *,
    receipt_handle: str | None = None,
    namespace: str = "",
) -> pb.Message:
    """``stored`` as a consumer receives it, under ``topic`` (a retry shows its origin)."""
    properties = stored.properties
    system = pb.SystemProperties(
        message_id=properties.get(UNIQ_KEY) or stored.offset_msg_id,
        body_digest=pb.Digest(type=pb.MD5, checksum=hashlib.md5(stored.body).hexdigest().upper()),
        body_encoding=pb.GZIP if stored.sys_flag & COMPRESSED else pb.IDENTITY,
        message_type=_message_type(properties),
        born_timestamp=to_timestamp(stored.born_timestamp),
        born_host=properties.get(BORN_HOST) or host_address(stored.born_host).rsplit(":", 1)[0],
        store_timestamp=to_timestamp(stored.store_timestamp),
        store_host=host_address(stored.store_host),
        queue_id=stored.queue_id,
        queue_offset=stored.queue_offset,
        delivery_attempt=stored.reconsume_times + 1,
    )
    if TAGS in properties:
        system.tag = properties[TAGS]
    keys = [key for key in properties.get(KEYS, "").split(" ") if key]
    if keys:
        system.keys.extend(keys)
    if TIMER_DELIVER_MS in properties and properties[TIMER_DELIVER_MS].isdigit():
        system.delivery_timestamp.CopyFrom(to_timestamp(int(properties[TIMER_DELIVER_MS])))
    if properties.get(SHARDING_KEY):
        system.message_group = properties[SHARDING_KEY]
    if TRACE_CONTEXT in properties:
        system.trace_context = properties[TRACE_CONTEXT]
    if receipt_handle is not None:
        system.receipt_handle = receipt_handle
    if DLQ_ORIGIN_TOPIC in properties:
        system.dead_letter_queue.CopyFrom(
            pb.DeadLetterQueue(
                topic=properties[DLQ_ORIGIN_TOPIC],
                message_id=properties.get(DLQ_ORIGIN_MESSAGE_ID, ""),
            )
        )
    user = {k: v for k, v in properties.items() if k not in SYSTEM_PROPERTY_NAMES}
    return pb.Message(
        topic=pb.Resource(resource_namespace=namespace, name=topic),
        user_properties=user,
        system_properties=system,
        body=stored.body,
    )
