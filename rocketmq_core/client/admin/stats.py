"""Admin requests on consumption and traffic: each group's progress (GET_CONSUME_STATS),
which groups consume a topic (QUERY_TOPIC_CONSUME_BY_WHO), a broker's statistics
(VIEW_BROKER_STATS_DATA) and mqadmin's statsAll built from them."""

from __future__ import annotations

from ...protocol.bodies import BrokerStatsData, GroupList
from ...protocol.bodies import ConsumeStats as BrokerConsumeStats
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.constants import GROUP_GET_NUMS, MASTER_ID, TOPIC_PUT_NUMS
from ...protocol.headers import (
    GetConsumeStatsRequestHeader,
    TopicRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from ..admin_types import AdminError, ConsumeStats, QueueProgress, TopicTraffic
from .topics import TopicAdmin

_NOT_STATS = ("%RETRY%", "%DLQ%")  # statsAll skips retry and dead-letter topics


class StatsAdmin(TopicAdmin):
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

    async def broker_stats_data(
        self, address: str, stats_name: str, stats_key: str
    ) -> BrokerStatsData | None:
        """VIEW_BROKER_STATS_DATA: statistic ``stats_name`` (TOPIC_PUT_NUMS...) of
        ``stats_key`` on one broker over the last minute, hour and day; None when the
        broker has no such item (nothing counted, or not sampled yet: its "not exist")."""
        try:
            response = await self._broker(
                address,
                RequestCode.VIEW_BROKER_STATS_DATA,
                ViewBrokerStatsDataRequestHeader(stats_name=stats_name, stats_key=stats_key),
                what=f"reading the stats {stats_name} {stats_key!r}",
            )
        except AdminError as exc:
            if exc.code == ResponseCode.SYSTEM_ERROR and "not exist" in str(exc):
                return None
            raise
        return BrokerStatsData.decode(response.body)

    async def stats_all(self, topic: str | None = None) -> list[TopicTraffic]:
        """``statsAll``: per topic (every routed one but retry and DLQ topics, else
        ``topic``) and consumer group, what the topic's masters counted: messages put and
        pulled a second over the last minute and in the last 24 hours, and the lag."""
        if topic is not None:
            topics = [topic]
        else:
            topics = [t for t in await self.list_topics() if not t.startswith(_NOT_STATS)]
        rows: list[TopicTraffic] = []
        for name in topics:
            try:
                rows += await self._topic_traffic(name)
            except AdminError as exc:
                # a topic deleted meanwhile, or one no broker serves, has no stats
                if topic is not None or exc.code != ResponseCode.TOPIC_NOT_EXIST:
                    raise
        return rows

    async def _topic_traffic(self, topic: str) -> list[TopicTraffic]:
        route = await self.topic_route(topic)
        masters = [
            data.broker_addrs[MASTER_ID]
            for data in sorted(route.broker_datas, key=lambda b: b.broker_name)
            if data.broker_addrs.get(MASTER_ID)
        ]
        in_tps, in_24h = await self._traffic(masters, TOPIC_PUT_NUMS, topic)
        groups = await self.topic_consumers(topic)
        if not groups:
            return [TopicTraffic(topic, None, 0, in_tps, None, in_24h, None)]
        rows = []
        for group in groups:
            out_tps, out_24h = await self._traffic(masters, GROUP_GET_NUMS, f"{topic}@{group}")
            lag = (await self.consume_stats(group, topic)).total_lag
            rows.append(TopicTraffic(topic, group, max(0, lag), in_tps, out_tps, in_24h, out_24h))
        return rows

    async def _traffic(self, masters: list[str], stats_name: str, key: str) -> tuple[float, int]:
        """Per second over the last minute and in the last 24 hours, summed over
        ``masters``; an item a broker does not have counts 0."""
        tps, last_24h = 0.0, 0
        for address in masters:
            data = await self.broker_stats_data(address, stats_name, key)
            if data is not None:
                tps += data.stats_minute.tps
                last_24h += messages_in_24_hours(data)
        return tps, last_24h


def messages_in_24_hours(data: BrokerStatsData) -> int:
    """The day's sum; while that is 0 (the day window not sampled yet), the hour's, else
    the minute's, as mqadmin statsAll counts."""
    for window in (data.stats_day, data.stats_hour, data.stats_minute):
        if window.sum != 0:
            return window.sum
    return 0
