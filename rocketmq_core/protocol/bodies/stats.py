"""How far queues and consumer groups have got: TopicStatsTable (GET_TOPIC_STATS_INFO),
ConsumeStats (GET_CONSUME_STATS), QueryConsumeTimeSpanBody (QUERY_CONSUME_TIME_SPAN),
ConsumeStatsList (GET_BROKER_CONSUME_STATS) and BrokerStatsData (VIEW_BROKER_STATS_DATA).

Java writes the first two with fastjson's defaults whatever the client: MessageQueue
objects as map keys (CODES.md §5.3).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ...errors import BodyError
from .. import fastjson
from ..heartbeat import MessageQueue
from ..json_body import body_decoder, load_object, to_int
from .queue_keys import decode_queue_table, encode_queue_table


@dataclass(slots=True)
class TopicOffset:
    """One queue of a TopicStatsTable."""

    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0  # store time of its last message, ms (0: none)

    def to_json(self) -> dict[str, Any]:
        return {
            "lastUpdateTimestamp": self.last_update_timestamp,
            "maxOffset": self.max_offset,
            "minOffset": self.min_offset,
        }

    @classmethod
    def from_json(cls, value: Any) -> TopicOffset:
        return cls(
            to_int(value.get("minOffset", 0), "minOffset", "topicOffset"),
            to_int(value.get("maxOffset", 0), "maxOffset", "topicOffset"),
            to_int(value.get("lastUpdateTimestamp", 0), "lastUpdateTimestamp", "topicOffset"),
        )


@dataclass(slots=True)
class TopicStatsTable:
    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)

    def encode(self) -> bytes:
        table = encode_queue_table(self.offset_table, TopicOffset.to_json)
        return fastjson.dumps({"offsetTable": table}, standard=False)

    @classmethod
    @body_decoder("topic stats")
    def decode(cls, data: bytes) -> TopicStatsTable:
        value = load_object(data, "topic stats")
        table = value.get("offsetTable")
        return cls(decode_queue_table(table, TopicOffset.from_json, "topic stats"))


@dataclass(slots=True)
class OffsetWrapper:
    """One queue of a ConsumeStats: the broker's end and where the group is."""

    broker_offset: int = 0
    consumer_offset: int = 0
    pull_offset: int = 0
    last_timestamp: int = 0  # store time of the last consumed message, ms (0: none)

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "lastTimestamp": self.last_timestamp,
            "pullOffset": self.pull_offset,
        }

    @classmethod
    def from_json(cls, value: Any) -> OffsetWrapper:
        return cls(
            to_int(value.get("brokerOffset", 0), "brokerOffset", "offsetWrapper"),
            to_int(value.get("consumerOffset", 0), "consumerOffset", "offsetWrapper"),
            to_int(value.get("pullOffset", 0), "pullOffset", "offsetWrapper"),
            to_int(value.get("lastTimestamp", 0), "lastTimestamp", "offsetWrapper"),
        )


@dataclass(slots=True)
class ConsumeStats:
    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def encode(self) -> bytes:
        return fastjson.dumps(self.to_json(), standard=False)

    def to_json(self) -> dict[Any, Any]:
        table = encode_queue_table(self.offset_table, OffsetWrapper.to_json)
        return {"consumeTps": float(self.consume_tps), "offsetTable": table}

    @classmethod
    def from_json(cls, value: Any) -> ConsumeStats:
        if not isinstance(value, dict):
            raise BodyError("a consume stats entry is not a JSON object")
        return cls(
            decode_queue_table(value.get("offsetTable"), OffsetWrapper.from_json, "consume stats"),
            float(value.get("consumeTps") or 0),
        )

    @classmethod
    @body_decoder("consume stats")
    def decode(cls, data: bytes) -> ConsumeStats:
        return cls.from_json(load_object(data, "consume stats"))

    @property
    def total_diff(self) -> int:
        """Messages the group has yet to consume (Java's computeTotalDiff)."""
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())


