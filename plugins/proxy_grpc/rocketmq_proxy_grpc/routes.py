"""Topic routes as 5.x clients see them: every queue behind the proxy's own endpoints,
and the queue a FIFO message group is sent to (GRPC.md §4, §5)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from rocketmq_core.protocol.bodies import TopicRouteData
from rocketmq_core.protocol.constants import MASTER_ID, Perm
from rocketmq_core.protocol.message import java_string_hash

from .v2 import definition_pb2 as pb

# no topic attribute says otherwise: a topic takes every kind (a MIXED topic)
ALL_MESSAGE_TYPES = (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION)


@dataclass(frozen=True, slots=True)
class WriteQueue:
    broker_name: str
    queue_id: int


def endpoints_of(host: str, port: int) -> pb.Endpoints:
    """``host:port`` as Endpoints, with the scheme a client expects for that host."""
    try:
        version = ipaddress.ip_address(host).version
    except ValueError:
        scheme = pb.DOMAIN_NAME
    else:
        scheme = pb.IPv4 if version == 4 else pb.IPv6
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port)])


def _permission(readable: bool, writable: bool) -> pb.Permission:
    if readable and writable:
        return pb.READ_WRITE
    if readable:
        return pb.READ
    if writable:
        return pb.WRITE
    return pb.NONE


def message_queues(
    topic: pb.Resource, route: TopicRouteData, endpoints: pb.Endpoints
) -> list[pb.MessageQueue]:
    """The queues of each master: ``min(read, write)`` read-write, the surplus read- or
    write-only, numbered from 0 in the order read, write, read-write."""
    masters = {b.broker_name for b in route.broker_datas if MASTER_ID in b.broker_addrs}
    queues: list[pb.MessageQueue] = []
    for data in sorted(route.queue_datas, key=lambda d: d.broker_name):
        if data.broker_name not in masters:
            continue
        broker = pb.Broker(name=data.broker_name, id=MASTER_ID, endpoints=endpoints)
        readable = bool(data.perm & Perm.READ)
        writable = bool(data.perm & Perm.WRITE)
        both = min(data.read_queue_nums, data.write_queue_nums)
        runs = (
            (_permission(readable, False), max(0, data.read_queue_nums - both)),
            (_permission(False, writable), max(0, data.write_queue_nums - both)),
            (_permission(readable, writable), both),
        )
        queue_id = 0
        for permission, count in runs:
            for _ in range(count):
                queues.append(
                    pb.MessageQueue(
                        topic=topic,
                        id=queue_id,
                        permission=permission,
                        broker=broker,
                        accept_message_types=ALL_MESSAGE_TYPES,
                    )
                )
                queue_id += 1
    return queues


def write_queues(route: TopicRouteData) -> list[WriteQueue]:
    """The queues a send may go to, in a stable order (broker name, queue id)."""
    masters = {b.broker_name for b in route.broker_datas if MASTER_ID in b.broker_addrs}
    return [
        WriteQueue(data.broker_name, queue_id)
        for data in sorted(route.queue_datas, key=lambda d: d.broker_name)
        if data.broker_name in masters and data.perm & Perm.WRITE
        for queue_id in range(data.write_queue_nums)
    ]


def consistent_bucket(key: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash``: the bucket of ``key`` among ``buckets``, which
    moves few keys when the count changes (what RocketMQ's proxy uses for FIFO groups)."""
    state = key & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        # the top 31 bits as a Java int, plus one, over 2**31: a double in (0, 1]
        fraction = ((state >> 33) + 1) / float(1 << 31)
        following = int((candidate + 1) / fraction)
        if 0 <= following < buckets:
            candidate = following
        else:
            return candidate


def queue_for_group(queues: list[WriteQueue], message_group: str) -> WriteQueue:
    """The one queue every message of ``message_group`` goes to."""
    return queues[consistent_bucket(java_string_hash(message_group), len(queues))]
