"""Admin requests on topics: create, change, delete, list and per-queue stats; an
orderly topic's layout is kept in the name servers' KV config."""

from __future__ import annotations

import logging

import anyio

from ...protocol.bodies import TopicList, TopicStatsTable
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.constants import ORDER_TOPIC_CONFIG_NAMESPACE, PERM_RW
from ...protocol.headers import (
    CreateTopicRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    TopicRequestHeader,
)
from ...protocol.topic_validation import is_system_topic
from ..admin_types import AdminError, QueueStats, TopicExistsError, TopicStats
from .kv import KVConfigAdmin

log = logging.getLogger("rocketmq.client.admin")


class TopicAdmin(KVConfigAdmin):
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
