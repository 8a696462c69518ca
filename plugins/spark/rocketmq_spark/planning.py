"""Offsets and how a read is cut into Spark partitions. Sans-IO: plain numbers in,
plain numbers out, so every rule here is tested without Spark or a broker.

An offset table maps each MessageQueue to a queue offset. In Spark's checkpoint it is
JSON, ``{"topic": {"broker": {"queueId": offset}}}``, readable by a person.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

from pyspark.sql.datasource import InputPartition

from rocketmq_core.protocol.heartbeat import MessageQueue

OffsetTable = dict[MessageQueue, int]


class QueueRange(InputPartition):
    """One Spark partition: offsets [start, end) of one queue."""

    def __init__(self, queue: MessageQueue, start: int, end: int) -> None:
        self.queue = queue
        self.start = start
        self.end = end

    @property
    def size(self) -> int:
        return self.end - self.start

    def __repr__(self) -> str:
        queue = self.queue
        where = f"{queue.topic}/{queue.broker_name}/{queue.queue_id}"
        return f"QueueRange({where} [{self.start}, {self.end}))"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QueueRange):
            return NotImplemented
        return (self.queue, self.start, self.end) == (other.queue, other.start, other.end)

    def __hash__(self) -> int:
        return hash((self.queue, self.start, self.end))


def to_json(table: Mapping[MessageQueue, int]) -> dict[str, dict[str, dict[str, int]]]:
    nested: dict[str, dict[str, dict[str, int]]] = {}
    for queue in sorted(table):
        brokers = nested.setdefault(queue.topic, {})
        brokers.setdefault(queue.broker_name, {})[str(queue.queue_id)] = table[queue]
    return nested


def from_json(nested: Mapping[str, Mapping[str, Mapping[str, int]]]) -> OffsetTable:
    return {
        MessageQueue(topic, broker, int(queue_id)): int(offset)
        for topic, brokers in nested.items()
        for broker, queues in brokers.items()
        for queue_id, offset in queues.items()
    }


def cap_rows(start: OffsetTable, latest: OffsetTable, max_rows: int) -> OffsetTable:
    """Where a trigger admitting at most ``max_rows`` ends: each queue gets its share of
    the rows waiting in proportion to its backlog (largest remainders first), so the
    total never exceeds the limit and a busy queue cannot starve the others."""
    backlog = {queue: max(0, latest[queue] - start.get(queue, latest[queue])) for queue in latest}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    shares = {queue: max_rows * rows // total for queue, rows in backlog.items()}
    left = max_rows - sum(shares.values())
    by_remainder = sorted(backlog, key=lambda queue: (-(max_rows * backlog[queue] % total), queue))
    for queue in by_remainder[:left]:
        shares[queue] += 1
    return {queue: start.get(queue, latest[queue]) + shares[queue] for queue in latest}


def total_rows(start: OffsetTable, end: OffsetTable) -> int:
    return sum(max(0, end[queue] - start.get(queue, end[queue])) for queue in end)


def plan_partitions(
    start: OffsetTable,
    end: OffsetTable,
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[QueueRange]:
    """One range per queue with something to read (empty queues get none), cut so no
    range holds more than ``max_records_per_partition`` and, by halving the largest,
    until there are ``min_partitions``."""
    ranges = [
        QueueRange(queue, start.get(queue, end[queue]), end[queue])
        for queue in sorted(end)
        if end[queue] > start.get(queue, end[queue])
    ]
    if max_records_per_partition:
        ranges = [piece for r in ranges for piece in _cut(r, max_records_per_partition)]
    if min_partitions and len(ranges) < min_partitions:
        ranges = _halve_largest(ranges, min_partitions)
    return sorted(ranges, key=lambda r: (r.queue, r.start))


def _cut(whole: QueueRange, most: int) -> Iterable[QueueRange]:
    for at in range(whole.start, whole.end, most):
        yield QueueRange(whole.queue, at, min(at + most, whole.end))


def _halve_largest(ranges: list[QueueRange], wanted: int) -> list[QueueRange]:
    heap = [(-r.size, index, r) for index, r in enumerate(ranges)]
    heapq.heapify(heap)
    tiebreak = len(heap)
    while heap and len(heap) < wanted and -heap[0][0] > 1:
        _, _, largest = heapq.heappop(heap)
        middle = largest.start + largest.size // 2
        for piece in (
            QueueRange(largest.queue, largest.start, middle),
            QueueRange(largest.queue, middle, largest.end),
        ):
            heapq.heappush(heap, (-piece.size, tiebreak, piece))
            tiebreak += 1
    return [r for _, _, r in heap]
