"""Name lists and string tables: TopicList, GroupList, KVTable (CODES.md §5.3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import fastjson
from ..json_body import body_decoder, load_object


@dataclass(slots=True)
class TopicList:
    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None

    def encode(self) -> bytes:
        value: dict[str, Any] = {}
        if self.broker_addr is not None:
            value["brokerAddr"] = self.broker_addr
        value["topicList"] = self.topic_list
        return fastjson.dumps(value)

    @classmethod
    @body_decoder("topic list")
    def decode(cls, data: bytes) -> TopicList:
        value = load_object(data, "topic list")
        return cls([str(t) for t in value.get("topicList") or []], value.get("brokerAddr"))


@dataclass(slots=True)
class GroupList:
    """QUERY_TOPIC_CONSUME_BY_WHO's body: consumer group names."""

    group_list: list[str] = field(default_factory=list)

    def encode(self) -> bytes:
        return fastjson.dumps({"groupList": self.group_list})

    @classmethod
    @body_decoder("group list")
    def decode(cls, data: bytes) -> GroupList:
        value = load_object(data, "group list")
        return cls([str(group) for group in value.get("groupList") or []])


@dataclass(slots=True)
class KVTable:
    table: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        return fastjson.dumps({"table": self.table})

    @classmethod
    @body_decoder("KV table")
    def decode(cls, data: bytes) -> KVTable:
        value = load_object(data, "KV table")
        return cls({str(k): str(v) for k, v in (value.get("table") or {}).items()})
