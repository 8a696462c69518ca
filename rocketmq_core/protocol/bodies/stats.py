"""How far queues and consumer groups have got: TopicStatsTable (GET_TOPIC_STATS_INFO),
ConsumeStats (GET_CONSUME_STATS) and QueryConsumeTimeSpanBody (QUERY_CONSUME_TIME_SPAN).

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
        table = encode_queue_table(self.offset_table, OffsetWrapper.to_json)
        return fastjson.dumps(
            {"consumeTps": float(self.consume_tps), "offsetTable": table}, standard=False
        )

    @classmethod
    @body_decoder("consume stats")
    def decode(cls, data: bytes) -> ConsumeStats:
        value = load_object(data, "consume stats")
        return cls(
            decode_queue_table(value.get("offsetTable"), OffsetWrapper.from_json, "consume stats"),
            float(value.get("consumeTps") or 0),
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
