"""REGISTER_BROKER's body, plain and compressed (CODES.md §5.3-5.4)."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

from ...errors import BodyError
from .. import fastjson
from ..json_body import body_decoder, load_object
from .topics import DataVersion, TopicConfig, TopicConfigWrapper

_INT32 = struct.Struct(">i")


@dataclass(slots=True)
class RegisterBrokerBody:
    topic_config_wrapper: TopicConfigWrapper = field(default_factory=TopicConfigWrapper)
    filter_server_list: list[str] = field(default_factory=list)

    def encode(self, compressed: bool = False) -> bytes:
        if not compressed:
            return fastjson.dumps(
                {
                    "filterServerList": self.filter_server_list,
                    "topicConfigSerializeWrapper": self.topic_config_wrapper.to_json(),
                }
            )
        parts = [_sized(self.topic_config_wrapper.data_version.encode())]
        parts.append(_INT32.pack(len(self.topic_config_wrapper.topic_configs)))
        for config in self.topic_config_wrapper.topic_configs.values():
            parts.append(_sized(config.encode_text().encode()))
        parts.append(_sized(fastjson.dumps(self.filter_server_list)))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    @body_decoder("REGISTER_BROKER")
    def decode(cls, data: bytes, compressed: bool = False) -> RegisterBrokerBody:
        """Either registration body; brokers before 3.0.11 sent the bare wrapper."""
        if compressed:
            return cls._decode_compressed(data)
        value = load_object(data, "REGISTER_BROKER")
        if "topicConfigSerializeWrapper" not in value and "topicConfigTable" in value:
            return cls(TopicConfigWrapper.from_json(value))
        servers = value.get("filterServerList") or []
        return cls(
            TopicConfigWrapper.from_json(value.get("topicConfigSerializeWrapper") or {}),
            [str(server) for server in servers],
        )

    @classmethod
    def _decode_compressed(cls, data: bytes) -> RegisterBrokerBody:
        try:
            raw = zlib.decompress(data)
        except zlib.error as exc:
            raise BodyError(f"the compressed REGISTER_BROKER body is not zlib: {exc}") from None
        reader = _Reader(raw, "compressed REGISTER_BROKER body")
        version = DataVersion.from_json(load_object(reader.sized(), "dataVersion"))
        count = reader.int32()
        configs: dict[str, TopicConfig] = {}
        for _ in range(count):
            config = TopicConfig.decode_text(reader.sized().decode())
            configs[config.topic_name] = config
        servers = fastjson.loads(reader.sized()) if reader.remaining else []
        # 5.x brokers append static-topic mappings here; the name server keeps none
        return cls(TopicConfigWrapper(configs, version), [str(s) for s in servers or []])


def _sized(data: bytes) -> bytes:
    return _INT32.pack(len(data)) + data


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def int32(self) -> int:
        if self.remaining < 4:
            raise BodyError(f"the {self.what} ends inside a length field")
        value: int = _INT32.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        if value < 0:
            raise BodyError(f"the {self.what} has a negative length or count: {value}")
        return value

    def sized(self) -> bytes:
        length = self.int32()
        if self.remaining < length:
            raise BodyError(
                f"the {self.what} declares {length} bytes but only {self.remaining} follow"
            )
        chunk = self.data[self.pos : self.pos + length]
        self.pos += length
        return chunk
