"""Who is connected: consumer groups and producer groups, from heartbeats (CODES.md §4.3).

Sans-IO: a client's connection is an opaque ``channel`` token and times are passed in
(ms). Methods report what changed; the broker sends NOTIFY_CONSUMER_IDS_CHANGED to a
group's members when its membership or subscriptions change (clustering groups only).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from ..protocol.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)

Channel = Hashable


@dataclass(slots=True)
class ClientChannel:
    client_id: str
    last_update: float
    language: str = "JAVA"
    version: int = 0


@dataclass(slots=True)
class ConsumerGroup:
    name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    channels: dict[Channel, ClientChannel] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return [client.client_id for client in self.channels.values()]

    @property
    def notifies(self) -> bool:
        """Members learn of changes (rebalance) only in clustering mode."""
        return self.message_model == MessageModel.CLUSTERING


class ConsumerManager:
    def __init__(self) -> None:
        self.groups: dict[str, ConsumerGroup] = {}

    def register(
        self,
        data: ConsumerData,
        channel: Channel,
        client_id: str,
        now: float,
        *,
        language: str = "JAVA",
        version: int = 0,
    ) -> bool:
        """A heartbeat's consumer entry; True when members or subscriptions changed."""
        group = self.groups.get(data.group_name)
        if group is None:
            group = self.groups[data.group_name] = ConsumerGroup(data.group_name)
        group.consume_type = data.consume_type
        group.message_model = data.message_model
        group.consume_from_where = data.consume_from_where
        existing = group.channels.get(channel)
        changed = existing is None or existing.client_id != client_id
        group.channels[channel] = ClientChannel(client_id, now, language, version)
        changed |= self._update_subscriptions(group, data.subscriptions)
        return changed

    def _update_subscriptions(
        self, group: ConsumerGroup, subscriptions: list[SubscriptionData]
    ) -> bool:
        # as Java: only topics coming or going change membership; a newer filter for a
        # topic is taken quietly (rebalancing does not depend on it)
        changed = False
        wanted = {subscription.topic: subscription for subscription in subscriptions}
        for topic, subscription in wanted.items():
            current = group.subscriptions.get(topic)
            if current is None:
                changed = True
            if current is None or subscription.sub_version >= current.sub_version:
                group.subscriptions[topic] = subscription
        for topic in [topic for topic in group.subscriptions if topic not in wanted]:
            del group.subscriptions[topic]
            changed = True
        return changed

    def unregister(self, group_name: str, channel: Channel) -> bool:
        """UNREGISTER_CLIENT; True when the group lost a member."""
        group = self.groups.get(group_name)
        if group is None or group.channels.pop(channel, None) is None:
            return False
        if not group.channels:
            del self.groups[group_name]
        return True

    def channel_closed(self, channel: Channel) -> list[str]:
        """A connection closed: the groups that lost a member."""
        return [name for name in list(self.groups) if self.unregister(name, channel)]

    def expire(self, now: float, timeout: float) -> list[tuple[str, Channel]]:
        """Drop members silent for longer than ``timeout`` ms (channelExpiredTimeout)."""
        expired = [
            (name, channel)
            for name, group in self.groups.items()
            for channel, client in group.channels.items()
            if now - client.last_update > timeout
        ]
        for name, channel in expired:
            self.unregister(name, channel)
        return expired

    def group(self, name: str) -> ConsumerGroup | None:
        return self.groups.get(name)

    def subscription(self, group_name: str, topic: str) -> SubscriptionData | None:
        group = self.groups.get(group_name)
        return group.subscriptions.get(topic) if group is not None else None

    def groups_of_topic(self, topic: str) -> list[str]:
        return [name for name, group in self.groups.items() if topic in group.subscriptions]


class ProducerManager:
    """Producer groups and their connections (transaction check-backs ask one of them)."""

    def __init__(self) -> None:
        self.groups: dict[str, dict[Channel, ClientChannel]] = {}

    def register(
        self,
        group_name: str,
        channel: Channel,
        client_id: str,
        now: float,
        *,
        language: str = "JAVA",
        version: int = 0,
    ) -> None:
        channels = self.groups.setdefault(group_name, {})
        channels[channel] = ClientChannel(client_id, now, language, version)

    def unregister(self, group_name: str, channel: Channel) -> None:
        channels = self.groups.get(group_name)
        if channels is not None and channels.pop(channel, None) is not None and not channels:
            del self.groups[group_name]

    def channel_closed(self, channel: Channel) -> None:
        for name in list(self.groups):
            self.unregister(name, channel)

    def expire(self, now: float, timeout: float) -> list[tuple[str, Channel]]:
        expired = [
            (name, channel)
            for name, channels in self.groups.items()
            for channel, client in channels.items()
            if now - client.last_update > timeout
        ]
        for name, channel in expired:
            self.unregister(name, channel)
        return expired

    def group(self, group_name: str) -> dict[Channel, ClientChannel] | None:
        """The group's connections (GET_PRODUCER_CONNECTION_LIST), None if it has none."""
        return self.groups.get(group_name)

    def any_channel(self, group_name: str, turn: int = 0) -> Channel | None:
        """A connection of the group, if any: the member whose ``turn`` it is, in the
        order they joined. A check-back passes its check count, so each round asks a
        transaction's group the next member: one that cannot answer (a producer that
        sends no transactions) is not asked every time."""
        channels = self.groups.get(group_name)
        if not channels:
            return None
        members = list(channels)
        return members[turn % len(members)]
