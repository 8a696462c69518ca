"""What a consumer says about itself: ConsumerRunningInfo, its answer to
GET_CONSUMER_RUNNING_INFO (307), which the broker relays to ``mqadmin consumerStatus``.

Java writes it with fastjson's defaults: the mqTable keyed by the MessageQueue object.
The C++ client builds the same shape by hand: pretty-printed queue keys and process
queue entries, longs as strings, no statusTable, and an empty mqTable written as
``"mqTable":}``; ``decode`` reads both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...errors import BodyError
from .. import fastjson
from ..heartbeat import MessageQueue, SubscriptionData
from ..json_body import body_decoder, load_object, to_int
from .queue_keys import decode_queue_table, encode_queue_table

# the property names Java's admin tools read (consumerStatus analyses the first three)
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
PROP_CLIENT_VERSION = "PROP_CLIENT_VERSION"
PROP_NAMESERVER_ADDR = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE = "PROP_THREADPOOL_CORE_SIZE"

# the C++ client's body when it owns no queue: the table's braces lost (not JSON)
_CPP_EMPTY_MQ_TABLE = b'{"mqTable":}'


@dataclass(slots=True)
class ProcessQueueInfo:
    """One owned queue: the committed offset, what is pulled and not yet consumed, the
    orderly lock, and when it was last pulled and consumed (ms)."""

    commit_offset: int = 0
    cached_msg_min_offset: int = 0
    cached_msg_max_offset: int = 0
    cached_msg_count: int = 0
    transaction_msg_min_offset: int = 0
    transaction_msg_max_offset: int = 0
    transaction_msg_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: int = 0
    dropped: bool = False  # "droped" on the wire, as Java spells it
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "cachedMsgCount": self.cached_msg_count,
            "cachedMsgMaxOffset": self.cached_msg_max_offset,
            "cachedMsgMinOffset": self.cached_msg_min_offset,
            "commitOffset": self.commit_offset,
            "droped": self.dropped,
            "lastConsumeTimestamp": self.last_consume_timestamp,
            "lastLockTimestamp": self.last_lock_timestamp,
            "lastPullTimestamp": self.last_pull_timestamp,
            "locked": self.locked,
            "transactionMsgCount": self.transaction_msg_count,
            "transactionMsgMaxOffset": self.transaction_msg_max_offset,
            "transactionMsgMinOffset": self.transaction_msg_min_offset,
            "tryUnlockTimes": self.try_unlock_times,
        }

    @classmethod
    def from_json(cls, value: Any) -> ProcessQueueInfo:
        if not isinstance(value, dict):
            raise BodyError(f"{value!r} is not a process queue entry of the mqTable")

        def number(name: str) -> int:  # the C++ client quotes its longs
            return to_int(value.get(name, 0), name, "mqTable")

        return cls(
            commit_offset=number("commitOffset"),
            cached_msg_min_offset=number("cachedMsgMinOffset"),
            cached_msg_max_offset=number("cachedMsgMaxOffset"),
            cached_msg_count=number("cachedMsgCount"),
            transaction_msg_min_offset=number("transactionMsgMinOffset"),
            transaction_msg_max_offset=number("transactionMsgMaxOffset"),
            transaction_msg_count=number("transactionMsgCount"),
            locked=_flag(value.get("locked")),
            try_unlock_times=number("tryUnlockTimes"),
            last_lock_timestamp=number("lastLockTimestamp"),
            dropped=_flag(value.get("droped")),
            last_pull_timestamp=number("lastPullTimestamp"),
            last_consume_timestamp=number("lastConsumeTimestamp"),
        )


@dataclass(slots=True)
class ConsumeStatus:
    """How one subscribed topic is going: pull and consume response times (ms) and rates
    (per second), and the messages that failed in the last hour."""

    pull_rt: float = 0.0
    pull_tps: float = 0.0
    consume_rt: float = 0.0
    consume_ok_tps: float = 0.0
    consume_failed_tps: float = 0.0
    consume_failed_msgs: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "consumeFailedMsgs": self.consume_failed_msgs,
            "consumeFailedTPS": float(self.consume_failed_tps),
            "consumeOKTPS": float(self.consume_ok_tps),
            "consumeRT": float(self.consume_rt),
            "pullRT": float(self.pull_rt),
            "pullTPS": float(self.pull_tps),
        }

    @classmethod
    def from_json(cls, value: Any) -> ConsumeStatus:
        if not isinstance(value, dict):
            raise BodyError(f"{value!r} is not a consume status of the statusTable")
        return cls(
            float(value.get("pullRT") or 0),
            float(value.get("pullTPS") or 0),
            float(value.get("consumeRT") or 0),
            float(value.get("consumeOKTPS") or 0),
            float(value.get("consumeFailedTPS") or 0),
            to_int(value.get("consumeFailedMsgs", 0), "consumeFailedMsgs", "statusTable"),
        )


@dataclass(slots=True)
class ConsumerRunningInfo:
    """A consumer's settings (``properties``, the PROP_* names and its own), what it
    subscribes to, the queues it owns (``mq_table``), per-topic rates (``status_table``)
    and, when asked for and available, a dump of its threads (``jstack``)."""

    properties: dict[str, str] = field(default_factory=dict)
    subscription_set: list[SubscriptionData] = field(default_factory=list)
    mq_table: dict[MessageQueue, ProcessQueueInfo] = field(default_factory=dict)
    status_table: dict[str, ConsumeStatus] = field(default_factory=dict)
    jstack: str | None = None

    def encode(self) -> bytes:
        """As Java's client writes it: a TreeSet, TreeMaps (so sorted), nulls left out."""
        queues = dict(sorted(self.mq_table.items()))
        value: dict[str, Any] = {} if self.jstack is None else {"jstack": self.jstack}
        value["mqTable"] = encode_queue_table(queues, ProcessQueueInfo.to_json)
        value["properties"] = dict(sorted(self.properties.items()))
        value["statusTable"] = {
            topic: status.to_json() for topic, status in sorted(self.status_table.items())
        }
        # Java's SubscriptionData orders by "topic@subString"
        subscriptions = sorted(self.subscription_set, key=lambda s: f"{s.topic}@{s.sub_string}")
        value["subscriptionSet"] = [subscription.to_json() for subscription in subscriptions]
        return fastjson.dumps(value, standard=False)

    @classmethod
    @body_decoder("consumer running info")
    def decode(cls, data: bytes) -> ConsumerRunningInfo:
        """Java's form or the C++ client's."""
        if data.startswith(_CPP_EMPTY_MQ_TABLE):
            data = b'{"mqTable":{}' + data[len(_CPP_EMPTY_MQ_TABLE) :]
        value = load_object(data, "consumer running info")
        properties = _or_empty(value.get("properties"))
        statuses = _or_empty(value.get("statusTable"))
        if not isinstance(properties, dict) or not isinstance(statuses, dict):
            raise BodyError("the properties or statusTable of a consumer running info is not a map")
        jstack = value.get("jstack")
        return cls(
            {str(name): _text(item) for name, item in properties.items()},
            [SubscriptionData.from_json(item) for item in value.get("subscriptionSet") or []],
            decode_queue_table(
                value.get("mqTable"), ProcessQueueInfo.from_json, "consumer running info", "mqTable"
            ),
            {str(topic): ConsumeStatus.from_json(item) for topic, item in statuses.items()},
            None if jstack is None else str(jstack),
        )


def _or_empty(raw: Any) -> Any:
    return {} if raw is None else raw


def _flag(raw: Any) -> bool:
    return raw is True or (isinstance(raw, str) and raw.lower() == "true")


def _text(raw: Any) -> str:
    """A property as the string Java's Properties would print (true, not True)."""
    if isinstance(raw, bool):
        return "true" if raw else "false"
    return str(raw)
