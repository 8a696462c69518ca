"""The broker's RIP-46 series (METRICS.md §1.4-§1.6), read from what the broker keeps.

Nothing here runs per message. The message and byte counters are observable counters
reading the statistics' running totals (``BrokerStats``); gauges read the tables at
collection; the consumer lag needs store reads, so ``refresh`` (async, on the event
loop) computes it just before each collection and the callbacks read that snapshot.

Choices where ours differs from Java's (docs/operations.md, "Metrics"):
* ``message_type`` comes from the topic's ``message.type`` attribute (normal when it has
  none), not from each message's properties;
* ``rocketmq_message_size`` counts stored record sizes (a batch's average per message);
* ``rocketmq_consumer_inflight_messages`` is 0 and ``ready`` equals the lag: the broker
  does not keep pull offsets apart from committed ones (as GET_CONSUME_STATS).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from ..protocol.codes import (
    VERSION_V3_1_8,
    VERSION_V4_6_0,
    VERSION_V4_9_4,
    VERSION_V4_9_8,
    VERSION_V5_3_3,
)
from ..protocol.constants import (
    DLQ_GROUP_TOPIC_PREFIX,
    PERM_READ,
    PERM_WRITE,
    RETRY_GROUP_TOPIC_PREFIX,
)
from ..protocol.heartbeat import ConsumeType
from ..protocol.message import decode_record
from ..protocol.topic_validation import is_system_topic
from .histograms import MESSAGE_SIZE_BOUNDS, BucketCounts, HistogramSeries
from .rpc_latency import RpcLatency

if TYPE_CHECKING:
    from ..broker.app import Broker

SCOPE = "broker-meter"
Rows = Sequence[tuple[float, Mapping[str, str]]]  # a series' (value, labels) at one collection
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"
_VERSION_NAMES = {
    VERSION_V3_1_8: "v3_1_8",
    VERSION_V4_6_0: "v4_6_0",
    VERSION_V4_9_4: "v4_9_4",
    VERSION_V4_9_8: "v4_9_8",
    VERSION_V5_3_3: "v5_3_3",
}
_CONSUME_MODES = {
    ConsumeType.CONSUME_ACTIVELY: "pull",
    ConsumeType.CONSUME_PASSIVELY: "push",
    ConsumeType.CONSUME_POP: "pop",
}
_STORE_LABELS = {"storage_type": "local", "storage_medium": "disk"}


@dataclass(frozen=True, slots=True)
class Lag:
    """One (group, topic) of the lag series, summed over its queues."""

    group: str
    topic: str
    is_retry: bool
    messages: int
    latency_ms: int
    ready: int


class BrokerMeter:
    """The instruments of one broker, registered on a meter by ``register``."""

    scope = SCOPE

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.rpc = RpcLatency()
        self.sizes = BucketCounts(MESSAGE_SIZE_BOUNDS)
        # made once: a delta export subtracts what the same series exported last
        self._histograms = [
            HistogramSeries(
                "rocketmq_message_size",
                "Incoming messages size",
                "",
                self.sizes,
                self._topic_labels,
            ),
            self.rpc.series,
        ]
        self._lags: list[Lag] = []
        self._storage_size = 0

    # --- wiring ----------------------------------------------------------------------------

    def attach(self) -> None:
        """Start the hot-path counts only metrics read: message sizes, request timing."""
        broker = self.broker
        broker.stats.message_sizes = self.sizes
        servers = [server for server in (broker.server, broker.vip_server) if server is not None]
        for table in {id(server.processors): server.processors for server in servers}.values():
            # the VIP port shares the main port's table; runs of sends are timed as runs
            table.wrap(self.rpc.timed, runs=self.rpc.observe_run)

    def register(self, meter: Any, base: Mapping[str, str]) -> None:
        """Create every instrument on ``meter``; each series carries the ``base`` labels."""
        from opentelemetry.metrics import Observation

        def observing(rows: Callable[[], Iterable[tuple[float, Mapping[str, str]]]]) -> Any:
            def callback(_options: Any) -> list[Any]:
                return [Observation(value, {**base, **labels}) for value, labels in rows()]

            return [callback]

        gauge, counter = meter.create_observable_gauge, meter.create_observable_counter
        gauge(
            "rocketmq_broker_permission",
            observing(self._permission),
            description="Broker permission",
        )
        gauge(
            "rocketmq_topic_number",
            observing(self._topic_number),
            description="Active topic number",
        )
        gauge(
            "rocketmq_consumer_group_number",
            observing(self._group_number),
            description="Active subscription group number",
        )
        counter(
            "rocketmq_messages_in_total",
            observing(self._messages_in),
            description="Total number of incoming messages",
        )
        counter(
            "rocketmq_throughput_in_total",
            observing(self._throughput_in),
            description="Total traffic of incoming messages",
        )
        counter(
            "rocketmq_messages_out_total",
            observing(self._messages_out),
            description="Total number of outgoing messages",
        )
        counter(
            "rocketmq_throughput_out_total",
            observing(self._throughput_out),
            description="Total traffic of outgoing messages",
        )
        counter(
            "rocketmq_send_to_dlq_messages_total",
            observing(self._dead_letters),
            description="Consumer send to DLQ messages",
        )
        gauge(
            "rocketmq_producer_connections",
            observing(self._producer_connections),
            description="Producer connections",
        )
        gauge(
            "rocketmq_consumer_connections",
            observing(self._consumer_connections),
            description="Consumer connections",
        )
        for name, unit, description, value in (
            ("rocketmq_consumer_lag_messages", "", "Consumer lag messages", _lag_messages),
            ("rocketmq_consumer_lag_latency", "ms", "Consumer lag time", _lag_latency),
            ("rocketmq_consumer_inflight_messages", "", "Consumer inflight messages", _zero),
            ("rocketmq_consumer_queueing_latency", "ms", "Consumer queueing time", _lag_latency),
            ("rocketmq_consumer_ready_messages", "", "Consumer ready messages", _ready),
        ):
            gauge(name, observing(self._lag_rows(value)), unit=unit, description=description)
        gauge(
            "rocketmq_storage_size",
            observing(lambda: [(self._storage_size, _STORE_LABELS)]),
            unit="By",
            description="Broker storage size",
        )
        gauge(
            "rocketmq_storage_flush_behind_bytes",
            observing(self._flush_behind),
            unit="By",
            description="Broker flush behind bytes",
        )
        gauge(
            "rocketmq_storage_dispatch_behind_bytes",
            observing(lambda: [(0, _STORE_LABELS)]),  # the stores dispatch as they append
            unit="By",
            description="Broker dispatch behind bytes",
        )

    def histograms(self) -> list[HistogramSeries]:
        return self._histograms

    async def refresh(self) -> None:
        """Compute what the callbacks cannot read at once: the lag (store reads) and the
        disk use (a system call, in a thread)."""
        broker = self.broker
        if not broker.ready:  # the store is not open yet, or closing: no store reads
            self._lags = []
            return
        self._storage_size = await anyio.to_thread.run_sync(
            _used_bytes, broker.config.store_path_root_dir
        )
        lags = []
        now_ms = int(time.time() * 1000)
        for group in list(broker.consumers.groups.values()):
            for topic in list(group.subscriptions):
                lag = await self._lag(group.name, topic, now_ms)
                if lag is not None:
                    lags.append(lag)
        self._lags = lags

    async def _lag(self, group: str, topic: str, now_ms: int) -> Lag | None:
        broker = self.broker
        config = broker.topics.get(topic)
        if config is None or not config.perm & (PERM_READ | PERM_WRITE):
            return None
        messages = 0
        oldest = now_ms
        for queue_id in range(config.write_queue_nums):
            committed = broker.offsets.query(group, topic, queue_id)
            if committed < 0:
                continue  # no committed offset: no lag, as Java
            behind = broker.store.max_offset(topic, queue_id) - committed
            if behind > 0:
                messages += behind
                result = await broker.store.get(topic, queue_id, committed, 1)
                if result.records:
                    stored = decode_record(bytes(result.records[0])).store_timestamp
                    oldest = min(oldest, stored)
        latency = max(0, now_ms - oldest) if messages else 0
        is_retry = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        return Lag(group, topic, is_retry, messages, latency, messages)

    # --- the rows of each series: (value, labels) --------------------------------------------

    def _permission(self) -> Rows:
        return [(self.broker.config.broker_permission, {})]

    def _topic_number(self) -> Rows:
        return [(len(self.broker.topics.table), {})]

    def _group_number(self) -> Rows:
        return [(len(self.broker.groups.table), {})]

    def _is_system_topic(self, topic: str) -> bool:
        return is_system_topic(topic, self.broker.topics.system_topics)

    def _topic_labels(self, topic: str) -> Mapping[str, str] | None:
        """The labels of an incoming-message series; None for retry and DLQ topics,
        which RocketMQ does not count as incoming."""
        if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
            return None
        config = self.broker.topics.get(topic)
        kind = config.attributes.get("message.type", "") if config is not None else ""
        return {
            "topic": topic,
            "message_type": (kind or "normal").lower(),
            "is_system": _flag(self._is_system_topic(topic)),
        }

    def _incoming(self, at: int) -> Rows:
        rows = []
        for topic, row in list(self.broker.stats.puts.items()):
            labels = self._topic_labels(topic)
            if labels is not None:
                rows.append((row[at], labels))
        return rows

    def _messages_in(self) -> Rows:
        return self._incoming(0)

    def _throughput_in(self) -> Rows:
        return self._incoming(2)

    def _outgoing(self, at: int) -> Rows:
        rows = []
        for key, row in list(self.broker.stats.gets.items()):
            topic, _, group = key.partition("@")
            if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
                continue
            system = self._is_system_topic(topic) or group.startswith(SYSTEM_GROUP_PREFIX)
            labels = {"topic": topic, "consumer_group": group, "is_system": _flag(system)}
            rows.append((row[at], labels))
        return rows

    def _messages_out(self) -> Rows:
        return self._outgoing(0)

    def _throughput_out(self) -> Rows:
        return self._outgoing(2)

    def _dead_letters(self) -> Rows:
        return [
            (
                count,
                {
                    "consumer_group": group,
                    "topic": topic,
                    "is_system": _flag(self._is_system_topic(topic)),
                },
            )
            for (group, topic), count in list(self.broker.stats.dead_letters.items())
        ]

    def _producer_connections(self) -> Rows:
        counts: dict[tuple[str, str], int] = {}
        for channels in list(self.broker.producers.groups.values()):
            for client in list(channels.values()):
                key = (client.language.lower(), version_name(client.version))
                counts[key] = counts.get(key, 0) + 1
        return [
            (count, {"language": language, "version": version, "protocol_type": "remoting"})
            for (language, version), count in counts.items()
        ]

    def _consumer_connections(self) -> Rows:
        counts: dict[tuple[str, str, str, str], int] = {}
        for group in list(self.broker.consumers.groups.values()):
            mode = _CONSUME_MODES.get(group.consume_type, "push")
            for client in list(group.channels.values()):
                key = (group.name, client.language.lower(), version_name(client.version), mode)
                counts[key] = counts.get(key, 0) + 1
        return [
            (
                count,
                {
                    "consumer_group": group,
                    "language": language,
                    "version": version,
                    "consume_mode": mode,
                    "protocol_type": "remoting",
                    "is_system": _flag(group.startswith(SYSTEM_GROUP_PREFIX)),
                },
            )
            for (group, language, version, mode), count in counts.items()
        ]

    def _lag_rows(self, value: Callable[[Lag], int]) -> Callable[[], Rows]:
        def rows() -> Rows:
            return [(value(lag), self._lag_labels(lag)) for lag in self._lags]

        return rows

    def _lag_labels(self, lag: Lag) -> Mapping[str, str]:
        system = self._is_system_topic(lag.topic) or lag.group.startswith(SYSTEM_GROUP_PREFIX)
        return {
            "consumer_group": lag.group,
            "topic": lag.topic,
            "is_retry": _flag(lag.is_retry),
            "is_system": _flag(system),
        }

    def _flush_behind(self) -> Rows:
        if not self.broker.ready:
            return []
        store = self.broker.store
        flushed = store.stats().get("flushed_offset", store.max_commit_log_offset)
        return [(max(0, store.max_commit_log_offset - flushed), _STORE_LABELS)]


def _lag_messages(lag: Lag) -> int:
    return lag.messages


def _lag_latency(lag: Lag) -> int:
    return lag.latency_ms


def _ready(lag: Lag) -> int:
    return lag.ready


def _zero(_lag: Lag) -> int:
    return 0


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _used_bytes(path: str) -> int:
    """Used bytes of the partition holding ``path`` (0 when it is missing)."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return 0
    return usage.total - usage.free


def version_name(version: int) -> str:
    """A client's version as RocketMQ 5 labels it (``v5_3_3``); the number when unknown."""
    return _VERSION_NAMES.get(version, str(version))
