"""Queue allocation for rebalance: which of a topic's queues this consumer pulls (ROUTE.md §7).

Every consumer of a group runs the same strategy on the same inputs and takes its own
share, so the strategies must agree without talking: each one sorts its inputs itself
(queues by topic, broker name and queue id; client ids as strings), and the shares match
the Java client's exactly, so Python and Java consumers can share a group.

A strategy is called as ``strategy(group, current_client_id, queues, client_ids)`` and
returns the queues ``current_client_id`` owns, or ``[]`` when that client is not among
``client_ids`` (the broker does not know it yet). An empty current id, no queues or no
consumers is a ValueError, as Java's IllegalArgumentException.

``averagely``, ``averagely_by_circle`` and ``consistent_hash`` are ready-made instances
(registered by name by ``rocketmq_core.builtin.allocation``); ``ByConfig``,
``ByMachineRoom``, ``MachineRoomNearby`` and a ``ConsistentHash`` with other settings are
built with their settings and handed to a consumer as objects.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, runtime_checkable

from ..protocol.heartbeat import MessageQueue

__all__ = [
    "AllocationStrategy",
    "Averagely",
    "AveragelyByCircle",
    "ByConfig",
    "ByMachineRoom",
    "ConsistentHash",
    "MachineRoomNearby",
    "MachineRoomResolver",
    "averagely",
    "averagely_by_circle",
    "consistent_hash",
    "md5_hash",
    "queue_key",
]


@runtime_checkable
class AllocationStrategy(Protocol):
    """What ``rocketmq_register_allocation_strategies`` registers and a consumer calls."""

    name: str

    def __call__(
        self,
        group: str,
        current_client_id: str,
        queues: Sequence[MessageQueue],
        client_ids: Sequence[str],
    ) -> list[MessageQueue]: ...


def _sorted_client_ids(current_client_id: str, client_ids: Sequence[str]) -> list[str]:
    if not current_client_id:
        raise ValueError("current_client_id is empty")
    if isinstance(client_ids, str):
        raise ValueError(f"client_ids must be a sequence of ids, not the string {client_ids!r}")
    if not client_ids:
        raise ValueError("client_ids is empty: a group being rebalanced has consumers")
    ordered = sorted(client_ids)
    _refuse_duplicates(ordered, "client id")
    return ordered


def _sorted_queues(queues: Sequence[MessageQueue]) -> list[MessageQueue]:
    if not queues:
        raise ValueError("queues is empty: there is nothing to allocate")
    ordered = sorted(queues)  # MessageQueue orders by (topic, broker_name, queue_id)
    _refuse_duplicates(ordered, "queue")
    return ordered


def _refuse_duplicates(ordered: list[str] | list[MessageQueue], what: str) -> None:
    for previous, item in itertools.pairwise(ordered):
        if previous == item:
            raise ValueError(f"{what} {item!r} appears more than once")


class _SortedStrategy:
    """Validates and sorts the inputs, then hands them to ``allocate``."""

    name: str

    def __call__(
        self,
        group: str,
        current_client_id: str,
        queues: Sequence[MessageQueue],
        client_ids: Sequence[str],
    ) -> list[MessageQueue]:
        ordered_ids = _sorted_client_ids(current_client_id, client_ids)
        ordered_queues = _sorted_queues(queues)
        if current_client_id not in ordered_ids:
            return []
        return self.allocate(
            group, ordered_queues, ordered_ids, ordered_ids.index(current_client_id)
        )

    def allocate(
        self, group: str, queues: list[MessageQueue], client_ids: list[str], index: int
    ) -> list[MessageQueue]:
        """The share of ``client_ids[index]``; both lists are sorted and non-empty."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<allocation strategy {self.name!r}>"


class Averagely(_SortedStrategy):
    """Contiguous blocks; the first ``M % N`` consumers get one queue more (Java's default)."""

    name = "averagely"

    def allocate(
        self, group: str, queues: list[MessageQueue], client_ids: list[str], index: int
    ) -> list[MessageQueue]:
        count, consumers = len(queues), len(client_ids)
        remainder = count % consumers
        if count <= consumers:
            size = 1
        elif index < remainder:
            size = count // consumers + 1
        else:
            size = count // consumers
        start = index * size if index < remainder else index * size + remainder
        return queues[start : start + size]  # past the end: the slice is short or empty


class AveragelyByCircle(_SortedStrategy):
    """Dealt like cards: consumer ``i`` gets queues ``i, i+N, i+2N, ...``."""

    name = "averagely_by_circle"

    def allocate(
        self, group: str, queues: list[MessageQueue], client_ids: list[str], index: int
    ) -> list[MessageQueue]:
        return queues[index :: len(client_ids)]


class ByConfig:
    """A fixed, configured list of queues, whatever the route and the group say."""

    name = "config"

    def __init__(self, queues: Iterable[MessageQueue]) -> None:
        self.queues = tuple(queues)

    def __call__(
        self,
        group: str,
        current_client_id: str,
        queues: Sequence[MessageQueue],
        client_ids: Sequence[str],
    ) -> list[MessageQueue]:
        ordered_ids = _sorted_client_ids(current_client_id, client_ids)
        if current_client_id not in ordered_ids:
            return []
        return list(self.queues)

    def __repr__(self) -> str:
        return f"ByConfig({list(self.queues)!r})"


