"""Client bodies: HeartbeatData and subscriptions (CODES.md §5.1), queue lists (§5.2-5.3).

Java sends enums by name and ``subVersion`` as a number; the C++ client sends enum
ordinals, ``subVersion`` as a string, omits empty sets, and fills ``codeSet`` with
meaningless values, so the broker derives tag hash codes from the tags itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from ..errors import BodyError
from . import fastjson
from .codes import ResponseCode
from .json_body import body_decoder, load_object
from .message import tags_code

SUB_ALL = "*"


class ConsumeType(IntEnum):
    CONSUME_ACTIVELY = 0  # pull
    CONSUME_PASSIVELY = 1  # push
    CONSUME_POP = 2


class MessageModel(IntEnum):
    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(IntEnum):
    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


def enum_of(kind: type[IntEnum], raw: Any, default: IntEnum | None) -> Any:
    """An enum sent by name (Java) or by ordinal (C++); ``default`` when absent."""
    if raw is None:
        return default
    try:
        return kind[raw] if isinstance(raw, str) and not raw.isdigit() else kind(int(raw))
    except (KeyError, ValueError):
        raise BodyError(f"{raw!r} is not a {kind.__name__}") from None


def parse_tags(expression: str | None) -> list[str]:
    """Tags of a TAG expression (``"TagA || TagB"``); [] for ``*`` (everything)."""
    if expression is None or not expression.strip() or expression.strip() == SUB_ALL:
        return []
    return [tag.strip() for tag in expression.split("||") if tag.strip()]


@dataclass(slots=True)
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: list[str] = field(default_factory=list)
    code_set: frozenset[int] = frozenset()
    sub_version: int = 0
    expression_type: str = "TAG"
    class_filter_mode: bool = False

    @classmethod
    def of(cls, topic: str, expression: str | None, sub_version: int = 0) -> SubscriptionData:
        tags = parse_tags(expression)
        return cls(
            topic,
            (expression or SUB_ALL).strip() or SUB_ALL,
            tags,
            frozenset(tags_code(tag) for tag in tags),
            sub_version,
        )

    @property
    def tag_filter(self) -> frozenset[int] | None:
        """The store's filter: None takes every message."""
        return None if not self.tags_set else self.code_set

    @classmethod
    def from_json(cls, value: Any) -> SubscriptionData:
        if not isinstance(value, dict) or not isinstance(value.get("topic"), str):
            raise BodyError("a subscription has no topic")
        expression = value.get("subString")
        tags = value.get("tagsSet")
        if tags is None:
            tags = parse_tags(expression)
        tags = [str(tag) for tag in tags]
        try:
            sub_version = int(value.get("subVersion", 0) or 0)
        except (TypeError, ValueError):
            raise BodyError(f"subVersion {value.get('subVersion')!r} is not a number") from None
        return cls(
            value["topic"],
            str(expression) if expression is not None else SUB_ALL,
            tags,
            frozenset(tags_code(tag) for tag in tags),  # never the client's codeSet
            sub_version,
            str(value.get("expressionType") or "TAG"),
            bool(value.get("classFilterMode", False)),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": sorted(self.code_set),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": self.tags_set,
            "topic": self.topic,
        }


@dataclass(slots=True)
class ConsumerData:
    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscriptions: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False

    @classmethod
    def from_json(cls, value: Any) -> ConsumerData:
        if not isinstance(value, dict) or not value.get("groupName"):
            raise BodyError("a consumerDataSet entry has no groupName")
        return cls(
            str(value["groupName"]),
            enum_of(ConsumeType, value.get("consumeType"), ConsumeType.CONSUME_PASSIVELY),
            enum_of(MessageModel, value.get("messageModel"), MessageModel.CLUSTERING),
            enum_of(
                ConsumeFromWhere,
                value.get("consumeFromWhere"),
                ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            ),
            [SubscriptionData.from_json(s) for s in value.get("subscriptionDataSet") or []],
            bool(value.get("unitMode", False)),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "consumeFromWhere": self.consume_from_where.name,
            "consumeType": self.consume_type.name,
            "groupName": self.group_name,
            "messageModel": self.message_model.name,
            "subscriptionDataSet": [s.to_json() for s in self.subscriptions],
            "unitMode": self.unit_mode,
        }


