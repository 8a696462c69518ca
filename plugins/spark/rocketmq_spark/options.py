"""The options of ``format("rocketmq")``, parsed once on the driver into plain, picklable
settings; every mistake is an OptionError naming the option and what it takes.

Spark hands options over as strings in a case-insensitive dict, so they are read with
``options.get("startingOffsets")`` and never through ``dict(options)``, which would
lower-case the keys (SPARK.md §4).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from rocketmq_core.acl.signing import Credentials
from rocketmq_core.client.config import ClientConfig
from rocketmq_core.errors import ConfigError
from rocketmq_core.protocol.constants import SYSTEM_TOPICS
from rocketmq_core.protocol.heartbeat import MessageQueue

# Kafka's markers inside a JSON offset table
EARLIEST = -2
LATEST = -1

CLIENT_PREFIX = "client."
DEFAULT_READER_GROUP = "spark_rocketmq_reader"


class OptionError(ConfigError, ValueError):
    """An option Spark was given is missing, unknown or malformed."""


@dataclass(frozen=True)
class Assignment:
    """Queues named by ``assign``: queue ids of a topic, on every broker or on one."""

    topic: str
    queue_ids: frozenset[int]
    broker_name: str | None = None

    def covers(self, queue: MessageQueue) -> bool:
        if queue.topic != self.topic or queue.queue_id not in self.queue_ids:
            return False
        return self.broker_name is None or queue.broker_name == self.broker_name


@dataclass(frozen=True)
class Connection:
    """Where the name servers are and how the client behaves (``client.*``)."""

    name_server: str
    client: tuple[tuple[str, Any], ...] = ()
    credentials: Credentials | None = None  # accessKey/secretKey; its repr hides the secret

    def client_config(self) -> ClientConfig:
        return ClientConfig(
            namesrv_addr=self.name_server, credentials=self.credentials, **dict(self.client)
        )


@dataclass(frozen=True)
class SourceOptions:
    connection: Connection
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: tuple[Assignment, ...] = ()
    tags: str = "*"
    starting: str | dict[MessageQueue, int] = "latest"
    starting_timestamp: int | None = None
    starting_by_timestamp: dict[MessageQueue, int] | None = None
    ending: str | dict[MessageQueue, int] = "latest"
    ending_timestamp: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    group_id: str | None = None
    pull_batch_size: int = 1024

    @property
    def reader_group(self) -> str:
        return self.group_id or DEFAULT_READER_GROUP

    def topics_named(self) -> tuple[str, ...]:
        """The topics ``subscribe`` or ``assign`` name (a pattern names none)."""
        return self.subscribe or tuple(dict.fromkeys(a.topic for a in self.assign))

    def wanted(self, queue: MessageQueue) -> bool:
        if not self.assign:
            return True
        return any(assignment.covers(queue) for assignment in self.assign)

    def matches(self, topic: str) -> bool:
        """Whether ``subscribePattern`` takes ``topic``; system, retry and dead-letter
        topics only when named outright."""
        assert self.subscribe_pattern is not None
        if topic in SYSTEM_TOPICS or topic.startswith(("%", "rmq_sys_")):
            return False
        return re.fullmatch(self.subscribe_pattern, topic) is not None


@dataclass(frozen=True)
class SinkOptions:
    connection: Connection
    topic: str | None = None
    producer_group: str = "spark_rocketmq_writer"
    transactional: bool = False
    transactional_id: str | None = None
    send_timeout_ms: int = 3000
    batch_size: int = 64


# --- readers of single values ---------------------------------------------------------


def _text(options: Mapping[str, str], key: str) -> str | None:
    value = options.get(key)
    if value is None:
        return None
    value = str(value).strip()
    return value or None


def _integer(options: Mapping[str, str], key: str, *, minimum: int = 0) -> int | None:
    value = _text(options, key)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise OptionError(f"option {key} takes a whole number, not {value!r}") from None
    if number < minimum:
        raise OptionError(f"option {key} is at least {minimum}, not {number}")
    return number


def _boolean(options: Mapping[str, str], key: str, default: bool) -> bool:
    value = _text(options, key)
    if value is None:
        return default
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise OptionError(f"option {key} takes true or false, not {value!r}")


_DURATION = re.compile(r"(\d+)\s*(ms|s|m|min|h|d)?")
_UNIT_MS = {
    None: 1,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def _duration_ms(options: Mapping[str, str], key: str, default: int) -> int:
    value = _text(options, key)
    if value is None:
        return default
    match = _DURATION.fullmatch(value.lower())
    if match is None:
        raise OptionError(f"option {key} takes a duration like 500ms, 30s or 15m, not {value!r}")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


def _json(options: Mapping[str, str], key: str) -> Any:
    value = _text(options, key)
    if value is None:
        return None
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise OptionError(f"option {key} is not valid JSON ({exc}): {value!r}") from None


# --- connection ---------------------------------------------------------------------------

_CLIENT_FIELDS = {
    f.name.replace("_", ""): f
    for f in dataclasses.fields(ClientConfig)
    if f.name not in ("namesrv_addr", "tls", "credentials")  # credentials: accessKey/secretKey
}


def connection_of(options: Mapping[str, str]) -> Connection:
    name_server = _text(options, "nameServer") or _text(options, "namesrvAddr")
    if name_server is None:
        raise OptionError(
            'option nameServer is required: the name server list, e.g. "127.0.0.1:9876" '
            'or "ns1:9876;ns2:9876"'
        )
    client: list[tuple[str, Any]] = []
    for key in sorted(k for k in options if k.lower().startswith(CLIENT_PREFIX)):
        setting = key[len(CLIENT_PREFIX) :].lower()
        known = _CLIENT_FIELDS.get(setting.replace("_", ""))
        if known is None:
            names = ", ".join(sorted(CLIENT_PREFIX + name for name in _CLIENT_FIELDS))
            raise OptionError(f"unknown client option {key}; the client takes {names}")
        value: Any = options[key]
        if known.type in ("float", float):
            try:
                value = float(value)
            except ValueError:
                raise OptionError(f"option {key} takes a number, not {value!r}") from None
        client.append((known.name, value))
    return Connection(name_server, tuple(client), _credentials(options))


def _credentials(options: Mapping[str, str]) -> Credentials | None:
    """``accessKey`` and ``secretKey``: both or neither (ACL 1.0 signing)."""
    access_key, secret_key = _text(options, "accessKey"), _text(options, "secretKey")
    if access_key is None and secret_key is None:
        return None
    if access_key is None:
        raise OptionError("option secretKey is set but accessKey is not: set both, or neither")
    if secret_key is None:
        raise OptionError("option accessKey is set but secretKey is not: set both, or neither")
    return Credentials(access_key, secret_key)


# --- source --------------------------------------------------------------------------------


def _queue_table(value: Any, key: str) -> dict[MessageQueue, int]:
    """``{"topic": {"broker": {"queueId": offset}}}`` (-2 earliest, -1 latest)."""
    shape = (
        f'option {key} takes "earliest", "latest" or JSON {{"topic": {{"broker": {{"0": 42}}}}}}'
    )
    if not isinstance(value, dict):
        raise OptionError(f"{shape}, not {value!r}")
    table: dict[MessageQueue, int] = {}
    for topic, brokers in value.items():
        if not isinstance(brokers, dict):
            raise OptionError(f"{shape}; topic {topic!r} maps to {brokers!r}")
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise OptionError(f"{shape}; {topic}/{broker} maps to {queues!r}")
            for queue_id, offset in queues.items():
                if not str(queue_id).isdigit() or not isinstance(offset, int) or offset < -2:
                    raise OptionError(f"{shape}; {topic}/{broker} has {queue_id!r}: {offset!r}")
                table[MessageQueue(topic, broker, int(queue_id))] = offset
    return table


def _position(options: Mapping[str, str], key: str, default: str) -> str | dict[MessageQueue, int]:
    value = _text(options, key)
    if value is None:
        return default
    if value.lower() in ("earliest", "latest"):
        return value.lower()
    return _queue_table(_json(options, key), key)


def _assignments(options: Mapping[str, str]) -> tuple[Assignment, ...]:
    value = _json(options, "assign")
    if value is None:
        return ()
    shape = 'option assign takes JSON {"topic": [0, 1]} or {"topic": {"broker": [0, 1]}}'
    if not isinstance(value, dict) or not value:
        raise OptionError(f"{shape}, not {value!r}")
    assignments = []
    for topic, queues in value.items():
        per_broker = queues.items() if isinstance(queues, dict) else [(None, queues)]
        for broker, ids in per_broker:
            if not isinstance(ids, list) or not all(isinstance(i, int) and i >= 0 for i in ids):
                raise OptionError(f"{shape}; {topic!r} has {queues!r}")
            assignments.append(Assignment(topic, frozenset(ids), broker))
    return tuple(assignments)


def source_options(options: Mapping[str, str]) -> SourceOptions:
    """Check the reading options; one error names every problem it found first."""
    connection = connection_of(options)
    subscribe = tuple(
        t.strip() for t in (_text(options, "subscribe") or "").split(",") if t.strip()
    )
    pattern = _text(options, "subscribePattern")
    assign = _assignments(options)
    chosen = [
        name
        for name, given in [
            ("subscribe", subscribe),
            ("subscribePattern", pattern),
            ("assign", assign),
        ]
        if given
    ]
    if len(chosen) != 1:
        raise OptionError(
            "give exactly one of subscribe (topics, comma-separated), subscribePattern "
            f"(a regex) or assign (JSON topic to queue ids); given: {', '.join(chosen) or 'none'}"
        )
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(f"option subscribePattern is not a valid regex: {exc}") from None
    by_timestamp = _json(options, "startingOffsetsByTimestamp")
    settings = SourceOptions(
        connection=connection,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        tags=_text(options, "tags") or _text(options, "subExpression") or "*",
        starting=_position(options, "startingOffsets", "latest"),
        starting_timestamp=_integer(options, "startingTimestamp"),
        starting_by_timestamp=(
            None
            if by_timestamp is None
            else _queue_table(by_timestamp, "startingOffsetsByTimestamp")
        ),
        ending=_position(options, "endingOffsets", "latest"),
        ending_timestamp=_integer(options, "endingTimestamp"),
        max_offsets_per_trigger=_integer(options, "maxOffsetsPerTrigger", minimum=1),
        min_offsets_per_trigger=_integer(options, "minOffsetsPerTrigger", minimum=1),
        max_trigger_delay_ms=_duration_ms(options, "maxTriggerDelay", 15 * 60 * 1000),
        min_partitions=_integer(options, "minPartitions", minimum=1),
        max_records_per_partition=_integer(options, "maxRecordsPerPartition", minimum=1),
        fail_on_data_loss=_boolean(options, "failOnDataLoss", True),
        group_id=_text(options, "groupId"),
        pull_batch_size=_integer(options, "pullBatchSize", minimum=1) or 1024,
    )
    if isinstance(settings.ending, dict) and any(v == EARLIEST for v in settings.ending.values()):
        raise OptionError("option endingOffsets cannot use -2 (earliest): a batch would be empty")
    return settings


def batch_source_options(options: Mapping[str, str]) -> SourceOptions:
    """A batch read starts at the earliest offsets unless told otherwise, as Kafka's."""
    settings = source_options(options)
    if _text(options, "startingOffsets") is None:
        settings = dataclasses.replace(settings, starting="earliest")
    if settings.starting == "latest":
        raise OptionError('a batch read cannot start at "latest": it would read nothing')
    for key in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
        if _text(options, key) is not None:
            raise OptionError(f"option {key} is for streaming reads (readStream) only")
    return settings


