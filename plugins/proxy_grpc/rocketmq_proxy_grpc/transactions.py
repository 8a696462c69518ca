"""Open transactions by (topic, transaction id): where their half message is stored, so
that EndTransaction can name it to its broker (GRPC.md §5)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

MAX_OPEN = 100_000  # the oldest are forgotten past this (the broker checks them back)


@dataclass(frozen=True, slots=True)
class TransactionRecord:
    topic: str
    transaction_id: str
    message_id: str
    broker_address: str
    commit_log_offset: int
    queue_offset: int


class TransactionTable:
    def __init__(self) -> None:
        self._open: OrderedDict[tuple[str, str], TransactionRecord] = OrderedDict()

    def add(self, record: TransactionRecord) -> None:
        self._open[record.topic, record.transaction_id] = record
        while len(self._open) > MAX_OPEN:
            self._open.popitem(last=False)

    def pop(self, topic: str, transaction_id: str) -> TransactionRecord | None:
        return self._open.pop((topic, transaction_id), None)
