"""What Admin returns: small dataclasses, one per answer (mqadmin's result beans).

Every type here is a plain dataclass, so ``orjson.dumps`` writes any of them as it is
(the CLI's ``--json``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import RocketMQError
from ..protocol.bodies import Connection as Connection  # re-exported (see below)
from ..protocol.bodies import SubscriptionGroupConfig
from ..protocol.constants import MASTER_ID
from ..protocol.heartbeat import MessageQueue


class AdminError(RocketMQError):
    """An admin call that failed: the message says what, where and why.

    ``address`` is the broker or name server that refused or did not answer (None when
    the failure is not one server's), ``code`` its ResponseCode when it answered.
    """

    def __init__(self, message: str, *, address: str | None = None, code: int | None = None):
        super().__init__(message)
        self.address = address
        self.code = code


class TopicExistsError(AdminError):
    """create_topic(exist_ok=False) found the topic on some of its target brokers."""

    def __init__(self, topic: str, brokers: list[str]):
        super().__init__(f"topic {topic} exists on {', '.join(brokers)}")
        self.topic = topic
        self.brokers = brokers


# --- clusters ------------------------------------------------------------------------------


@dataclass(slots=True)
class BrokerInfo:
    """One broker name of a cluster: the address of each member (0 = the master)."""

    cluster: str
    broker_name: str
    addresses: dict[int, str] = field(default_factory=dict)

    @property
    def master_address(self) -> str | None:
        return self.addresses.get(MASTER_ID)

    @property
    def any_address(self) -> str | None:
        """The master's address, else the lowest-numbered slave's (reads may go there)."""
        if MASTER_ID in self.addresses:
            return self.addresses[MASTER_ID]
        return next((self.addresses[i] for i in sorted(self.addresses)), None)


@dataclass(slots=True)
class ClusterSummary:
    """GET_BROKER_CLUSTER_INFO: the broker names of each cluster and their members."""

    clusters: dict[str, list[str]] = field(default_factory=dict)
    brokers: dict[str, BrokerInfo] = field(default_factory=dict)

    def masters(self, cluster: str | None = None) -> list[BrokerInfo]:
        """The brokers of ``cluster`` (of every cluster when None) that have a master."""
        if cluster is None:
            names = sorted(self.brokers)
        elif cluster in self.clusters:
            names = sorted(self.clusters[cluster])
        else:
            known = ", ".join(sorted(self.clusters)) or "none"
            raise AdminError(
                f"cluster {cluster!r} is not known to the name server (known: {known})"
            )
        return [
            self.brokers[name]
            for name in names
            if name in self.brokers and self.brokers[name].master_address
        ]

    def broker_at(self, address: str) -> BrokerInfo | None:
        """The broker one of whose members listens at ``address``."""
        for broker in self.brokers.values():
            if address in broker.addresses.values():
                return broker
        return None


# --- topics --------------------------------------------------------------------------------


@dataclass(slots=True)
class QueueStats:
    """One queue of GET_TOPIC_STATS_INFO; ``messages`` is what it holds now."""

    queue: MessageQueue
    min_offset: int
    max_offset: int
    last_update_timestamp: int  # store time of its last message, ms (0: none)
    messages: int = 0

    def __post_init__(self) -> None:
        self.messages = max(0, self.max_offset - self.min_offset)


@dataclass(slots=True)
class TopicStats:
    topic: str
    queues: list[QueueStats] = field(default_factory=list)
    total_messages: int = 0

    def __post_init__(self) -> None:
        self.total_messages = sum(queue.messages for queue in self.queues)


# --- consumer groups -----------------------------------------------------------------------


# the bean UPDATE_AND_CREATE_SUBSCRIPTIONGROUP carries, as the broker keeps it; Connection
# (imported above) is one client of a ConsumerConnection or ProducerConnection body
GroupConfig = SubscriptionGroupConfig


@dataclass(slots=True)
class GroupInfo:
    """A subscription group and the broker names that hold its config."""

    config: GroupConfig
    brokers: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.config.group_name


@dataclass(slots=True)
class ConsumerConnections:
    """GET_CONSUMER_CONNECTION_LIST, merged over the brokers: who consumes, and how."""

    group: str
    connections: list[Connection] = field(default_factory=list)
    consume_type: str = ""
    message_model: str = ""
    consume_from_where: str = ""
    subscriptions: dict[str, str] = field(default_factory=dict)  # topic -> expression


@dataclass(slots=True)
class ProducerConnections:
    """GET_PRODUCER_CONNECTION_LIST from the brokers of a topic, merged by client id."""

    group: str
    topic: str
    connections: list[Connection] = field(default_factory=list)


@dataclass(slots=True)
class TopicTraffic:
    """One row of ``statsAll``: a topic and one of its consumer groups (None: no group
    consumes it), from the statistics of the topic's masters (VIEW_BROKER_STATS_DATA):
    messages put (in) and pulled by the group (out), per second over the last minute and
    in the last 24 hours, summed over the masters; the group's lag (accumulation). The
    out numbers are None when no group consumes the topic."""

    topic: str
    group: str | None
    accumulation: int
    in_tps: float
    out_tps: float | None
    in_msg_24h: int
    out_msg_24h: int | None

    @property
    def active(self) -> bool:
        """Any message put or pulled in the last 24 hours (statsAll -a)."""
        return self.in_msg_24h > 0 or (self.out_msg_24h or 0) > 0


@dataclass(slots=True)
class QueueProgress:
    """One queue of GET_CONSUME_STATS: how far the group is behind the broker."""

    queue: MessageQueue
    broker_offset: int
    consumer_offset: int
    last_timestamp: int  # store time of the last consumed message, ms (0: none)
    lag: int = 0

    def __post_init__(self) -> None:
        self.lag = max(0, self.broker_offset - self.consumer_offset)


@dataclass(slots=True)
class ConsumeStats:
    """GET_CONSUME_STATS of every broker, merged; ``total_lag`` is mqadmin's Diff Total."""

    group: str
    topic: str | None
    queues: list[QueueProgress] = field(default_factory=list)
    consume_tps: float = 0.0
    broker_offset_total: int = 0
    consumer_offset_total: int = 0
    total_lag: int = 0

    def __post_init__(self) -> None:
        self.broker_offset_total = sum(queue.broker_offset for queue in self.queues)
        self.consumer_offset_total = sum(queue.consumer_offset for queue in self.queues)
        self.total_lag = sum(queue.lag for queue in self.queues)


# --- offsets -------------------------------------------------------------------------------


@dataclass(slots=True)
class QueueOffset:
    """Where a reset left one queue. ``online``: the broker told the group's online
    consumers; else the offset was committed directly (the group was offline)."""

    queue: MessageQueue
    offset: int
    online: bool


@dataclass(slots=True)
class ResetOffsetResult:
    group: str
    topic: str
    timestamp: int
    offsets: list[QueueOffset] = field(default_factory=list)