@dataclass(slots=True)
class ConsumeStatsList:
    """GET_BROKER_CONSUME_STATS: per subscription group, a ConsumeStats per topic it has
    offsets in, and the sum of their lags (METRICS.md §3.4, 4.9's shape)."""

    broker_addr: str = ""
    consume_stats_list: list[dict[str, list[ConsumeStats]]] = field(default_factory=list)
    total_diff: int = 0

    def encode(self) -> bytes:
        groups = [
            {group: [stats.to_json() for stats in per_topic] for group, per_topic in entry.items()}
            for entry in self.consume_stats_list
        ]
        body = {
            "brokerAddr": self.broker_addr,
            "consumeStatsList": groups,
            "totalDiff": self.total_diff,
        }
        return fastjson.dumps(body, standard=False)

    @classmethod
    @body_decoder("consume stats list")
    def decode(cls, data: bytes) -> ConsumeStatsList:
        value = load_object(data, "consume stats list")
        entries = value.get("consumeStatsList") or []
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise BodyError("the consumeStatsList of the consume stats list is not a list of maps")
        return cls(
            str(value.get("brokerAddr") or ""),
            [
                {str(group): [ConsumeStats.from_json(s) for s in per_topic or []]}
                for entry in entries
                for group, per_topic in entry.items()
            ],
            to_int(value.get("totalDiff", 0), "totalDiff", "consume stats list"),
        )


@dataclass(slots=True)
class BrokerStatsItem:
    """One window of a broker statistic: its increase, per second, per call."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"avgpt": float(self.avgpt), "sum": self.sum, "tps": float(self.tps)}

    @classmethod
    def from_json(cls, value: Any) -> BrokerStatsItem:
        if not isinstance(value, dict):
            return cls()
        return cls(
            to_int(value.get("sum", 0), "sum", "broker stats"),
            float(value.get("tps") or 0),
            float(value.get("avgpt") or 0),
        )


@dataclass(slots=True)
class BrokerStatsData:
    """VIEW_BROKER_STATS_DATA: one statistic over the last minute, hour and day."""

    stats_minute: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_hour: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_day: BrokerStatsItem = field(default_factory=BrokerStatsItem)

    def encode(self) -> bytes:
        return fastjson.dumps(
            {
                "statsDay": self.stats_day.to_json(),
                "statsHour": self.stats_hour.to_json(),
                "statsMinute": self.stats_minute.to_json(),
            }
        )

    @classmethod
    @body_decoder("broker stats")
    def decode(cls, data: bytes) -> BrokerStatsData:
        value = load_object(data, "broker stats")
        return cls(
            BrokerStatsItem.from_json(value.get("statsMinute")),
            BrokerStatsItem.from_json(value.get("statsHour")),
            BrokerStatsItem.from_json(value.get("statsDay")),
        )


def java_date(millis: int) -> str:
    """Java's ``yyyy-MM-dd#HH:mm:ss:SSS`` in local time, as QueueTimeSpan's *Str getters."""
    seconds, rest = divmod(millis, 1000)
    return f"{datetime.fromtimestamp(seconds):%Y-%m-%d#%H:%M:%S}:{rest:03d}"


@dataclass(slots=True)
class QueueTimeSpan:
    """One queue of QUERY_CONSUME_TIME_SPAN: store times (ms) of its first and last
    messages and of the group's last consumed one, and how long the next one has waited.
    The ``*Str`` fields Java adds are written from these and not read back."""

    message_queue: MessageQueue
    min_time_stamp: int = 0
    max_time_stamp: int = 0
    consume_time_stamp: int = 0
    delay_time: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "consumeTimeStamp": self.consume_time_stamp,
            "consumeTimeStampStr": java_date(self.consume_time_stamp),
            "delayTime": self.delay_time,
            "maxTimeStamp": self.max_time_stamp,
            "maxTimeStampStr": java_date(self.max_time_stamp),
            "messageQueue": self.message_queue.to_json(),
            "minTimeStamp": self.min_time_stamp,
            "minTimeStampStr": java_date(self.min_time_stamp),
        }

    @classmethod
    def from_json(cls, value: Any) -> QueueTimeSpan:
        if not isinstance(value, dict):
            raise BodyError(f"{value!r} is not a queue time span")
        what = "queueTimeSpan"
        return cls(
            MessageQueue.from_json(value.get("messageQueue")),
            to_int(value.get("minTimeStamp", 0), "minTimeStamp", what),
            to_int(value.get("maxTimeStamp", 0), "maxTimeStamp", what),
            to_int(value.get("consumeTimeStamp", 0), "consumeTimeStamp", what),
            to_int(value.get("delayTime", 0), "delayTime", what),
        )


@dataclass(slots=True)
class QueryConsumeTimeSpanBody:
    consume_time_span_set: list[QueueTimeSpan] = field(default_factory=list)

    def encode(self) -> bytes:
        spans = [span.to_json() for span in self.consume_time_span_set]
        return fastjson.dumps({"consumeTimeSpanSet": spans})

    @classmethod
    @body_decoder("consume time span")
    def decode(cls, data: bytes) -> QueryConsumeTimeSpanBody:
        value = load_object(data, "consume time span")
        spans = value.get("consumeTimeSpanSet") or []
        return cls([QueueTimeSpan.from_json(span) for span in spans])