def stream_source_options(options: Mapping[str, str]) -> SourceOptions:
    settings = source_options(options)
    for key in ("endingOffsets", "endingTimestamp"):
        if _text(options, key) is not None:
            raise OptionError(f"option {key} is for batch reads (read) only")
    return settings


# --- sink ---------------------------------------------------------------------------------


def sink_options(options: Mapping[str, str], *, streaming: bool) -> SinkOptions:
    transactional_id = _text(options, "transactionalId")
    if streaming and transactional_id is None:
        # the checkpoint outlives restarts of the query: the batch ids it counts belong to it
        transactional_id = _text(options, "checkpointLocation")
    transactional = _boolean(options, "transactional", streaming)
    if transactional and not transactional_id:
        raise OptionError(
            "a transactional write needs option transactionalId (or, when streaming, a "
            "checkpointLocation): a stable name that the batch ids it commits belong to"
        )
    group = _text(options, "producerGroup") or "spark_rocketmq_writer"
    return SinkOptions(
        connection=connection_of(options),
        topic=_text(options, "topic"),
        producer_group=group,
        transactional=transactional,
        transactional_id=transactional_id if transactional else None,
        send_timeout_ms=_integer(options, "sendTimeoutMs", minimum=1) or 3000,
        batch_size=_integer(options, "batchSize", minimum=1) or 64,
    )