@dataclass(slots=True)
class HeartbeatData:
    client_id: str
    producer_groups: list[str] = field(default_factory=list)
    consumers: list[ConsumerData] = field(default_factory=list)

    @classmethod
    @body_decoder("heartbeat")
    def decode(cls, data: bytes) -> HeartbeatData:
        try:
            value = fastjson.loads(data)
        except ValueError as exc:  # too deep or not UTF-8 keep their INVALID_PARAMETER
            code = getattr(exc, "response_code", ResponseCode.SYSTEM_ERROR)
            raise BodyError(f"the heartbeat body is not JSON: {exc}", response_code=code) from None
        if not isinstance(value, dict) or not value.get("clientID"):
            raise BodyError("the heartbeat body has no clientID")
        producers = value.get("producerDataSet") or []
        return cls(
            str(value["clientID"]),
            [str(p["groupName"]) for p in producers if isinstance(p, dict) and p.get("groupName")],
            [ConsumerData.from_json(c) for c in value.get("consumerDataSet") or []],
        )

    def encode(self) -> bytes:
        return fastjson.dumps(
            {
                "clientID": self.client_id,
                "consumerDataSet": [c.to_json() for c in self.consumers],
                "producerDataSet": [{"groupName": g} for g in self.producer_groups],
            }
        )


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json(cls, value: Any) -> MessageQueue:
        try:
            return cls(str(value["topic"]), str(value["brokerName"]), int(value["queueId"]))
        except (KeyError, TypeError, ValueError):
            raise BodyError(f"{value!r} is not a message queue") from None


@dataclass(slots=True)
class ConsumerIdList:
    """GET_CONSUMER_LIST_BY_GROUP's reply body (the C++ client parses it strictly)."""

    consumer_id_list: list[str] = field(default_factory=list)

    def encode(self) -> bytes:
        return fastjson.dumps({"consumerIdList": self.consumer_id_list})

    @classmethod
    @body_decoder("consumer list")
    def decode(cls, body: bytes) -> ConsumerIdList:
        value = load_object(body, "consumer list")
        return cls([str(client_id) for client_id in value.get("consumerIdList") or []])


@dataclass(slots=True)
class LockBatchRequest:
    """LOCK_BATCH_MQ's and UNLOCK_BATCH_MQ's body (§5.2); C++ omits onlyThisBroker."""

    consumer_group: str
    client_id: str
    queues: list[MessageQueue]
    only_this_broker: bool = False

    @classmethod
    @body_decoder("lock request")
    def decode(cls, body: bytes | None) -> LockBatchRequest:
        if not body:
            raise BodyError("a lock request needs a body naming the group, client and queues")
        value = fastjson.loads(body)
        if not isinstance(value, dict):
            raise BodyError("a lock request body must be a JSON object")
        group, client_id = value.get("consumerGroup"), value.get("clientId")
        if not isinstance(group, str) or not group or not isinstance(client_id, str):
            raise BodyError("a lock request needs consumerGroup and clientId")
        queues = value.get("mqSet") or []
        if not isinstance(queues, list):
            raise BodyError("mqSet must be a list of message queues")
        return cls(
            group,
            client_id,
            [MessageQueue.from_json(queue) for queue in queues],
            bool(value.get("onlyThisBroker", False)),
        )

    def encode(self) -> bytes:
        return fastjson.dumps(
            {
                "consumerGroup": self.consumer_group,
                "clientId": self.client_id,
                "onlyThisBroker": self.only_this_broker,
                "mqSet": [queue.to_json() for queue in self.queues],
            }
        )


@dataclass(slots=True)
class LockBatchResponse:
    """LOCK_BATCH_MQ's reply body: the queues now held by the asking client."""

    lock_ok_mq_set: list[MessageQueue] = field(default_factory=list)

    def encode(self) -> bytes:
        return fastjson.dumps({"lockOKMQSet": [queue.to_json() for queue in self.lock_ok_mq_set]})

    @classmethod
    @body_decoder("lock reply")
    def decode(cls, body: bytes | None) -> LockBatchResponse:
        """An empty body (the C++ client accepts one) holds no queue."""
        if not body:
            return cls()
        value = fastjson.loads(body)
        if not isinstance(value, dict):
            raise BodyError("a lock reply body must be a JSON object")
        return cls([MessageQueue.from_json(queue) for queue in value.get("lockOKMQSet") or []])
