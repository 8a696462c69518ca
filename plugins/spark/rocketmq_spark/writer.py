"""Writing: rows become messages, sent from the executors; the driver's commit makes a
transactional write visible, all of it or none.

At-least-once (``transactional=false``): rows are sent in batches as they come; a
retried task sends its rows again.

Exactly-once (transactional, the streaming default): each task sends its rows as half
messages, invisible to consumers, and reports them in its commit message. The driver
records the winning task attempts in the ledger, then commits their halves; abort
rolls them back. A replayed batch that the ledger already holds is not sent again,
and the check-back answers for halves a lost task or driver left behind.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from rocketmq_core.client.message import Message, ReceivedMessage, SendResult
from rocketmq_core.client.transaction import LocalTransactionState
from rocketmq_core.errors import RocketMQError

from . import ledger, runtime
from .options import Connection, SinkOptions

log = logging.getLogger("rocketmq.spark")

SINK_COLUMNS = {
    "body": "the message body (binary or string), required",
    "topic": "the topic, unless option topic is set",
    "keys": "keys to index the message by (a string, space-separated, or an array)",
    "tags": "the tag consumers filter on",
    "properties": "user properties (map<string,string>)",
    "delay_level": "a RocketMQ delay level, 1-based (int)",
    "deliver_at": "when to deliver the message (timestamp)",
}
IN_FLIGHT = 64  # half messages (or their decisions) awaited at once per task
BATCHES_IN_FLIGHT = 8  # batch sends awaited at once per task


class SinkSchemaError(RocketMQError, ValueError):
    """The DataFrame has columns the sink cannot write, or lacks one it needs."""


def check_columns(schema: Any, settings: SinkOptions) -> None:
    names = [f.name for f in schema.fields]
    unknown = [name for name in names if name not in SINK_COLUMNS]
    if unknown:
        listing = "; ".join(f"{name}: {what}" for name, what in SINK_COLUMNS.items())
        raise SinkSchemaError(
            f"columns {unknown} are not written by the rocketmq sink; select these: {listing}"
        )
    if "body" not in names:
        raise SinkSchemaError("the rocketmq sink needs a body column (binary or string)")
    if "topic" not in names and not settings.topic:
        raise SinkSchemaError("give the topic: option topic, or a topic column")


def messages_of(batch: Any, default_topic: str | None) -> list[Message]:
    """The rows of an Arrow batch as messages; option topic wins over the column."""
    columns = {name: batch.column(name).to_pylist() for name in batch.schema.names}
    count = batch.num_rows
    nothing = [None] * count
    bodies = columns["body"]
    topics = [default_topic] * count if default_topic else columns.get("topic", nothing)
    keys, tags = columns.get("keys", nothing), columns.get("tags", nothing)
    properties = columns.get("properties", nothing)
    delays, deliver_at = columns.get("delay_level", nothing), columns.get("deliver_at", nothing)
    messages = []
    for row in range(count):
        if bodies[row] is None:
            raise SinkSchemaError(f"row {row} of the batch has a null body")
        if not topics[row]:
            raise SinkSchemaError(f"row {row} of the batch has no topic")
        at = deliver_at[row]
        messages.append(
            Message(
                topics[row],
                bodies[row],
                tags=tags[row],
                keys=keys[row],
                properties=dict(properties[row] or ()),
                delay_level=delays[row] or 0,
                deliver_time_ms=None if at is None else int(at.timestamp() * 1000),
            )
        )
    return messages


# --- what a task reports ---------------------------------------------------------------------


@dataclass
class Sent(WriterCommitMessage):
    partition: int
    attempt: int
    count: int
    halves: list[SendResult] = field(default_factory=list)
    skipped: bool = False  # the ledger already held this epoch: a replay sent nothing


# --- executors -------------------------------------------------------------------------------


def write_rows(settings: SinkOptions, batches: Iterable[Any], epoch: str | None) -> Sent:
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context else 0
    attempt = context.taskAttemptId() if context else 0
    # every producer of the group may be asked about an exactly-once sink's halves, so
    # even plain writes send through one that answers from the ledger
    producer = _transaction_producer(settings)
    if not settings.transactional:
        count = 0
        for batch in batches:
            messages = messages_of(batch, settings.topic)
            producer.call(_send_all, producer.async_client, messages, settings.batch_size)
            count += len(messages)
        return Sent(partition, attempt, count)
    assert settings.transactional_id is not None
    if epoch is None:
        raise RuntimeError(
            "Spark did not tell this task which micro-batch it writes (local property "
            "streaming.sql.batchId), which the exactly-once sink needs; write with "
            "option transactional=false for at-least-once"
        )
    sink = ledger.sink_key(settings.transactional_id)
    if _recorded(settings.connection, sink, epoch) is not None:
        return Sent(partition, attempt, 0, skipped=True)  # committed before a driver crash
    tag = ledger.HalfTag(sink, epoch, partition, attempt).encode()
    sent = Sent(partition, attempt, 0)
    for batch in batches:
        messages = messages_of(batch, settings.topic)
        for message in messages:
            message.properties[ledger.TXN_PROPERTY] = tag
        sent.halves += producer.call(
            runtime.bounded_gather, producer.async_client.send_in_transaction, messages, IN_FLIGHT
        )
        sent.count += len(messages)
    return sent


async def _send_all(producer: Any, messages: list[Message], batch_size: int) -> None:
    async def send(chunk: list[Message]) -> None:
        if _delayed(chunk[0]):
            await producer.send(chunk[0])
        else:
            await producer.send_batch(chunk)

    await runtime.bounded_gather(send, _chunks(messages, batch_size), BATCHES_IN_FLIGHT)


def _chunks(messages: list[Message], batch_size: int) -> list[list[Message]]:
    """Consecutive messages of one topic share a batch send; a delayed one goes alone
    (a RocketMQ batch cannot carry a delay)."""
    chunks: list[list[Message]] = []
    for message in messages:
        last = chunks[-1] if chunks else None
        if (
            last is None
            or _delayed(message)
            or _delayed(last[0])
            or len(last) >= batch_size
            or last[0].topic != message.topic
        ):
            chunks.append([message])
        else:
            last.append(message)
    return chunks


def _delayed(message: Message) -> bool:
    return bool(message.delay_level or message.deliver_time_ms is not None)


# --- the ledger, read and written through the name server ------------------------------------


def _recorded(connection: Connection, sink: str, epoch: str) -> dict[int, int] | None:
    text = runtime.admin(connection).get_kv(ledger.NAMESPACE, ledger.epoch_key(sink, epoch))
    return None if text is None else ledger.decode_record(text)


def _last_streamed(connection: Connection, sink: str) -> int | None:
    text = runtime.admin(connection).get_kv(ledger.NAMESPACE, sink)
    return int(text) if text and text.isdigit() else None


class _LedgerReader:
    """The ledger as check-backs read it. A check-back round asks about every half of a
    running epoch at once, thousands for a large write: each would cost the name server
    two KV reads. An epoch's record never changes once written, so it is kept; "not
    recorded yet" and the last streamed epoch are read again after ``FRESH_S`` (a later
    round sees a record written meanwhile; until then a half is only asked about again).
    A read that fails fails the checks for ``FRESH_S`` too (they answer unknown), rather
    than each waiting out its own timeout behind the lock."""

    FRESH_S = 1.0
    KEPT = 1024

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self._records: dict[tuple[str, str], dict[int, int]] = {}
        self._unrecorded: dict[tuple[str, str], float] = {}  # -> read again after
        self._last_streamed: dict[str, tuple[int | None, float]] = {}
        self._failed: tuple[Exception, float] | None = None  # -> failing until
        self._lock = threading.Lock()

    def _read(self, read: Any, *args: Any) -> Any:
        """``read(connection, *args)``, unless one failed within ``FRESH_S`` (its error)."""
        if self._failed is not None and self._failed[1] > time.monotonic():
            raise self._failed[0]
        try:
            return read(self.connection, *args)
        except Exception as exc:
            self._failed = (exc, time.monotonic() + self.FRESH_S)
            raise

    def record(self, sink: str, epoch: str, *, fresh: bool = False) -> dict[int, int] | None:
        key = (sink, epoch)
        # checks are answered in worker threads at once: the first reads, the rest wait
        with self._lock:
            record = self._records.get(key)
            if record is not None or (
                not fresh and self._unrecorded.get(key, 0.0) > time.monotonic()
            ):
                return record
            record = self._read(_recorded, sink, epoch)
            for table in (self._records, self._unrecorded):
                if len(table) >= self.KEPT:
                    table.clear()
            if record is None:
                self._unrecorded[key] = time.monotonic() + self.FRESH_S
            else:
                self._records[key] = record
            return record

    def last_streamed(self, sink: str) -> int | None:
        with self._lock:
            value, fresh_until = self._last_streamed.get(sink, (None, 0.0))
            if fresh_until <= time.monotonic():
                value = self._read(_last_streamed, sink)
                self._last_streamed[sink] = (value, time.monotonic() + self.FRESH_S)
            return value


def _checker(connection: Connection) -> Any:
    reader = _LedgerReader(connection)

    def check(message: ReceivedMessage) -> LocalTransactionState:
        tag = ledger.HalfTag.decode(message.properties.get(ledger.TXN_PROPERTY, ""))
        if tag is None:
            return LocalTransactionState.UNKNOWN  # not a Spark sink's half
        record = reader.record(tag.sink, tag.epoch)
        # the last streamed epoch tells only about streamed (numbered) epochs unrecorded
        last = reader.last_streamed(tag.sink) if record is None and tag.epoch.isdigit() else None
        if last is not None and int(tag.epoch) <= last:
            # 'not recorded' may predate that read (kept FRESH_S): the driver records an
            # epoch before it streams it, so read the record again after, or a check
            # racing the commit would roll back a committed epoch's half
            record = reader.record(tag.sink, tag.epoch, fresh=True)
        return ledger.decide(tag, record, last)

    return check


def _transaction_producer(settings: SinkOptions) -> Any:
    return runtime.transaction_producer(
        settings.connection,
        settings.producer_group,
        settings.send_timeout_ms / 1000,
        _checker(settings.connection),
    )


# --- the driver --------------------------------------------------------------------------------


def commit_epoch(settings: SinkOptions, messages: list[Any], epoch: str, *, streamed: bool) -> None:
    if not settings.transactional:
        return
    assert settings.transactional_id is not None
    sink = ledger.sink_key(settings.transactional_id)
    reports = [m for m in messages if isinstance(m, Sent)]
    admin = runtime.admin(settings.connection)
    if any(report.skipped for report in reports) or _recorded(settings.connection, sink, epoch):
        return  # a replay of an epoch committed before: its halves are decided already
    attempts = {report.partition: report.attempt for report in reports}
    # the record first: from here on a check-back commits these halves even if we die
    admin.put_kv(ledger.NAMESPACE, ledger.epoch_key(sink, epoch), ledger.encode_record(attempts))
    if streamed:
        admin.put_kv(ledger.NAMESPACE, sink, epoch)
        old = int(epoch) - ledger.KEPT_EPOCHS
        if old >= 0:
            admin.delete_kv(ledger.NAMESPACE, ledger.epoch_key(sink, str(old)))
    _end(settings, reports, LocalTransactionState.COMMIT)


def abort_epoch(settings: SinkOptions, messages: list[Any], epoch: str, *, streamed: bool) -> None:
    if not settings.transactional:
        return
    assert settings.transactional_id is not None
    if not streamed:  # a batch write is never replayed: every half of it is dead
        sink = ledger.sink_key(settings.transactional_id)
        runtime.admin(settings.connection).put_kv(
            ledger.NAMESPACE, ledger.epoch_key(sink, epoch), ledger.encode_record({})
        )
    _end(settings, [m for m in messages if isinstance(m, Sent)], LocalTransactionState.ROLLBACK)


def _end(settings: SinkOptions, reports: list[Sent], state: LocalTransactionState) -> None:
    halves = [half for report in reports for half in report.halves]
    if not halves:
        return
    producer = _transaction_producer(settings)
    producer.call(_end_all, producer.async_client, halves, state)


async def _end_all(producer: Any, halves: list[SendResult], state: LocalTransactionState) -> None:
    """Decide every half, IN_FLIGHT at a time, each confirmed by its broker: what Spark
    commits is visible when the commit returns. A failure is left to the check-back."""

    async def end(half: SendResult) -> None:
        try:
            await producer.end_transaction(half, state, confirm=True)
        except Exception as exc:
            log.warning("ending %s failed (%s); the check-back decides it", half.msg_id, exc)

    await runtime.bounded_gather(end, halves, IN_FLIGHT)


# --- Spark's writer classes ---------------------------------------------------------------------


class RocketMQBatchWriter(DataSourceArrowWriter):
    def __init__(self, settings: SinkOptions) -> None:
        self.settings = settings
        self.epoch = uuid.uuid4().hex  # one batch write: one epoch, never replayed

    def write(self, iterator: Iterator[Any]) -> Sent:
        return write_rows(self.settings, iterator, self.epoch)

    def commit(self, messages: list[Any]) -> None:
        commit_epoch(self.settings, messages, self.epoch, streamed=False)

    def abort(self, messages: list[Any]) -> None:
        abort_epoch(self.settings, messages, self.epoch, streamed=False)


class RocketMQStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, settings: SinkOptions) -> None:
        self.settings = settings

    def write(self, iterator: Iterator[Any]) -> Sent:
        from pyspark import TaskContext

        context = TaskContext.get()
        batch_id = context.getLocalProperty("streaming.sql.batchId") if context else None
        return write_rows(self.settings, iterator, batch_id)

    def commit(self, messages: list[Any], batchId: int) -> None:
        commit_epoch(self.settings, messages, str(batchId), streamed=True)

    def abort(self, messages: list[Any], batchId: int) -> None:
        abort_epoch(self.settings, messages, str(batchId), streamed=True)
