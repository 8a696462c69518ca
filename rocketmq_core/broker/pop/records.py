"""The records POP keeps in the revive topic, as JSON bodies with Java's short keys
(POP.md §4): a checkpoint (tag ``ck``) per POP of one queue, an ack (tag ``ack``) or a
batch ack (tag ``bAck``) per acknowledgement. Sans-IO: values in, bytes out."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import orjson

from ...errors import RemoteProtocolError
from ...protocol.message import encode_properties, pack_host
from ...store.api import MessageToStore
from .keys import ACK_TAG, BATCH_ACK_TAG, CK_TAG


class RecordFormatError(RemoteProtocolError, ValueError):
    """A revive-topic record that is not a checkpoint or ack we can read."""


@dataclass(slots=True)
class Checkpoint:
    """A POP of ``num`` messages of one queue: they come back unless acked by
    ``pop_time + invisible_time``."""

    start_offset: int
    pop_time: int
    invisible_time: int
    queue_id: int
    topic: str  # the real topic: a POP retry topic when read from one
    group: str
    broker_name: str
    diffs: list[int] = field(default_factory=list)  # each message's offset - start_offset
    bitmap: int = 0
    revive_offset: int = 0
    reput_times: str | None = None

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def offsets(self) -> list[int]:
        return [self.start_offset + diff for diff in self.diffs]

    def index_of(self, offset: int) -> int:
        """Which of the checkpoint's messages is at ``offset``; -1 if none."""
        try:
            return self.diffs.index(offset - self.start_offset)
        except ValueError:
            return -1

    @property
    def key(self) -> tuple[str, int, int, str, int, str]:
        """What an ack names its checkpoint by."""
        return (
            self.topic,
            self.queue_id,
            self.start_offset,
            self.group,
            self.pop_time,
            self.broker_name,
        )

    def encode(self) -> bytes:
        record: dict[str, Any] = {
            "so": self.start_offset,
            "pt": self.pop_time,
            "it": self.invisible_time,
            "bm": self.bitmap,
            "n": len(self.diffs),
            "q": self.queue_id,
            "t": self.topic,
            "c": self.group,
            "ro": self.revive_offset,
            "d": self.diffs,
            "bn": self.broker_name,
        }
        if self.reput_times is not None:
            record["rp"] = self.reput_times
        return orjson.dumps(record)

    @classmethod
    def decode(cls, body: bytes) -> Checkpoint:
        record = _json(body)
        try:
            diffs = record.get("d") or list(range(int(record.get("n") or 0)))
            return cls(
                int(record["so"]),
                int(record["pt"]),
                int(record["it"]),
                int(record["q"]),
                str(record["t"]),
                str(record["c"]),
                str(record.get("bn") or ""),
                [int(diff) for diff in diffs],
                int(record.get("bm") or 0),
                int(record.get("ro") or 0),
                record.get("rp"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordFormatError(f"checkpoint lacks or mangles {exc}") from None

    def unique_key(self) -> str:
        parts = (*self.key[:2], self.start_offset, self.group, self.pop_time, self.broker_name)
        return "@".join(str(part) for part in (*parts, CK_TAG))


@dataclass(slots=True)
class Ack:
    """Acknowledgements of messages at ``ack_offsets`` of the checkpoint they name."""

    ack_offsets: list[int]
    start_offset: int
    group: str
    topic: str
    queue_id: int
    pop_time: int
    broker_name: str

    @property
    def key(self) -> tuple[str, int, int, str, int, str]:
        return (
            self.topic,
            self.queue_id,
            self.start_offset,
            self.group,
            self.pop_time,
            self.broker_name,
        )

    @property
    def tag(self) -> str:
        return ACK_TAG if len(self.ack_offsets) == 1 else BATCH_ACK_TAG

    def encode(self) -> bytes:
        record: dict[str, Any] = {
            "so": self.start_offset,
            "c": self.group,
            "t": self.topic,
            "q": self.queue_id,
            "pt": self.pop_time,
            "bn": self.broker_name,
        }
        if len(self.ack_offsets) == 1:
            record["ao"] = self.ack_offsets[0]
        else:
            record["aol"] = self.ack_offsets
        return orjson.dumps(record)

    @classmethod
    def decode(cls, body: bytes) -> Ack:
        record = _json(body)
        try:
            offsets = record.get("aol")
            if offsets is None:
                offsets = [record.get("ao", record.get("ackOffset"))]
            return cls(
                [int(offset) for offset in offsets],
                int(_either(record, "so", "startOffset")),
                str(record.get("c", record.get("consumerGroup"))),
                str(record.get("t", record.get("topic"))),
                int(_either(record, "q", "queueId")),
                int(_either(record, "pt", "popTime")),
                str(record.get("bn", record.get("brokerName")) or ""),
            )
        except (TypeError, ValueError) as exc:
            raise RecordFormatError(f"ack lacks or mangles a field: {exc}") from None

    def unique_key(self) -> str:
        first = self.ack_offsets[0]
        parts = (self.topic, self.queue_id, first, self.group, self.pop_time, self.broker_name)
        return "@".join(str(part) for part in (*parts, self.tag))


def _json(body: bytes) -> dict[str, Any]:
    try:
        record = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise RecordFormatError(f"not JSON: {exc}") from None
    if not isinstance(record, dict):
        raise RecordFormatError("not a JSON object")
    return record


def revive_record(
    revive_topic: str,
    revive_qid: int,
    tag: str,
    body: bytes,
    unique_key: str,
    now_ms: int,
    store_host: bytes,
) -> MessageToStore:
    """A checkpoint or ack as the message appended to its revive queue."""
    properties = encode_properties({"TAGS": tag, "UNIQ_KEY": unique_key, "WAIT": "false"})
    return MessageToStore(
        revive_topic,
        revive_qid,
        body,
        properties.encode(),
        born_timestamp=now_ms,
        born_host=store_host or pack_host("127.0.0.1", 0),
    )


@dataclass(slots=True)
class BatchAckEntry:
    """One entry of BATCH_ACK_MESSAGE's body: the acked offsets of one checkpoint."""

    group: str
    topic: str  # as the client knows it; ``retry`` says which real topic
    retry: str
    start_offset: int
    queue_id: int
    revive_qid: int
    pop_time: int
    invisible_time: int
    indexes: list[int]  # set bits: offset = start_offset + index


def decode_batch_ack(body: bytes) -> tuple[str, list[BatchAckEntry]]:
    """BATCH_ACK_MESSAGE's body ``{brokerName, acks: [{c, t, r, so, q, rq, pt, it, b}]}``,
    ``b`` the base64 of a Java BitSet (little-endian bytes)."""
    record = _json(body)
    entries = []
    try:
        for ack in record.get("acks") or []:
            bits = base64.b64decode(ack.get("b") or "")
            indexes = [i for i in range(len(bits) * 8) if bits[i // 8] >> (i % 8) & 1]
            entries.append(
                BatchAckEntry(
                    str(ack["c"]),
                    str(ack["t"]),
                    str(ack.get("r") or "0"),
                    int(ack["so"]),
                    int(ack["q"]),
                    int(ack["rq"]),
                    int(ack["pt"]),
                    int(ack["it"]),
                    indexes,
                )
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordFormatError(f"batch ack lacks or mangles {exc}") from None
    return str(record.get("brokerName") or ""), entries


def encode_bitset(indexes: list[int]) -> str:
    """A Java BitSet's bytes with ``indexes`` set, base64 (for clients of BATCH_ACK)."""
    size = max(indexes, default=-1) // 8 + 1
    bits = bytearray(size)
    for index in indexes:
        bits[index // 8] |= 1 << (index % 8)
    return base64.b64encode(bytes(bits)).decode()


def _either(record: dict[str, Any], short: str, long: str) -> Any:
    """A field under its short name (as 5.x writes it) or its long one; a TypeError when
    neither is there (the callers turn it into a RecordFormatError)."""
    if short in record:
        return record[short]
    if long in record:
        return record[long]
    raise TypeError(f"no {short!r} ({long!r})")
