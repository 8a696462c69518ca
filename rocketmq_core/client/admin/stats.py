"""Admin requests on consumption: each group's progress (GET_CONSUME_STATS), which
groups consume a topic (QUERY_TOPIC_CONSUME_BY_WHO) and mqadmin's statsAll rates."""

from __future__ import annotations

import time

import anyio

from ...protocol.bodies import ConsumeStats as BrokerConsumeStats
from ...protocol.bodies import GroupList
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.headers import GetConsumeStatsRequestHeader, TopicRequestHeader
from ..admin_types import (
    AdminError,
    ConsumeStats,
    QueueProgress,
    TopicTraffic,
    TrafficSample,
    traffic_between,
)
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
