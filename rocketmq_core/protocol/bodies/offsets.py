"""Committed offsets as bodies: ResetOffsetBody (INVOKE_BROKER_TO_RESET_OFFSET's answer,
RESET_CONSUMER_CLIENT_OFFSET) and ConsumerOffsetWrapper (GET_ALL_CONSUMER_OFFSET and
config/consumerOffset.json, STORE.md §13)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...errors import BodyError
from .. import fastjson
from ..heartbeat import MessageQueue
from ..json_body import body_decoder, load_object, to_int
from .queue_keys import decode_queue_table, encode_queue_table


@dataclass(slots=True)
class ResetOffsetBody:
    """The offset each queue was reset to. Java reads fastjson's MessageQueue-keyed map;
    the C++ client only an array of {brokerName, queueId, topic, offset} (REMOTING.md §11)."""

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)

    def encode(self, *, for_cpp: bool = False) -> bytes:
        if for_cpp:
            table = [
                {**queue.to_json(), "offset": offset} for queue, offset in self.offset_table.items()
            ]
            return fastjson.dumps({"offsetTable": table})
        keyed = encode_queue_table(self.offset_table, int)
        return fastjson.dumps({"offsetTable": keyed}, standard=False)

    @classmethod
    @body_decoder("reset offset")
    def decode(cls, data: bytes) -> ResetOffsetBody:
        """Either form."""
        table = load_object(data, "reset offset").get("offsetTable")
        if isinstance(table, list):
            return cls(
                {
                    MessageQueue.from_json(entry): to_int(entry["offset"], "offset", "reset")
                    for entry in table
                }
            )
        return cls(decode_queue_table(table, _offset, "reset offset"))


def _offset(raw: Any) -> int:
    return to_int(raw, "offset", "offsetTable")


@dataclass(slots=True)
class ConsumerOffsetWrapper:
    """Committed offsets by ``topic@group`` and queue id; written with fastjson's bare
    integer keys, as Java writes them (a 5.x broker adds a dataVersion, not read here)."""

    offset_table: dict[str, dict[int, int]] = field(default_factory=dict)

    def encode(self) -> bytes:
        return fastjson.dumps({"offsetTable": self.offset_table}, standard=False)

    @classmethod
    def from_json(cls, value: Any) -> ConsumerOffsetWrapper:
        if not isinstance(value, dict):
            raise BodyError("a consumer offset table is not a JSON object")
        table = value.get("offsetTable") or {}
        return cls(
            {
                str(key): {int(queue): int(offset) for queue, offset in offsets.items()}
                for key, offsets in table.items()
            }
        )

    @classmethod
    @body_decoder("consumer offset")
    def decode(cls, data: bytes) -> ConsumerOffsetWrapper:
        return cls.from_json(load_object(data, "consumer offset"))