def _machine_room(broker_name: str) -> str | None:
    """``idc`` of a broker named ``<idc>@<name>``, else None."""
    parts = broker_name.split("@")
    # Java's String.split drops trailing empty parts: "hz@a@" still counts as two.
    while parts and not parts[-1]:
        parts.pop()
    return parts[0] if len(parts) == 2 else None


class ByMachineRoom(_SortedStrategy):
    """Only queues of brokers named ``<idc>@<name>`` with ``idc`` among ``consumer_rooms``,
    shared out in blocks; the remainder goes one each to the first consumers."""

    name = "machine_room"

    def __init__(self, consumer_rooms: Iterable[str]) -> None:
        if isinstance(consumer_rooms, str):
            consumer_rooms = [consumer_rooms]
        self.consumer_rooms = frozenset(consumer_rooms)
        if not self.consumer_rooms:
            raise ValueError("ByMachineRoom needs at least one consumer machine room")

    def allocate(
        self, group: str, queues: list[MessageQueue], client_ids: list[str], index: int
    ) -> list[MessageQueue]:
        eligible = [
            queue for queue in queues if _machine_room(queue.broker_name) in self.consumer_rooms
        ]
        consumers = len(client_ids)
        per_consumer, remainder = divmod(len(eligible), consumers)
        start = index * per_consumer
        share = eligible[start : start + per_consumer]
        if index < remainder:
            share.append(eligible[per_consumer * consumers + index])
        return share

    def __repr__(self) -> str:
        return f"ByMachineRoom({sorted(self.consumer_rooms)!r})"


def md5_hash(key: str) -> int:
    """The first 4 bytes of MD5(UTF-8 ``key``) as an unsigned big-endian number."""
    digest = hashlib.md5(key.encode(), usedforsecurity=False).digest()
    return int.from_bytes(digest[:4], "big")


def queue_key(queue: MessageQueue) -> str:
    """What a queue is hashed by: Java's ``MessageQueue.toString()``."""
    return (
        f"MessageQueue [topic={queue.topic}, brokerName={queue.broker_name},"
        f" queueId={queue.queue_id}]"
    )


class ConsistentHash(_SortedStrategy):
    """A hash ring of ``virtual_nodes`` points per consumer; a queue belongs to the first
    point at or after its hash, wrapping round to the smallest."""

    name = "consistent_hash"

    def __init__(
        self, virtual_nodes: int = 10, hash_function: Callable[[str], int] = md5_hash
    ) -> None:
        if virtual_nodes < 1:
            raise ValueError(f"virtual_nodes must be at least 1, not {virtual_nodes}")
        self.virtual_nodes = virtual_nodes
        self.hash_function = hash_function

    def allocate(
        self, group: str, queues: list[MessageQueue], client_ids: list[str], index: int
    ) -> list[MessageQueue]:
        ring: dict[int, str] = {}
        for client_id in client_ids:
            for k in range(self.virtual_nodes):
                # On equal hashes the later node takes the point, as Java's TreeMap.put does.
                ring[self.hash_function(f"{client_id}-{k}")] = client_id
        points = sorted(ring)
        current_client_id = client_ids[index]
        share = []
        for queue in queues:
            at = bisect.bisect_left(points, self.hash_function(queue_key(queue)))
            if ring[points[at % len(points)]] == current_client_id:
                share.append(queue)
        return share

    def __repr__(self) -> str:
        return f"ConsistentHash(virtual_nodes={self.virtual_nodes})"


class MachineRoomResolver(Protocol):
    """Where brokers and consumers run; an empty room is an error."""

    def broker_room(self, queue: MessageQueue) -> str: ...

    def client_room(self, client_id: str) -> str: ...


class MachineRoomNearby(_SortedStrategy):
    """Consumers take the queues of their own machine room with ``inner``; the queues of a
    room with no consumer are shared by all consumers, also with ``inner``."""

    def __init__(self, inner: AllocationStrategy, resolver: MachineRoomResolver) -> None:
        self.inner = inner
        self.resolver = resolver
        self.name = f"machine_room_nearby-{inner.name}"

    def allocate(
        self, group: str, queues: list[MessageQueue], client_ids: list[str], index: int
    ) -> list[MessageQueue]:
        queues_by_room: dict[str, list[MessageQueue]] = defaultdict(list)
        for queue in queues:
            queues_by_room[self._room(self.resolver.broker_room(queue), queue)].append(queue)
        clients_by_room: dict[str, list[str]] = defaultdict(list)
        for client_id in client_ids:
            clients_by_room[self._room(self.resolver.client_room(client_id), client_id)].append(
                client_id
            )
        current_client_id = client_ids[index]
        own_room = self.resolver.client_room(current_client_id)
        share = []
        if own_room in queues_by_room:
            share += self.inner(
                group, current_client_id, queues_by_room[own_room], clients_by_room[own_room]
            )
        for room in sorted(queues_by_room):
            if room not in clients_by_room:
                share += self.inner(group, current_client_id, queues_by_room[room], client_ids)
        return share

    @staticmethod
    def _room(room: str, of: object) -> str:
        if not room:
            raise ValueError(f"the machine room resolver gave no room for {of!r}")
        return room

    def __repr__(self) -> str:
        return f"MachineRoomNearby({self.inner!r}, {self.resolver!r})"


averagely = Averagely()
averagely_by_circle = AveragelyByCircle()
consistent_hash = ConsistentHash()
