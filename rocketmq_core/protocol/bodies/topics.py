"""Topic configs and their version: DataVersion, TopicConfig, TopicConfigWrapper
(GET_ALL_TOPIC_CONFIG, GET_TOPIC_CONFIG and the registration body, CODES.md §5.3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...errors import BodyError
from .. import fastjson
from ..constants import PERM_RW
from ..json_body import body_decoder, load_object, to_int


@dataclass(frozen=True, slots=True)
class DataVersion:
    """A broker's topic-config version: it changes whenever any topic changes."""

    counter: int = 0
    timestamp: int = 0
    state_version: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "counter": self.counter,
            "stateVersion": self.state_version,
            "timestamp": self.timestamp,
        }

    @classmethod
    def from_json(cls, value: Any) -> DataVersion:
        if not isinstance(value, dict):
            return cls()
        return cls(
            counter=to_int(value.get("counter", 0), "counter", "dataVersion"),
            timestamp=to_int(value.get("timestamp", 0), "timestamp", "dataVersion"),
            state_version=to_int(value.get("stateVersion", 0), "stateVersion", "dataVersion"),
        )

    def encode(self) -> bytes:
        return fastjson.dumps(self.to_json())

    @classmethod
    @body_decoder("data version")
    def decode(cls, data: bytes) -> DataVersion:
        return cls.from_json(load_object(data, "data version"))

    def next(self, timestamp: int) -> DataVersion:
        """The version after one more change at ``timestamp`` (ms)."""
        return DataVersion(self.counter + 1, timestamp, self.state_version)


@dataclass(slots=True)
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_RW
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "attributes": self.attributes,
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, value: Any, name: str | None = None) -> TopicConfig:
        what = f"topic config {name or ''}".rstrip()
        if not isinstance(value, dict):
            raise BodyError(f"{what} is not a JSON object")
        topic = value.get("topicName", name)
        if not isinstance(topic, str) or not topic:
            raise BodyError(f"{what} has no topicName")
        attributes = value.get("attributes") or {}
        return cls(
            topic_name=topic,
            read_queue_nums=to_int(value.get("readQueueNums", 16), "readQueueNums", what),
            write_queue_nums=to_int(value.get("writeQueueNums", 16), "writeQueueNums", what),
            perm=to_int(value.get("perm", PERM_RW), "perm", what),
            topic_filter_type=str(value.get("topicFilterType", "SINGLE_TAG")),
            topic_sys_flag=to_int(value.get("topicSysFlag", 0), "topicSysFlag", what),
            order=bool(value.get("order", False)),
            attributes={str(k): str(v) for k, v in attributes.items()},
        )

    def encode(self) -> bytes:
        """GET_TOPIC_CONFIG's body."""
        return fastjson.dumps(self.to_json())

    @classmethod
    @body_decoder("topic config")
    def decode(cls, data: bytes) -> TopicConfig:
        return cls.from_json(load_object(data, "topic config"))

    def encode_text(self) -> str:
        """The space-separated form of the compressed registration (CODES.md §5.4)."""
        parts = [
            self.topic_name,
            str(self.read_queue_nums),
            str(self.write_queue_nums),
            str(self.perm),
            self.topic_filter_type,
        ]
        if self.attributes:
            parts.append(fastjson.dumps(self.attributes).decode())
        return " ".join(parts)

    @classmethod
    def decode_text(cls, text: str) -> TopicConfig:
        parts = text.split(" ", 5)
        if len(parts) < 5:
            raise BodyError(f"topic config {text!r} has fewer than 5 space-separated fields")
        attributes: dict[str, str] = {}
        if len(parts) == 6 and parts[5]:
            decoded = load_object(parts[5].encode(), "topic attributes")
            attributes = {str(k): str(v) for k, v in decoded.items()}
        return cls(
            topic_name=parts[0],
            read_queue_nums=to_int(parts[1], "readQueueNums", parts[0]),
            write_queue_nums=to_int(parts[2], "writeQueueNums", parts[0]),
            perm=to_int(parts[3], "perm", parts[0]),
            topic_filter_type=parts[4],
            attributes=attributes,
        )


@dataclass(slots=True)
class TopicConfigWrapper:
    """TopicConfigSerializeWrapper: all topics of a broker and their version."""

    topic_configs: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_json(),
            "topicConfigTable": {
                name: config.to_json() for name, config in self.topic_configs.items()
            },
        }

    @classmethod
    @body_decoder("topic config")
    def from_json(cls, value: Any) -> TopicConfigWrapper:
        if not isinstance(value, dict):
            raise BodyError("topicConfigSerializeWrapper is not a JSON object")
        table = value.get("topicConfigTable") or {}
        if not isinstance(table, dict):
            raise BodyError("topicConfigTable is not a JSON object")
        return cls(
            topic_configs={
                str(name): TopicConfig.from_json(config, str(name))
                for name, config in table.items()
            },
            data_version=DataVersion.from_json(value.get("dataVersion")),
        )
