"""The exactly-once sink's ledger: which task attempt's half messages each committed
epoch (a streaming batch id, or one batch write) keeps. It lives in the name server's
KV store, so it outlives drivers, executors and broker restarts.

    SPARK_SINK/<sink>          the last streaming batch id committed
    SPARK_SINK/<sink>:<epoch>  {"attempts": {"<partition>": <taskAttemptId>}}

Every half message carries ``SPARK_TXN = <sink>|<epoch>|<partition>|<attempt>``; a
broker's check-back is answered from the ledger alone (``decide``), by whichever
producer of the group it reaches.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import orjson

from rocketmq_core.client.transaction import LocalTransactionState

NAMESPACE = "SPARK_SINK"
TXN_PROPERTY = "SPARK_TXN"
KEPT_EPOCHS = 1000  # older streaming records are dropped; their halves were all decided


def sink_key(transactional_id: str) -> str:
    """A short, KV-safe name for a transactional id (often a checkpoint path)."""
    return "sink-" + hashlib.sha256(transactional_id.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class HalfTag:
    sink: str
    epoch: str
    partition: int
    attempt: int

    def encode(self) -> str:
        return f"{self.sink}|{self.epoch}|{self.partition}|{self.attempt}"

    @classmethod
    def decode(cls, text: str) -> HalfTag | None:
        parts = text.split("|")
        if len(parts) != 4 or not parts[2].isdigit() or not parts[3].isdigit():
            return None
        return cls(parts[0], parts[1], int(parts[2]), int(parts[3]))


def epoch_key(sink: str, epoch: str) -> str:
    return f"{sink}:{epoch}"


def encode_record(attempts: dict[int, int]) -> str:
    return orjson.dumps({"attempts": {str(p): a for p, a in sorted(attempts.items())}}).decode()


def decode_record(text: str) -> dict[int, int]:
    return {int(p): int(a) for p, a in orjson.loads(text)["attempts"].items()}


def decide(
    tag: HalfTag, record: dict[int, int] | None, last_streamed: int | None
) -> LocalTransactionState:
    """The fate of a half message the broker asks about.

    A recorded epoch keeps exactly its winning attempts. An unrecorded streaming epoch
    at or before the last committed one is long decided (its record was pruned), so the
    half is a leftover; otherwise its epoch is still running: ask again later."""
    if record is not None:
        if record.get(tag.partition) == tag.attempt:
            return LocalTransactionState.COMMIT
        return LocalTransactionState.ROLLBACK
    if tag.epoch.isdigit() and last_streamed is not None and int(tag.epoch) <= last_streamed:
        return LocalTransactionState.ROLLBACK
    return LocalTransactionState.UNKNOWN
