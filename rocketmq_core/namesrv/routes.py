"""The route table: which brokers exist, which topics they serve, which are alive.

RocketMQ's RouteInfoManager semantics (ROUTE.md §5.1), sans-IO: times are passed in
(milliseconds, any monotonic clock) and a broker's connection is an opaque ``channel``
token, so the table can be tested without sockets or sleeps. It belongs to one event
loop; nothing here awaits, so every method is atomic.

Encoded route bodies are cached per topic and JSON form, and the cache is dropped on
every change: clients ask for routes far more often than brokers change them.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..protocol.bodies import (
    BrokerData,
    BrokerMemberGroup,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfigWrapper,
    TopicRouteData,
)
from ..protocol.constants import MASTER_ID, Perm, TopicSysFlag

log = logging.getLogger("rocketmq.namesrv")


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update: float  # ms
    timeout: float  # ms of silence after which the broker is dropped
    data_version: DataVersion
    channel: Any
    ha_server_addr: str
    broker_name: str
    cluster: str


@dataclass(frozen=True, slots=True)
class Registration:
    """What REGISTER_BROKER answers: a slave learns its master's addresses."""

    master_addr: str | None = None
    ha_server_addr: str | None = None


@dataclass(slots=True)
class RouteTable:
    broker_channel_expired_time: float = 120_000
    delete_topic_with_broker_registration: bool = False
    clusters: dict[str, dict[str, None]] = field(default_factory=dict)  # ordered sets
    brokers: dict[str, BrokerData] = field(default_factory=dict)
    topic_queues: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    live: dict[str, BrokerLiveInfo] = field(default_factory=dict)
    filter_servers: dict[str, list[str]] = field(default_factory=dict)
    _route_bodies: dict[tuple[str, bool], bytes] = field(default_factory=dict)
    _listeners: list[Callable[[], None]] = field(default_factory=list)

    def on_change(self, listener: Callable[[], None]) -> None:
        """``listener()`` after every change of routes (caches built on top of the table)."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        self._route_bodies.clear()
        for listener in self._listeners:
            listener()

    # --- brokers -------------------------------------------------------------------------

    def register_broker(
        self,
        *,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topics: TopicConfigWrapper | None,
        filter_server_list: Iterable[str] = (),
        channel: Any = None,
        now: float,
        timeout: float | None = None,
        zone_name: str | None = None,
        endpoints: Iterable[str] = (),
    ) -> Registration:
        """REGISTER_BROKER: add or refresh a broker and, from a master, its topics."""
        self.clusters.setdefault(cluster, {})[broker_name] = None
        broker = self.brokers.get(broker_name)
        first_registration = broker is None
        if broker is None:
            broker = self.brokers[broker_name] = BrokerData(cluster, broker_name)
        routes_changed = first_registration  # a refresh alone keeps cached route bodies
        if zone_name is not None and zone_name != broker.zone_name:
            broker.zone_name = zone_name
            routes_changed = True
        # one host:port has one role: a slave promoted to master drops its old id
        for other_id, addr in list(broker.broker_addrs.items()):
            if addr == broker_addr and other_id != broker_id:
                _drop_member(broker, other_id)
                routes_changed = True
        previous_addr = broker.broker_addrs.get(broker_id)
        if previous_addr != broker_addr:
            broker.broker_addrs[broker_id] = broker_addr
            routes_changed = True
        first_registration = first_registration or previous_addr is None
        endpoints = list(endpoints)
        if endpoints != broker.endpoints.get(broker_id, []):
            if endpoints:
                broker.endpoints[broker_id] = endpoints
            else:
                del broker.endpoints[broker_id]
            routes_changed = True

        version = topics.data_version if topics is not None else DataVersion()
        # topics come from masters only, and only when new or changed
        if (
            topics is not None
            and broker_id == MASTER_ID
            and (first_registration or self.data_version_changed(broker_addr, version))
        ):
            self._take_topics(broker_name, topics)
            routes_changed = True

        self.live[broker_addr] = BrokerLiveInfo(
            now,
            timeout if timeout else self.broker_channel_expired_time,
            version,
            channel,
            ha_server_addr,
            broker_name,
            cluster,
        )
        servers = list(filter_server_list)
        if servers != self.filter_servers.get(broker_addr, []):
            if servers:
                self.filter_servers[broker_addr] = servers
            else:
                del self.filter_servers[broker_addr]
            routes_changed = True
        if routes_changed:
            self._changed()

        if broker_id != MASTER_ID:
            master = broker.broker_addrs.get(MASTER_ID)
            master_live = self.live.get(master) if master is not None else None
            if master_live is not None:
                return Registration(master, master_live.ha_server_addr)
        return Registration()

    def _take_topics(self, broker_name: str, topics: TopicConfigWrapper) -> None:
        for name, config in topics.topic_configs.items():
            self.topic_queues.setdefault(name, {})[broker_name] = QueueData.of(broker_name, config)
        if self.delete_topic_with_broker_registration:
            for name in [t for t, q in self.topic_queues.items() if broker_name in q]:
                if name not in topics.topic_configs:
                    self._remove_queue(name, broker_name)

    def data_version_changed(self, broker_addr: str, version: DataVersion) -> bool:
        """QUERY_DATA_VERSION: does ``version`` differ from what the broker last registered?"""
        live = self.live.get(broker_addr)
        return live is None or live.data_version != version

    def refresh(self, broker_addr: str, now: float) -> bool:
        """Note a sign of life (heartbeat, unchanged data version); False if unknown."""
        live = self.live.get(broker_addr)
        if live is None:
            return False
        live.last_update = now
        return True

    def unregister_broker(
        self, *, cluster: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        """UNREGISTER_BROKER: a broker shutting down takes its routes with it."""
        self.live.pop(broker_addr, None)
        self.filter_servers.pop(broker_addr, None)
        broker = self.brokers.get(broker_name)
        if broker is not None and broker.broker_addrs.get(broker_id) == broker_addr:
            _drop_member(broker, broker_id)
            if not broker.broker_addrs:
                self._remove_broker_name(broker_name)
        self._changed()

    def remove_channel(self, channel: Any) -> list[str]:
        """A connection closed: drop every broker address registered over it."""
        addrs = [addr for addr, live in self.live.items() if live.channel is channel]
        for addr in addrs:
            self.remove_address(addr)
        return addrs

    def expire(self, now: float) -> list[tuple[str, Any]]:
        """Drop brokers silent for longer than their timeout; return (address, channel)."""
        expired = [
            (addr, live.channel)
            for addr, live in self.live.items()
            if now - live.last_update > live.timeout
        ]
        for addr, _channel in expired:
            self.remove_address(addr)
        return expired

    def remove_address(self, broker_addr: str) -> None:
        live = self.live.pop(broker_addr, None)
        self.filter_servers.pop(broker_addr, None)
        for name, broker in list(self.brokers.items()):
            for broker_id, addr in list(broker.broker_addrs.items()):
                if addr == broker_addr:
                    _drop_member(broker, broker_id)
            if not broker.broker_addrs:
                self._remove_broker_name(name)
        if live is not None:
            log.info("broker %s (%s) removed from routes", broker_addr, live.broker_name)
        self._changed()

    def _remove_broker_name(self, broker_name: str) -> None:
        broker = self.brokers.pop(broker_name, None)
        if broker is not None:
            names = self.clusters.get(broker.cluster)
            if names is not None:
                names.pop(broker_name, None)
                if not names:
                    del self.clusters[broker.cluster]
        for topic in [t for t, queues in self.topic_queues.items() if broker_name in queues]:
            self._remove_queue(topic, broker_name)

    def _remove_queue(self, topic: str, broker_name: str) -> None:
        queues = self.topic_queues[topic]
        queues.pop(broker_name, None)
        if not queues:
            del self.topic_queues[topic]

    # --- routes --------------------------------------------------------------------------

    def route(self, topic: str) -> TopicRouteData | None:
        """The topic's route, or None unless it has queues on a broker that exists."""
        queues = self.topic_queues.get(topic)
        if not queues:
            return None
        brokers = [self.brokers[name].copy() for name in queues if name in self.brokers]
        if not brokers:
            return None
        filters = {
            addr: list(self.filter_servers[addr])
            for broker in brokers
            for addr in broker.broker_addrs.values()
            if addr in self.filter_servers
        }
        queue_datas = [dataclasses.replace(queue) for queue in queues.values()]
        return TopicRouteData(queue_datas, brokers, filters)

    def route_body(self, topic: str, standard: bool) -> bytes | None:
        """The encoded route, cached until the table changes."""
        key = (topic, standard)
        body = self._route_bodies.get(key)
        if body is None:
            route = self.route(topic)
            if route is None:
                return None
            body = self._route_bodies[key] = route.encode(standard=standard)
        return body

    def register_topic(self, topic: str, queue_datas: Iterable[QueueData]) -> None:
        """REGISTER_TOPIC_IN_NAMESRV: add queues of brokers the table knows."""
        for queue in queue_datas:
            if queue.broker_name in self.brokers:
                self.topic_queues.setdefault(topic, {})[queue.broker_name] = queue
        self._changed()

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV: everywhere, or only on the brokers of ``cluster``."""
        if cluster:
            for broker_name in list(self.clusters.get(cluster, ())):
                if broker_name in self.topic_queues.get(topic, {}):
                    self._remove_queue(topic, broker_name)
        else:
            self.topic_queues.pop(topic, None)
        self._changed()

    def change_write_perm(self, broker_name: str, writable: bool) -> int:
        """WIPE_/ADD_WRITE_PERM_OF_BROKER: flip the write bit of every topic on a broker."""
        count = 0
        for queues in self.topic_queues.values():
            queue = queues.get(broker_name)
            if queue is not None:
                write = int(Perm.WRITE)
                queue.perm = (queue.perm | write) if writable else (queue.perm & ~write)
                count += 1
        self._changed()
        return count

    # --- listings ------------------------------------------------------------------------

    def cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            {name: broker.copy() for name, broker in self.brokers.items()},
            {cluster: list(names) for cluster, names in self.clusters.items()},
        )

    def topics(self) -> list[str]:
        return list(self.topic_queues)

    def topics_of_cluster(self, cluster: str) -> list[str]:
        names = self.clusters.get(cluster, {})
        return [topic for topic, queues in self.topic_queues.items() if queues.keys() & names]

    def system_topics(self) -> tuple[list[str], str | None]:
        """Cluster and broker names (topics every broker creates) and one broker address."""
        topics: list[str] = []
        for cluster, names in self.clusters.items():
            topics.append(cluster)
            topics.extend(names)
        some_addr = next(
            (next(iter(b.broker_addrs.values())) for b in self.brokers.values() if b.broker_addrs),
            None,
        )
        return topics, some_addr

    def unit_topics(self, *, unit: bool | None, unit_sub: bool | None) -> list[str]:
        """Topics any of whose queues match the unit flags (None: either)."""

        def matches(queue: QueueData) -> bool:
            has_unit = bool(queue.topic_sys_flag & TopicSysFlag.UNIT)
            has_sub = bool(queue.topic_sys_flag & TopicSysFlag.UNIT_SUB)
            return (unit is None or has_unit == unit) and (unit_sub is None or has_sub == unit_sub)

        return [
            topic
            for topic, queues in self.topic_queues.items()
            if any(matches(queue) for queue in queues.values())
        ]

    def member_group(self, cluster: str, broker_name: str) -> BrokerMemberGroup:
        broker = self.brokers.get(broker_name)
        addrs = dict(broker.broker_addrs) if broker is not None else {}
        return BrokerMemberGroup(cluster, broker_name, addrs)


def _drop_member(broker: BrokerData, broker_id: int) -> None:
    del broker.broker_addrs[broker_id]
    broker.endpoints.pop(broker_id, None)
