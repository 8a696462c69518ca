"""Admin: what ``mqadmin`` does, as an async API (topics, clusters, groups, messages,
offsets, name-server KV config).

async with Admin(namesrv_addr="127.0.0.1:9876") as admin:
    await admin.create_topic("Orders", 8, cluster="DefaultCluster")
    stats = await admin.consume_stats("CG-orders", "Orders")

Results are the dataclasses of ``admin_types``; a failure raises AdminError naming the
call, the broker or name server, and the answer (or silence) that made it fail.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any

import anyio

from ..config import format_properties, parse_properties
from ..errors import RemotingError, ResponseError
from ..protocol.bodies import (
    ClusterInfo,
    ConsumerConnection,
    GroupList,
    KVTable,
    ProducerConnection,
    ResetOffsetBody,
    SubscriptionGroupWrapper,
    TopicList,
    TopicRouteData,
    TopicStatsTable,
)
from ..protocol.bodies import ConsumeStats as BrokerConsumeStats
from ..protocol.codes import RequestCode, ResponseCode
from ..protocol.command import RemotingCommand
from ..protocol.constants import ORDER_TOPIC_CONFIG_NAMESPACE, PERM_RW
from ..protocol.headers import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetRouteInfoRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    KVConfigKeyRequestHeader,
    OffsetResponseHeader,
    PutKVConfigRequestHeader,
    QueryMessageRequestHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    TopicRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from ..protocol.heartbeat import MessageQueue, SubscriptionData
from ..protocol.message import decode_offset_msg_id, host_address, iter_records, unpack_host
from ..protocol.topic_validation import is_system_topic
from .admin_types import (
    AdminError,
    BrokerInfo,
    ClusterSummary,
    ConsumerConnections,
    ConsumeStats,
    GroupConfig,
    GroupInfo,
    ProducerConnections,
    QueueOffset,
    QueueProgress,
    QueueStats,
    ResetOffsetResult,
    TopicExistsError,
    TopicStats,
    TopicTraffic,
    TrafficSample,
    traffic_between,
)
from .config import ClientConfig
from .consumer_requests import ConsumerError, PullResult, pull_message
from .instance import ClientInstance, Header
from .lifetime import PartsLifetime
from .message import ReceivedMessage

log = logging.getLogger("rocketmq.client.admin")

SUCCESS = (ResponseCode.SUCCESS,)
LATEST = -1  # reset_offset_by_time: to the end of every queue (Java's -1)
TOOLS_GROUP = "TOOLS_CONSUMER"  # the group mqadmin reads queues as (Java's MixAll)
_FOREVER = (1 << 63) - 1
_NOT_STATS = ("%RETRY%", "%DLQ%")  # statsAll skips retry and dead-letter topics


class Admin(PartsLifetime):
    """An async context manager owning (or sharing) one ClientInstance."""

    def __init__(
        self,
        namesrv_addr: str | Sequence[str] = "",
        *,
        config: ClientConfig | None = None,
        instance: ClientInstance | None = None,
        route_timeout: float = 10.0,
    ) -> None:
        self.config = config or (instance.config if instance else ClientConfig(namesrv_addr))
        self.instance = instance or ClientInstance(self.config)
        self.route_timeout = route_timeout  # how long create_topic waits to be routed

    async def _start(self, lifetime: AsyncExitStack) -> None:
        await lifetime.enter_async_context(self.instance)

    # --- requests ------------------------------------------------------------------------

    async def _broker(
        self,
        address: str,
        code: int,
        header: Header = None,
        body: bytes = b"",
        *,
        what: str,
        accept: Iterable[int] = SUCCESS,
    ) -> RemotingCommand:
        """One request to a broker; AdminError says what failed there and why."""
        try:
            return await self.instance.invoke(address, code, header, body, accept=accept)
        except ResponseError as exc:
            raise AdminError(
                f"{what} failed on broker {address}: {exc}", address=address, code=exc.code
            ) from exc
        except (RemotingError, OSError) as exc:
            raise AdminError(
                f"{what} failed: broker {address} did not answer ({exc})", address=address
            ) from exc

    async def _namesrv(
        self,
        code: int,
        header: Header = None,
        body: bytes = b"",
        *,
        what: str,
        accept: Iterable[int] = SUCCESS,
    ) -> RemotingCommand:
        """One request to the first name server that answers."""
        try:
            return await self.instance.invoke_namesrv(code, header, body, accept=accept)
        except ResponseError as exc:
            raise AdminError(f"{what} failed on the name server: {exc}", code=exc.code) from exc
        except RemotingError as exc:
            raise AdminError(f"{what} failed: {exc} (is a name server running there?)") from exc

    async def _every_namesrv(self, code: int, header: Header, *, what: str) -> None:
        """The same request to every name server (they share nothing); all must succeed."""
        failures: list[str] = []
        for address in self.instance.namesrv_addresses:
            try:
                await self.instance.invoke(address, code, header)
            except (ResponseError, RemotingError, OSError) as exc:
                failures.append(f"{address}: {exc}")
        if failures:
            raise AdminError(f"{what} failed on name server " + "; ".join(failures))

    # --- clusters ------------------------------------------------------------------------

    async def cluster_info(self) -> ClusterSummary:
        response = await self._namesrv(
            RequestCode.GET_BROKER_CLUSTER_INFO, what="reading the cluster info"
        )
        info = ClusterInfo.decode(response.body)
        self.instance.learn_endpoints(info.broker_addr_table.values())
        return ClusterSummary(
            {cluster: sorted(names) for cluster, names in sorted(info.cluster_addr_table.items())},
            {
                name: BrokerInfo(data.cluster, name, dict(sorted(data.broker_addrs.items())))
                for name, data in sorted(info.broker_addr_table.items())
            },
        )

    async def broker_runtime_info(self, address: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the broker's version, uptime, store offsets, counters."""
        response = await self._broker(
            address, RequestCode.GET_BROKER_RUNTIME_INFO, what="reading the runtime info"
        )
        return KVTable.decode(response.body).table

    async def _targets(
        self, cluster: str | None, broker_addr: str | None, *, what: str
    ) -> list[tuple[str, str]]:
        """(broker name, master address) to write ``what`` to: one broker, or every master
        of a cluster (the only cluster when none is named)."""
        if cluster is not None and broker_addr is not None:
            raise ValueError("name a cluster or a broker address, not both")
        summary = await self.cluster_info()
        if broker_addr is not None:
            broker = summary.broker_at(broker_addr)
            return [(broker.broker_name if broker else broker_addr, broker_addr)]
        if cluster is None:
            if len(summary.clusters) != 1:
                known = ", ".join(summary.clusters) or "none registered"
                raise AdminError(f"{what}: name a cluster or a broker address (clusters: {known})")
            cluster = next(iter(summary.clusters))
        masters = summary.masters(cluster)
        if not masters:
            raise AdminError(f"{what}: cluster {cluster!r} has no broker master")
        return [(broker.broker_name, broker.master_address or "") for broker in masters]

    async def _masters(self) -> list[tuple[str, str]]:
        """(broker name, address) of every master the name server knows."""
        summary = await self.cluster_info()
        return [(broker.broker_name, broker.master_address or "") for broker in summary.masters()]

    # --- topics --------------------------------------------------------------------------

    async def create_topic(
        self,
        topic: str,
        queues: int = 4,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        perm: int = int(PERM_RW),
        order: bool = False,
        read_queues: int | None = None,
        write_queues: int | None = None,
        exist_ok: bool = True,
    ) -> list[str]:
        """UPDATE_AND_CREATE_TOPIC on every master of ``cluster`` (or on one broker), then
        wait (``route_timeout``) until the name server routes it. Returns the addresses.

        The request creates or changes; with ``exist_ok=False`` a topic any target has
        already raises TopicExistsError and nothing is written."""
        read = queues if read_queues is None else read_queues
        write = queues if write_queues is None else write_queues
        what = f"creating topic {topic!r}"
        if not 0 <= perm <= 7:  # PermName.isValid, as the Java client checks before sending
            raise AdminError(f"{what}: permission {perm} is invalid: use 2 (W), 4 (R) or 6 (RW)")
        targets = await self._targets(cluster, broker_addr, what=what)
        if not exist_ok and not is_system_topic(topic):  # the broker says why it refuses those
            holders = [name for name, address in targets if await self._has_topic(address, topic)]
            if holders:
                raise TopicExistsError(topic, holders)
        header = CreateTopicRequestHeader(
            topic=topic,
            default_topic="TBW102",
            read_queue_nums=read,
            write_queue_nums=write,
            perm=perm,
            topic_filter_type="SINGLE_TAG",
            topic_sys_flag=0,
            order=order,
        )
        for name, address in targets:
            await self._broker(
                address, RequestCode.UPDATE_AND_CREATE_TOPIC, header, what=f"{what} on {name}"
            )
        if order:
            await self._put_order_conf(topic, [name for name, _ in targets], write, cluster)
        # a broker the name server does not know (yet) cannot be waited for
        registered = [name for name, address in targets if name != address]
        await self._wait_routed(topic, registered, read, write, perm)
        return [address for _, address in targets]

    update_topic = create_topic  # the same request changes an existing topic

    async def _has_topic(self, address: str, topic: str) -> bool:
        """Whether the broker at ``address`` has ``topic`` (GET_TOPIC_CONFIG; the name
        server's route for a broker older than 5.x, which lacks that request)."""
        response = await self._broker(
            address,
            RequestCode.GET_TOPIC_CONFIG,
            TopicRequestHeader(topic=topic),
            what=f"looking for topic {topic!r}",
            accept=(
                ResponseCode.SUCCESS,
                ResponseCode.TOPIC_NOT_EXIST,
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            ),
        )
        if response.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            return response.code == ResponseCode.SUCCESS
        try:
            route = await self.topic_route(topic)
        except AdminError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                return False
            raise
        return any(address in broker.broker_addrs.values() for broker in route.broker_datas)

    async def _put_order_conf(
        self, topic: str, broker_names: list[str], queues: int, cluster: str | None
    ) -> None:
        """The orderly layout ``broker:queues;...`` the name server hands to producers;
        a single broker's entry is merged into what is there (mqadmin -o true)."""
        layout: dict[str, str] = {}
        if cluster is None:
            existing = await self.get_kv(ORDER_TOPIC_CONFIG_NAMESPACE, topic) or ""
            for entry in filter(None, existing.split(";")):
                name, _, count = entry.partition(":")
                layout[name] = count
        for name in broker_names:
            layout[name] = str(queues)
        value = ";".join(f"{name}:{count}" for name, count in layout.items())
        await self.put_kv(ORDER_TOPIC_CONFIG_NAMESPACE, topic, value)

    async def _wait_routed(
        self, topic: str, broker_names: list[str], read: int, write: int, perm: int
    ) -> None:
        with anyio.move_on_after(self.route_timeout):
            while True:
                try:
                    route = await self.topic_route(topic)
                except AdminError as exc:
                    if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                        raise
                else:
                    routed = {
                        q.broker_name: (q.read_queue_nums, q.write_queue_nums, q.perm)
                        for q in route.queue_datas
                    }
                    if all(routed.get(name) == (read, write, perm) for name in broker_names):
                        return
                await anyio.sleep(0.05)
        raise AdminError(
            f"topic {topic!r} was written to {', '.join(broker_names)} but the name server"
            f" does not route it as asked after {self.route_timeout:g} s; brokers register"
            " every 30 s: look again with topic_route"
        )

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> list[str]:
        """DELETE_TOPIC_IN_BROKER on every master of ``cluster`` (else of the topic's
        route), then DELETE_TOPIC_IN_NAMESRV on every name server. Returns the brokers."""
        what = f"deleting topic {topic!r}"
        if cluster is not None:
            targets = await self._targets(cluster, None, what=what)
        else:
            route = await self.topic_route(topic)
            targets = [(b.broker_name, b.master_addr) for b in route.broker_datas if b.master_addr]
        for name, address in targets:
            await self._broker(
                address,
                RequestCode.DELETE_TOPIC_IN_BROKER,
                TopicRequestHeader(topic=topic),
                what=f"{what} on {name}",
            )
        await self._every_namesrv(
            RequestCode.DELETE_TOPIC_IN_NAMESRV,
            DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster),
            what=what,
        )
        try:  # an orderly topic's layout goes with it
            await self.delete_kv(ORDER_TOPIC_CONFIG_NAMESPACE, topic)
        except AdminError as exc:
            log.debug("order config of %s not deleted: %s", topic, exc)
        return [address for _, address in targets]

    async def list_topics(self) -> list[str]:
        response = await self._namesrv(
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, what="listing topics"
        )
        return sorted(TopicList.decode(response.body).topic_list)

    async def topic_route(self, topic: str) -> TopicRouteData:
        """The name server's route of ``topic``, fresh; AdminError TOPIC_NOT_EXIST if none."""
        try:
            response = await self.instance.invoke_namesrv(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic)
            )
        except ResponseError as exc:
            raise AdminError(
                f"topic {topic!r} has no route: {(exc.remark or str(exc)).splitlines()[0]}"
                if exc.code == ResponseCode.TOPIC_NOT_EXIST
                else f"reading the route of {topic!r} failed on the name server: {exc}",
                code=exc.code,
            ) from exc
        except RemotingError as exc:
            raise AdminError(f"reading the route of {topic!r} failed: {exc}") from exc
        return TopicRouteData.decode(response.body)

    async def _route_brokers(self, topic: str) -> list[tuple[str, str]]:
        """(broker name, address to read from) of each broker serving ``topic``."""
        route = await self.topic_route(topic)
        brokers = []
        for data in sorted(route.broker_datas, key=lambda b: b.broker_name):
            address = BrokerInfo(data.cluster, data.broker_name, data.broker_addrs).any_address
            if address:
                brokers.append((data.broker_name, address))
        return brokers

    async def topic_stats(self, topic: str) -> TopicStats:
        """GET_TOPIC_STATS_INFO from each broker of the route: per queue min/max offset."""
        queues: list[QueueStats] = []
        for name, address in await self._route_brokers(topic):
            response = await self._broker(
                address,
                RequestCode.GET_TOPIC_STATS_INFO,
                TopicRequestHeader(topic=topic),
                what=f"reading the stats of {topic!r} on {name}",
            )
            for queue, entry in TopicStatsTable.decode(response.body).offset_table.items():
                queues.append(
                    QueueStats(
                        queue, entry.min_offset, entry.max_offset, entry.last_update_timestamp
                    )
                )
        return TopicStats(topic, sorted(queues, key=lambda q: q.queue))

    # --- consumer groups -----------------------------------------------------------------

    async def list_groups(self) -> list[GroupInfo]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG from every master, merged by group name."""
        groups: dict[str, GroupInfo] = {}
        for name, address in await self._masters():
            response = await self._broker(
                address,
                RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
                what=f"listing subscription groups on {name}",
            )
            table = SubscriptionGroupWrapper.decode(response.body).subscription_group_table
            for group, config in table.items():
                info = groups.get(group)
                if info is None:
                    info = groups[group] = GroupInfo(config)
                info.brokers.append(name)
        return [groups[group] for group in sorted(groups)]

    async def create_group(
        self,
        group: str | GroupConfig,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> list[str]:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on every master of ``cluster`` (or on one
        broker); ``group`` is a name (the defaults) or a whole GroupConfig."""
        config = group if isinstance(group, GroupConfig) else GroupConfig(group)
        what = f"creating subscription group {config.group_name!r}"
        targets = await self._targets(cluster, broker_addr, what=what)
        body = config.encode()
        for name, address in targets:
            await self._broker(
                address,
                RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                None,
                body,
                what=f"{what} on {name}",
            )
        return [address for _, address in targets]

    update_group = create_group

    async def delete_group(
        self,
        group: str,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        clean_offset: bool = True,
    ) -> list[str]:
        """DELETE_SUBSCRIPTIONGROUP (and its committed offsets unless ``clean_offset``
        is False) on every master of ``cluster`` or on one broker."""
        what = f"deleting subscription group {group!r}"
        targets = await self._targets(cluster, broker_addr, what=what)
        header = DeleteSubscriptionGroupRequestHeader(group_name=group, clean_offset=clean_offset)
        for name, address in targets:
            await self._broker(
                address, RequestCode.DELETE_SUBSCRIPTIONGROUP, header, what=f"{what} on {name}"
            )
        return [address for _, address in targets]

    async def group_connections(self, group: str) -> ConsumerConnections:
        """GET_CONSUMER_CONNECTION_LIST from every master, merged by client id;
        AdminError CONSUMER_NOT_ONLINE when no broker has a consumer of ``group``."""
        result = ConsumerConnections(group)
        seen: set[str] = set()
        asked: list[str] = []
        for name, address in await self._masters():
            asked.append(name)
            response = await self._broker(
                address,
                RequestCode.GET_CONSUMER_CONNECTION_LIST,
                GetConsumerConnectionListRequestHeader(consumer_group=group),
                what=f"reading the connections of {group!r} on {name}",
                accept=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE),
            )
            if response.code != ResponseCode.SUCCESS:
                continue
            body = ConsumerConnection.decode(response.body)
            for connection in body.connection_set:
                if connection.client_id not in seen:
                    seen.add(connection.client_id)
                    result.connections.append(connection)
            if body.consume_type is not None:
                result.consume_type = body.consume_type.name
            if body.message_model is not None:
                result.message_model = body.message_model.name
            if body.consume_from_where is not None:
                result.consume_from_where = body.consume_from_where.name
            for topic, subscription in body.subscription_table.items():
                result.subscriptions[topic] = subscription.sub_string
        if not result.connections:
            raise AdminError(
                f"consumer group {group!r} has no online consumer"
                f" (asked {', '.join(asked) or 'no broker'})",
                code=ResponseCode.CONSUMER_NOT_ONLINE,
            )
        result.connections.sort(key=lambda c: c.client_id)
        return result

    async def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """GET_CONSUME_STATS from each broker of ``topic`` (of every master when None),
        merged: per queue the broker's and the group's offsets and the lag."""
        brokers = await self._route_brokers(topic) if topic else await self._masters()
        queues: list[QueueProgress] = []
        tps = 0.0
        for name, address in brokers:
            response = await self._broker(
                address,
                RequestCode.GET_CONSUME_STATS,
                GetConsumeStatsRequestHeader(consumer_group=group, topic=topic),
                what=f"reading the consume stats of {group!r} on {name}",
            )
            stats = BrokerConsumeStats.decode(response.body)
            tps += stats.consume_tps
            for queue, entry in stats.offset_table.items():
                queues.append(
                    QueueProgress(
                        queue, entry.broker_offset, entry.consumer_offset, entry.last_timestamp
                    )
                )
        return ConsumeStats(group, topic, sorted(queues, key=lambda q: q.queue), tps)

    # --- messages ------------------------------------------------------------------------

    async def query_message_by_key(
        self,
        topic: str,
        key: str,
        max_num: int = 32,
        begin: int = 0,
        end: int | None = None,
    ) -> list[ReceivedMessage]:
        """QUERY_MESSAGE (the index) on each broker of ``topic``: messages whose KEYS hold
        ``key``, stored between ``begin`` and ``end`` (ms; now when None), oldest first."""
        end = _now_ms() if end is None else end
        header = QueryMessageRequestHeader(
            topic=topic, key=key, max_num=max_num, begin_timestamp=begin, end_timestamp=end
        )
        found = await self._query(topic, header, what=f"querying {topic!r} by key {key!r}")
        found = [m for m in found if key in m.keys]  # the index hashes: drop collisions
        return found[:max_num]

    async def _query(
        self, topic: str, header: QueryMessageRequestHeader, *, what: str
    ) -> list[ReceivedMessage]:
        messages: list[ReceivedMessage] = []
        for name, address in await self._route_brokers(topic):
            response = await self._broker(
                address,
                RequestCode.QUERY_MESSAGE,
                header,
                what=f"{what} on {name}",
                accept=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
            )
            if response.code == ResponseCode.SUCCESS and response.body:
                messages += [
                    ReceivedMessage.of(stored, name)
                    for stored in iter_records(response.body)
                    if stored.topic == topic
                ]
        messages.sort(key=lambda m: (m.store_timestamp, m.commit_log_offset))
        return messages

    async def view_message(self, msg_id: str, topic: str | None = None) -> ReceivedMessage:
        """A message by id: an offset id (32/56 hex: store host + CommitLog offset) is
        read with VIEW_MESSAGE_BY_ID where it was stored; a client id (UNIQ_KEY, what
        send results call msg_id) is looked up in ``topic``'s index."""
        address, offset = _offset_id(msg_id)
        if address is not None:
            try:
                return await self._view(address, offset, msg_id)
            except AdminError:
                if topic is None:
                    raise
                # 32 hex digits may also be a client id: look it up as one
        if topic is None:
            raise AdminError(
                f"{msg_id!r} is not an offset message id; a client message id (UNIQ_KEY)"
                " is looked up in its topic: give the topic too"
            )
        header = QueryMessageRequestHeader(
            topic=topic,
            key=msg_id,
            max_num=32,
            begin_timestamp=0,
            end_timestamp=_FOREVER,
            unique_key_query=True,
        )
        found = await self._query(topic, header, what=f"looking up message {msg_id!r}")
        for message in found:
            if message.msg_id == msg_id:
                return message
        raise AdminError(
            f"no message {msg_id!r} in topic {topic!r}", code=ResponseCode.QUERY_NOT_FOUND
        )

    async def _view(self, address: str, offset: int, msg_id: str) -> ReceivedMessage:
        response = await self._broker(
            address,
            RequestCode.VIEW_MESSAGE_BY_ID,
            ViewMessageRequestHeader(offset=offset),
            what=f"reading message {msg_id}",
        )
        records = list(iter_records(response.body))
        if not records:
            raise AdminError(f"broker {address} returned no message for {msg_id}", address=address)
        summary = await self.cluster_info()
        broker = summary.broker_at(address)
        return ReceivedMessage.of(records[0], broker.broker_name if broker else "")

    async def pull(
        self, queue: MessageQueue, offset: int, *, expression: str = "*", max_nums: int = 32
    ) -> PullResult:
        """PULL_MESSAGE as TOOLS_GROUP, committing nothing: the messages of ``queue`` from
        ``offset``, read without joining any consumer group."""
        await self._queue_address(queue)  # names the topic or broker when either is unknown
        what = f"reading {_queue_name(queue)} at offset {offset}"
        subscription = SubscriptionData.of(queue.topic, expression)
        try:
            await self.instance.topic_route(queue.topic)  # the pull finds the broker there
            return await pull_message(
                self.instance, TOOLS_GROUP, queue, offset, subscription, max_nums=max_nums
            )
        except ResponseError as exc:
            raise AdminError(f"{what} failed: {exc}", code=exc.code) from exc
        except (RemotingError, ConsumerError, OSError) as exc:
            raise AdminError(f"{what} failed: {exc}") from exc

    async def message_at(self, queue: MessageQueue, offset: int) -> ReceivedMessage:
        """The message at ``offset`` of ``queue`` (mqadmin's queryMsgByOffset)."""
        result = await self.pull(queue, offset, max_nums=1)
        if result.messages and result.messages[0].queue_offset == offset:
            return result.messages[0]
        held = (
            f"it holds offsets {result.min_offset} to {result.max_offset - 1}"
            if result.max_offset > result.min_offset
            else "it holds no message"
        )
        raise AdminError(
            f"no message at offset {offset} of {_queue_name(queue)}: {held}",
            code=ResponseCode.QUERY_NOT_FOUND,
        )

    # --- offsets -------------------------------------------------------------------------

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> ResetOffsetResult:
        """Move ``group``'s offsets on ``topic`` to the first message stored at or after
        ``timestamp_ms`` (LATEST: the end). Each broker tells the group's online
        consumers (INVOKE_BROKER_TO_RESET_OFFSET); where the group is offline, the
        offsets are committed directly (mqadmin's resetOffsetByTimeOld). Without
        ``force`` an offset only ever moves back."""
        result = ResetOffsetResult(group, topic, timestamp_ms)
        header = ResetOffsetRequestHeader(
            group=group, topic=topic, timestamp=timestamp_ms, is_force=force
        )
        for name, address in await self._route_masters(topic):
            what = f"resetting the offsets of {group!r} on {topic!r} on {name}"
            try:
                response = await self._broker(
                    address, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header, what=what
                )
            except AdminError as exc:
                if not _group_offline(exc):
                    raise
                result.offsets += await self._reset_offline(
                    name, address, group, topic, timestamp_ms, force
                )
                continue
            offsets = ResetOffsetBody.decode(response.body).offset_table if response.body else {}
            result.offsets += [
                QueueOffset(queue, offset, True) for queue, offset in sorted(offsets.items())
            ]
        return result

    async def _reset_offline(
        self, name: str, address: str, group: str, topic: str, timestamp: int, force: bool
    ) -> list[QueueOffset]:
        what = f"resetting the offsets of {group!r} on {topic!r} on {name}"
        response = await self._broker(
            address,
            RequestCode.GET_CONSUME_STATS,
            GetConsumeStatsRequestHeader(consumer_group=group, topic=topic),
            what=what,
        )
        moved: list[QueueOffset] = []
        table = BrokerConsumeStats.decode(response.body).offset_table
        for queue, entry in sorted(table.items(), key=lambda pair: pair[0]):
            if queue.topic != topic:
                continue
            current = entry.consumer_offset
            if timestamp == LATEST:
                target = await self._offset_at(address, RequestCode.GET_MAX_OFFSET, queue, what)
            else:
                target = await self._search(address, queue, timestamp, "lower", what)
            if not force and target >= current:
                moved.append(QueueOffset(queue, current, False))
                continue
            await self._broker(
                address,
                RequestCode.UPDATE_CONSUMER_OFFSET,
                UpdateConsumerOffsetRequestHeader(
                    consumer_group=group,
                    topic=topic,
                    queue_id=queue.queue_id,
                    commit_offset=target,
                ),
                what=what,
            )
            moved.append(QueueOffset(queue, target, False))
        return moved

    async def _route_masters(self, topic: str) -> list[tuple[str, str]]:
        route = await self.topic_route(topic)
        masters = [
            (b.broker_name, b.master_addr)
            for b in sorted(route.broker_datas, key=lambda b: b.broker_name)
            if b.master_addr
        ]
        if not masters:
            raise AdminError(f"topic {topic!r} has no broker master to change offsets on")
        return masters

    async def _queue_address(self, queue: MessageQueue) -> str:
        for name, address in await self._route_brokers(queue.topic):
            if name == queue.broker_name:
                return address
        raise AdminError(f"broker {queue.broker_name!r} does not serve topic {queue.topic!r}")

    async def search_offset(
        self, queue: MessageQueue, timestamp: int, *, boundary: str = "lower"
    ) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the offset of the first message stored at or after
        ``timestamp`` (``boundary="upper"``: the last one at or before it)."""
        address = await self._queue_address(queue)
        return await self._search(address, queue, timestamp, boundary, "searching an offset")

    async def _search(
        self, address: str, queue: MessageQueue, timestamp: int, boundary: str, what: str
    ) -> int:
        response = await self._broker(
            address,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            SearchOffsetRequestHeader(
                topic=queue.topic,
                queue_id=queue.queue_id,
                timestamp=timestamp,
                boundary_type=boundary,
            ),
            what=f"{what} in {_queue_name(queue)}",
        )
        return OffsetResponseHeader.from_ext_fields(response.ext_fields or {}).offset

    async def max_offset(self, queue: MessageQueue) -> int:
        """GET_MAX_OFFSET: the offset the next message of ``queue`` will get."""
        address = await self._queue_address(queue)
        return await self._offset_at(address, RequestCode.GET_MAX_OFFSET, queue, "max offset")

    async def min_offset(self, queue: MessageQueue) -> int:
        """GET_MIN_OFFSET: the offset of the oldest message ``queue`` still holds."""
        address = await self._queue_address(queue)
        return await self._offset_at(address, RequestCode.GET_MIN_OFFSET, queue, "min offset")

    async def _offset_at(self, address: str, code: int, queue: MessageQueue, what: str) -> int:
        header: Header
        if code == RequestCode.GET_MAX_OFFSET:
            header = GetMaxOffsetRequestHeader(topic=queue.topic, queue_id=queue.queue_id)
        else:
            header = GetMinOffsetRequestHeader(topic=queue.topic, queue_id=queue.queue_id)
        response = await self._broker(
            address, code, header, what=f"reading the {what} of {_queue_name(queue)}"
        )
        return OffsetResponseHeader.from_ext_fields(response.ext_fields or {}).offset

    # --- name-server KV config -----------------------------------------------------------

    async def put_kv(self, namespace: str, key: str, value: str) -> None:
        await self._every_namesrv(
            RequestCode.PUT_KV_CONFIG,
            PutKVConfigRequestHeader(namespace=namespace, key=key, value=value),
            what=f"putting {namespace}/{key}",
        )

    async def get_kv(self, namespace: str, key: str) -> str | None:
        """The value, None when the name server has no such item."""
        response = await self._namesrv(
            RequestCode.GET_KV_CONFIG,
            KVConfigKeyRequestHeader(namespace=namespace, key=key),
            what=f"reading {namespace}/{key}",
            accept=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if response.code != ResponseCode.SUCCESS:
            return None
        return GetKVConfigResponseHeader.from_ext_fields(response.ext_fields or {}).value

    async def delete_kv(self, namespace: str, key: str) -> None:
        await self._every_namesrv(
            RequestCode.DELETE_KV_CONFIG,
            KVConfigKeyRequestHeader(namespace=namespace, key=key),
            what=f"deleting {namespace}/{key}",
        )

    async def kv_list(self, namespace: str) -> dict[str, str]:
        """Every item of ``namespace`` (empty when there is none)."""
        response = await self._namesrv(
            RequestCode.GET_KVLIST_BY_NAMESPACE,
            GetKVListByNamespaceRequestHeader(namespace=namespace),
            what=f"listing namespace {namespace}",
            accept=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if response.code != ResponseCode.SUCCESS or not response.body:
            return {}
        return dict(sorted(KVTable.decode(response.body).table.items()))

    # --- broker members, configuration, producers, traffic ------------------------------

    async def broker_members(
        self, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[tuple[str, str]]:
        """(broker name, address) of every member, master and slaves, of ``cluster`` (the
        only cluster when None), or of the one broker at ``broker_addr``."""
        if broker_addr is not None:
            return await self._targets(None, broker_addr, what="reading a broker")
        summary = await self.cluster_info()
        if cluster is None:
            if len(summary.clusters) != 1:
                known = ", ".join(summary.clusters) or "none registered"
                raise AdminError(f"name a cluster or a broker address (clusters: {known})")
            cluster = next(iter(summary.clusters))
        if cluster not in summary.clusters:
            known = ", ".join(summary.clusters) or "none"
            raise AdminError(
                f"cluster {cluster!r} is not known to the name server (known: {known})"
            )
        members = []
        for name in summary.clusters[cluster]:
            broker = summary.brokers.get(name)
            for _, address in sorted(broker.addresses.items() if broker else ()):
                members.append((name, address))
        return members

    async def broker_config(self, address: str) -> dict[str, str]:
        """GET_BROKER_CONFIG: the broker's effective settings, sorted by key."""
        response = await self._broker(
            address, RequestCode.GET_BROKER_CONFIG, what="reading the broker config"
        )
        return dict(sorted(parse_properties(bytes(response.body or b"").decode()).items()))

    async def update_broker_config(self, address: str, values: Mapping[str, str]) -> None:
        """UPDATE_BROKER_CONFIG: ``values`` applied to the running broker, all or none;
        the broker refuses an unknown key, a bad value or a key read at startup only."""
        for key, value in values.items():
            if any(c in key or c in value for c in "\r\n") or not key.strip():
                raise AdminError(f"broker config {key!r}={value!r}: no line breaks, no empty key")
        await self._broker(
            address,
            RequestCode.UPDATE_BROKER_CONFIG,
            None,
            format_properties(values).encode(),
            what=f"updating broker config {', '.join(values)}",
        )

    async def group_config(self, address: str, group: str) -> GroupConfig | None:
        """The subscription group ``group`` as the broker at ``address`` holds it; None
        when it has none (GET_SUBSCRIPTIONGROUP_CONFIG, else the whole table)."""
        response = await self._broker(
            address,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
            GetSubscriptionGroupConfigRequestHeader(group=group),
            what=f"reading subscription group {group!r}",
            accept=(
                ResponseCode.SUCCESS,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            ),
        )
        if response.code == ResponseCode.SUCCESS:
            return GroupConfig.decode(response.body)
        if response.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
            return None
        # a 4.x broker predates the one-group request: read the table
        response = await self._broker(
            address,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
            what=f"reading subscription group {group!r}",
        )
        table = SubscriptionGroupWrapper.decode(response.body).subscription_group_table
        return table.get(group)

    async def configure_group(
        self,
        group: str,
        changes: Mapping[str, Any],
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
    ) -> dict[str, GroupConfig]:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on every master of ``cluster`` (or on one
        broker): ``changes`` (GroupConfig field names) applied to what each broker holds,
        the defaults for a new group. Returns the config written, by broker address."""
        what = f"updating subscription group {group!r}"
        written: dict[str, GroupConfig] = {}
        for name, address in await self._targets(cluster, broker_addr, what=what):
            current = await self.group_config(address, group) or GroupConfig(group)
            config = dataclasses.replace(current, **changes)
            await self._broker(
                address,
                RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                None,
                config.encode(),
                what=f"{what} on {name}",
            )
            written[address] = config
        return written

    async def producer_connections(self, group: str, topic: str) -> ProducerConnections:
        """GET_PRODUCER_CONNECTION_LIST from every broker of ``topic``, merged by client
        id; AdminError when no broker has a producer of ``group``."""
        result = ProducerConnections(group, topic)
        seen: set[str] = set()
        answers: list[str] = []
        for name, address in await self._route_brokers(topic):
            response = await self._broker(
                address,
                RequestCode.GET_PRODUCER_CONNECTION_LIST,
                GetProducerConnectionListRequestHeader(producer_group=group),
                what=f"reading the producers of {group!r} on {name}",
                accept=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR),
            )
            if response.code != ResponseCode.SUCCESS:  # the group has no producer there
                answers.append(f"{name}: {response.remark or 'none'}")
                continue
            for connection in ProducerConnection.decode(response.body).connection_set:
                if connection.client_id not in seen:
                    seen.add(connection.client_id)
                    result.connections.append(connection)
        if not result.connections:
            raise AdminError(
                f"producer group {group!r} has no online producer on the brokers of"
                f" {topic!r} ({'; '.join(answers) or 'no broker'})"
            )
        result.connections.sort(key=lambda c: c.client_id)
        return result

    async def topic_consumers(self, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO on every broker of ``topic``: the groups that
        subscribe to it or have committed offsets on it."""
        groups: set[str] = set()
        for name, address in await self._route_brokers(topic):
            response = await self._broker(
                address,
                RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                TopicRequestHeader(topic=topic),
                what=f"reading the consumer groups of {topic!r} on {name}",
            )
            groups.update(GroupList.decode(response.body).group_list)
        return sorted(groups)

    async def traffic_sample(self, topic: str) -> TrafficSample:
        """What ``topic``'s brokers hold now: messages put, and each consumer group's
        committed offsets and lag (GET_TOPIC_STATS_INFO, GET_CONSUME_STATS)."""
        stats = await self.topic_stats(topic)
        sample = TrafficSample(topic, time.monotonic(), sum(q.max_offset for q in stats.queues))
        for group in await self.topic_consumers(topic):
            progress = await self.consume_stats(group, topic)
            sample.consumed[group] = progress.consumer_offset_total
            sample.lag[group] = progress.total_lag
        return sample

    async def stats_all(
        self, topic: str | None = None, *, interval: float = 1.0
    ) -> list[TopicTraffic]:
        """``statsAll``: per topic (every routed one but retry and DLQ topics, else
        ``topic``) and consumer group, the lag and the rates of messages put (in) and of
        offsets committed (out), measured over ``interval`` seconds (0: no rates)."""
        if topic is not None:
            topics = [topic]
        else:
            topics = [t for t in await self.list_topics() if not t.startswith(_NOT_STATS)]
        before: dict[str, TrafficSample] = {}
        for name in topics:
            try:
                before[name] = await self.traffic_sample(name)
            except AdminError as exc:
                # a topic deleted meanwhile, or one no broker serves, has no stats
                if topic is not None or exc.code != ResponseCode.TOPIC_NOT_EXIST:
                    raise
        after: dict[str, TrafficSample] = {}
        if interval > 0:
            await anyio.sleep(interval)
            for name in before:
                after[name] = await self.traffic_sample(name)
        rows: list[TopicTraffic] = []
        for name, sample in before.items():
            rows += traffic_between(sample, after.get(name))
        return rows


# --- helpers ---------------------------------------------------------------------------------


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _queue_name(queue: MessageQueue) -> str:
    return f"{queue.topic}@{queue.broker_name}#{queue.queue_id}"


def _offset_id(msg_id: str) -> tuple[str | None, int]:
    """(store address, CommitLog offset) if ``msg_id`` can be an offset message id.

    A client id is also 32 hex digits; where an offset id holds a port (0-65535) it
    holds the producer's pid and salt, which almost never look like a port."""
    try:
        host, offset = decode_offset_msg_id(msg_id)
    except ValueError:
        return None, 0
    _ip, port = unpack_host(host)
    if not 0 < port < 65536 or offset < 0:
        return None, 0
    return host_address(host), offset


def _group_offline(exc: AdminError) -> bool:
    """A broker's way of saying the group has no online consumer to tell (Java answers
    CONSUMER_NOT_ONLINE; older brokers SYSTEM_ERROR with the same remark)."""
    if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:
        return True
    return exc.code == ResponseCode.SYSTEM_ERROR and "not online" in str(exc)
