"""Reading: where a read starts and ends (the driver asks the brokers), and the pulls
of one partition (an executor), yielded as Arrow record batches.

The driver-side stream reader is one long-lived instance per query; the executors get
a pickled copy made elsewhere (SPARK.md §2.4), so everything ``read`` needs travels in
the QueueRange and the frozen settings.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from rocketmq_core.client.consumer_requests import PullStatus
from rocketmq_core.errors import RocketMQError
from rocketmq_core.protocol.heartbeat import MessageQueue

from . import runtime
from .options import EARLIEST, LATEST, SourceOptions
from .planning import OffsetTable, QueueRange, cap_rows, from_json, plan_partitions, to_json
from .pull_ahead import PullAhead

log = logging.getLogger("rocketmq.spark")


class DataLossError(RocketMQError, RuntimeError):
    """Offsets a query planned to read are gone (retention, a deleted topic)."""


# --- the driver's view of the brokers ------------------------------------------------------


def _consumer(settings: SourceOptions) -> Any:
    return runtime.pull_consumer(settings.connection, settings.reader_group)


QUERIES_AT_ONCE = 64  # offset queries to the brokers in flight while planning


def _answers(settings: SourceOptions, asks: dict[MessageQueue, Any]) -> OffsetTable:
    """Each queue's offset: a number as it is, or the answer of a query (a no-argument
    coroutine function), the queries sent together rather than one after another."""
    queries = {queue: ask for queue, ask in asks.items() if callable(ask)}
    if not queries:
        return dict(asks)
    answers = _consumer(settings).call(
        runtime.bounded_gather, lambda ask: ask(), list(queries.values()), QUERIES_AT_ONCE
    )
    return {**asks, **dict(zip(queries, answers, strict=True))}


def queues_of(settings: SourceOptions) -> list[MessageQueue]:
    """Every readable queue the options name, sorted."""
    consumer = _consumer(settings)
    if settings.subscribe_pattern is not None:
        topics = [
            t for t in runtime.admin(settings.connection).list_topics() if settings.matches(t)
        ]
    else:
        topics = list(settings.topics_named())
    queues = [q for topic in topics for q in consumer.queues(topic) if settings.wanted(q)]
    if settings.assign and not queues:
        raise ValueError(f"option assign names no existing queue: {settings.assign}")
    return sorted(queues)


def latest_offsets(settings: SourceOptions, queues: list[MessageQueue]) -> OffsetTable:
    client = _consumer(settings).async_client
    return _answers(settings, {queue: partial(client.max_offset, queue) for queue in queues})


def earliest_offsets(settings: SourceOptions, queues: list[MessageQueue]) -> OffsetTable:
    client = _consumer(settings).async_client
    return _answers(settings, {queue: partial(client.min_offset, queue) for queue in queues})


def starting_offsets(settings: SourceOptions, queues: list[MessageQueue]) -> OffsetTable:
    """Where a new query starts; a queue the options do not place starts at its earliest
    (as Kafka's newly discovered partitions do)."""
    client = _consumer(settings).async_client
    by_time = settings.starting_by_timestamp or {}
    table = settings.starting if isinstance(settings.starting, dict) else {}
    asks: dict[MessageQueue, Any] = {}
    for queue in queues:
        if queue in by_time:
            asks[queue] = partial(client.search_offset, queue, by_time[queue])
        elif settings.starting_timestamp is not None:
            asks[queue] = partial(client.search_offset, queue, settings.starting_timestamp)
        elif settings.starting == "latest" or table.get(queue) == LATEST:
            asks[queue] = partial(client.max_offset, queue)
        elif queue in table and table[queue] != EARLIEST:
            asks[queue] = table[queue]
        else:
            asks[queue] = partial(client.min_offset, queue)
    return _answers(settings, asks)


def ending_offsets(settings: SourceOptions, queues: list[MessageQueue]) -> OffsetTable:
    client = _consumer(settings).async_client
    table = settings.ending if isinstance(settings.ending, dict) else {}
    asks: dict[MessageQueue, Any] = {}
    for queue in queues:
        if settings.ending_timestamp is not None:
            asks[queue] = partial(client.search_offset, queue, settings.ending_timestamp)
        elif queue in table and table[queue] != LATEST:
            asks[queue] = table[queue]
        else:
            asks[queue] = partial(client.max_offset, queue)
    return _answers(settings, asks)


# --- an executor's pulls --------------------------------------------------------------------


DECODE_BYTES = 1 << 20  # pulled bodies decoded as one batch, at most (when they have arrived)


def read_range(settings: SourceOptions, part: QueueRange) -> Iterator[Any]:
    """The messages of ``part`` in offset order, as Arrow batches of the source schema.

    The pulls run ahead on the client's loop thread while this decodes (PullAhead), and
    what has arrived is decoded together: the decoder's fixed cost per call is close to
    its cost per 1,000 rows."""
    import pyarrow.compute as pc

    from .columns import decode_pull_body

    queue, end = part.queue, part.end
    wanted_tags = _tag_set(settings.tags)
    bodies: list[Any] = []

    def decoded() -> Iterator[Any]:
        if not bodies:
            return
        data = bodies[0] if len(bodies) == 1 else b"".join(bodies)
        bodies.clear()
        batch = decode_pull_body(data, queue.topic, queue.broker_name)
        if wanted_tags is not None:  # the broker matched tag hashes, which can collide
            keep = pc.and_(
                pc.less(batch.column("queue_offset"), end),
                pc.is_in(batch.column("tags"), wanted_tags),
            )
            batch = batch.filter(keep)
        if batch.num_rows:
            yield batch

    pulls = PullAhead(
        _consumer(settings), queue, part.start, end, settings.tags, settings.pull_batch_size
    )
    offset = part.start
    for results in pulls.taken(DECODE_BYTES):
        for result in results:
            status, after = result.status, result.next_begin_offset
            if status is PullStatus.FOUND and after > offset:
                bodies.append(result.records)
            elif status is PullStatus.OFFSET_ILLEGAL and after > offset:  # below the minimum
                _lost(settings, queue, offset, min(after, end), after)
            elif status is not PullStatus.NO_MATCHED_MSG or after <= offset:
                # the queue ends before ``end``, or does not move
                yield from decoded()
                _lost(settings, queue, offset, end, after)
                return
            offset = after
        yield from decoded()


def _tag_set(expression: str) -> Any:
    import pyarrow as pa

    tags = [tag.strip() for tag in expression.split("||") if tag.strip()]
    if not tags or "*" in tags:
        return None
    return pa.array(tags, pa.string())


def _lost(settings: SourceOptions, queue: MessageQueue, start: int, end: int, edge: int) -> None:
    what = (
        f"offsets [{start}, {end}) of {queue.topic}/{queue.broker_name}/{queue.queue_id} "
        f"are not on the broker (its queue is at {edge} there): retention deleted them, "
        "or the topic was deleted or recreated"
    )
    if settings.fail_on_data_loss:
        raise DataLossError(
            f"{what}. Set option failOnDataLoss=false to skip what is gone and go on."
        )
    log.warning("%s; skipping them (failOnDataLoss=false)", what)


# --- Spark's reader classes ------------------------------------------------------------------


class RocketMQBatchReader(DataSourceReader):
    def __init__(self, settings: SourceOptions) -> None:
        self.settings = settings

    def partitions(self) -> list[QueueRange]:
        queues = queues_of(self.settings)
        return plan_partitions(
            starting_offsets(self.settings, queues),
            ending_offsets(self.settings, queues),
            min_partitions=self.settings.min_partitions,
            max_records_per_partition=self.settings.max_records_per_partition,
        )

    # Spark hands back the partitions ``partitions`` planned: always QueueRanges
    def read(self, partition: QueueRange) -> Iterator[Any]:  # type: ignore[override]
        return read_range(self.settings, partition)


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over every queue; the offsets live in Spark's checkpoint."""

    def __init__(self, settings: SourceOptions) -> None:
        self.settings = settings
        self._target: OffsetTable | None = None  # Trigger.AvailableNow stops here
        self._latest: OffsetTable = {}
        self._last_batch_at = time.monotonic()

    def initialOffset(self) -> dict:
        return to_json(starting_offsets(self.settings, queues_of(self.settings)))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.settings.max_offsets_per_trigger:
            return ReadMaxRows(self.settings.max_offsets_per_trigger)
        if self.settings.min_offsets_per_trigger:
            return ReadMinRows(self.settings.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        queues = queues_of(self.settings)
        self._target = latest_offsets(self.settings, queues)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json(start)
        if self._target is not None:
            latest = dict(self._target)
        else:
            queues = queues_of(self.settings)
            latest = latest_offsets(self.settings, queues)
            born = [queue for queue in queues if queue not in begin]
            begin.update(earliest_offsets(self.settings, born))  # new since the query began
        for queue, offset in begin.items():
            latest.setdefault(queue, offset)  # a queue gone from the route keeps its place
            if latest[queue] < offset:  # the queue restarted below us: deleted, recreated
                _lost(self.settings, queue, latest[queue], offset, latest[queue])
                begin[queue] = 0
        self._latest = latest
        waiting = sum(max(0, latest[q] - begin.get(q, latest[q])) for q in latest)
        if self._too_few(waiting):
            return to_json(begin)
        end = latest
        if isinstance(limit, ReadMaxRows):
            end = cap_rows(begin, latest, limit.max_rows)
        if end != begin:
            self._last_batch_at = time.monotonic()
        return to_json(end)

    def _too_few(self, waiting: int) -> bool:
        """minOffsetsPerTrigger: wait for more rows, at most maxTriggerDelay since the
        last batch (never under AvailableNow, which must end)."""
        least = self.settings.min_offsets_per_trigger
        if not least or self._target is not None or waiting == 0:
            return waiting == 0
        overdue = (
            time.monotonic() - self._last_batch_at
        ) * 1000 >= self.settings.max_trigger_delay_ms
        return waiting < least and not overdue

    def reportLatestOffset(self) -> dict | None:
        return to_json(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> list[QueueRange]:
        begin, until = from_json(start), from_json(end)
        for queue, offset in begin.items():
            if until.get(queue, offset) < offset:  # restarted below us: latestOffset judged it
                begin[queue] = 0
        return plan_partitions(
            begin,
            until,
            min_partitions=self.settings.min_partitions,
            max_records_per_partition=self.settings.max_records_per_partition,
        )

    # Spark hands back the partitions ``partitions`` planned: always QueueRanges
    def read(self, partition: QueueRange) -> Iterator[Any]:  # type: ignore[override]
        return read_range(self.settings, partition)

    def commit(self, end: dict) -> None:
        """Spark's checkpoint holds the truth; a groupId also gets the offsets, one batch
        late (Spark commits batch N while planning N+1), for lag dashboards."""
        if not self.settings.group_id:
            return
        consumer = _consumer(self.settings)
        for queue, offset in from_json(end).items():
            try:
                consumer.commit(queue, offset)
            except Exception as exc:  # monitoring only: never fail the query for it
                log.warning(
                    "could not commit %s offset %d for group %s: %s",
                    queue,
                    offset,
                    self.settings.group_id,
                    exc,
                )

    def stop(self) -> None:
        pass  # Spark kills the runner process instead of calling this (SPARK.md §2.4)
