"""Our SDK and the official C++ client (rocketmq==0.4.4) on one cluster, both ways.

What one client writes the other must read unchanged: body, tags, keys, user
properties and the message id (the producer's UNIQ_KEY), compressed bodies included,
and an orderly send keeps the messages of one order in one queue, in order.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import defaultdict
from dataclasses import dataclass

import anyio
import pytest

from rocketmq_core.client.admin import Admin
from rocketmq_core.client.admin_types import AdminError
from rocketmq_core.client.message import Message, ReceivedMessage
from rocketmq_core.client.producer import Producer
from rocketmq_core.client.push import PushConsumer
from rocketmq_core.client.selectors import select_by_hash
from rocketmq_core.protocol.codes import ResponseCode
from rocketmq_core.protocol.heartbeat import MessageQueue
from rocketmq_core.protocol.message import COMPRESSED
from rocketmq_core.testing.cluster import EmbeddedCluster
from tests.cpp_client import load_cpp_client

from .cpp import CollectingConsumer, producer

pytestmark = pytest.mark.anyio

COUNT = 20
# the user properties each message carries (one value has a space and is not ASCII)
PROPERTY_NAMES = ("seq", "origin", "note")
# the C++ client compresses bodies from 4096 bytes on, our producer too (compress_over)
LARGE = 4096

_runs = itertools.count()


@pytest.fixture(scope="module")
def client():
    return load_cpp_client()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, client):
    with EmbeddedCluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


def fresh_topic(cluster: EmbeddedCluster, name: str) -> str:
    """A topic (and group suffix) of its own for each run: tests run once per backend."""
    topic = f"{name}-{next(_runs)}"
    cluster.create_topic(topic)
    return topic


@dataclass(frozen=True)
class Expected:
    body: bytes
    tags: str
    keys: list[str]
    properties: dict[str, str]


def expected(n: int, writer: str) -> Expected:
    return Expected(
        body=f"{writer}-body-{n}".encode(),
        tags="TagA" if n % 2 else "TagB",
        keys=[f"order-{n}", f"user-{n % 3}"],
        properties={"seq": str(n), "origin": writer, "note": f"grüße {n}"},
    )


def large_body(writer: str) -> bytes:
    """Text (the C++ wheel's body setter stops at a NUL) that no prefix repeats."""
    body = "".join(f"{writer}:{i:05d};" for i in range(1000)).encode()
    assert len(body) >= LARGE
    return body


def our_message(topic: str, want: Expected) -> Message:
    return Message(
        topic, want.body, tags=want.tags, keys=" ".join(want.keys), properties=want.properties
    )


def cpp_message(client, topic: str, want: Expected):
    built = client.Message(topic)
    built.set_body(want.body)
    built.set_tags(want.tags)
    built.set_keys(" ".join(want.keys))
    for name, value in want.properties.items():
        built.set_property(name, value)
    return built


@dataclass(frozen=True)
class CppReceived:
    msg_id: str
    topic: str
    queue_id: int
    queue_offset: int
    body: bytes
    tags: str
    keys: list[str]
    properties: dict[str, str]


class CppConsumer(CollectingConsumer):
    """A collecting C++ push consumer that also records message ids and properties."""

    def _subscribe(self, topic: str, expression: str) -> None:
        client = self._client

        def on_message(_consumer, handle) -> int:
            incoming = client.RecvMessage(handle)
            item = CppReceived(
                incoming.id,
                incoming.topic,
                incoming.queue_id,
                incoming.queue_offset,
                incoming.body,
                incoming.tags.decode(),
                incoming.keys.decode().split(" "),
                {name: incoming.get_property(name).decode() for name in PROPERTY_NAMES},
            )
            with self._changed:
                self.received.append(item)
                self._changed.notify_all()
            return 0  # CONSUME_SUCCESS

        client.ffi_check(
            client.dll.Subscribe(self.consumer._handle, topic.encode(), expression.encode())
        )
        self.consumer._register_callback(on_message)


async def cpp_receive(client, cluster, group: str, topic: str, count: int, **options):
    """Start a C++ push consumer, wait for ``count`` messages and stop it."""
    with CppConsumer(client, cluster.namesrv_address, group, topic, **options) as consumer:
        return await anyio.to_thread.run_sync(consumer.wait_for, count)


async def our_receive(cluster, group: str, topic: str, count: int) -> list[ReceivedMessage]:
    """Start our push consumer from the first offset and collect ``count`` messages."""
    received: list[ReceivedMessage] = []

    async def collect(messages: list[ReceivedMessage]) -> None:
        received.extend(messages)

    consumer = PushConsumer(group, cluster.namesrv_address, listener=collect, consume_from="first")
    consumer.subscribe(topic, "*")
    async with consumer:
        with anyio.move_on_after(40):
            while len(received) < count:
                await anyio.sleep(0.02)
    return received


def user_properties(message: ReceivedMessage) -> dict[str, str]:
    return {name: message.properties[name] for name in PROPERTY_NAMES if name in message.properties}


async def test_what_our_producer_sends_the_cpp_push_consumer_receives_unchanged(client, cluster):
    topic = fresh_topic(cluster, "OursToCpp")
    wanted = {want.body: want for want in (expected(n, "ours") for n in range(COUNT))}
    ids: dict[bytes, str] = {}
    async with Producer(f"PG-{topic}", cluster.namesrv_address) as sender:
        for body, want in wanted.items():
            ids[body] = (await sender.send(our_message(topic, want))).msg_id
    assert len(set(ids.values())) == COUNT

    received = await cpp_receive(client, cluster, f"CG-{topic}", topic, COUNT)

    assert sorted(item.body for item in received) == sorted(wanted)
    for item in received:
        want = wanted[item.body]
        assert item.topic == topic
        assert (item.tags, item.keys, item.properties) == (want.tags, want.keys, want.properties)
        assert item.msg_id == ids[item.body]


async def test_what_the_cpp_producer_sends_our_push_consumer_receives_unchanged(client, cluster):
    topic = fresh_topic(cluster, "CppToOurs")
    wanted = {want.body: want for want in (expected(n, "cpp") for n in range(COUNT))}

    def send_all() -> dict[bytes, str]:
        with producer(client, cluster.namesrv_address, f"PG-{topic}") as sender:
            results = {
                body: sender.send_sync(cpp_message(client, topic, want))
                for body, want in wanted.items()
            }
        assert {result.status for result in results.values()} == {client.SendStatus.OK}
        return {body: result.msg_id for body, result in results.items()}

    ids = await anyio.to_thread.run_sync(send_all)
    assert len(set(ids.values())) == COUNT

    received = await our_receive(cluster, f"CG-{topic}", topic, COUNT)

    assert sorted(message.body for message in received) == sorted(wanted)
    for message in received:
        want = wanted[message.body]
        assert message.topic == topic
        assert (message.tags, message.keys, user_properties(message)) == (
            want.tags,
            want.keys,
            want.properties,
        )
        assert message.msg_id == ids[message.body]


async def test_compressed_bodies_from_either_client_are_read_by_both(client, cluster):
    topic = fresh_topic(cluster, "Compressed")
    ours, theirs = large_body("ours"), large_body("cpp")
    async with Producer(f"PG-{topic}", cluster.namesrv_address) as sender:
        our_id = (await sender.send(Message(topic, ours, tags="Big"))).msg_id

    def cpp_send() -> str:
        with producer(client, cluster.namesrv_address, f"PG-cpp-{topic}") as sender:
            built = client.Message(topic)
            built.set_body(theirs)
            built.set_tags("Big")
            return sender.send_sync(built).msg_id

    cpp_id = await anyio.to_thread.run_sync(cpp_send)
    by_id = {our_id: ours, cpp_id: theirs}

    # both were stored compressed: the consumers below read what the other client deflated
    mine = await our_receive(cluster, f"CG-ours-{topic}", topic, 2)
    assert {message.msg_id: message.body for message in mine} == by_id
    assert all(message.sys_flag & COMPRESSED for message in mine)

    seen = await cpp_receive(client, cluster, f"CG-cpp-{topic}", topic, 2)
    assert {item.msg_id: item.body for item in seen} == by_id


async def test_our_orderly_sends_reach_the_cpp_orderly_consumer_in_order(client, cluster):
    topic = fresh_topic(cluster, "Orderly")
    orders = [f"order-{letter}" for letter in "ABCDE"]
    per_order = 12
    queues: dict[str, set[int]] = defaultdict(set)
    async with Producer(f"PG-{topic}", cluster.namesrv_address) as sender:
        # interleaved, as orders come in: A0 B0 C0 ... A1 B1 ...
        for step in range(per_order):
            for order in orders:
                message = Message(topic, f"{order}:{step}".encode(), keys=order)
                result = await sender.send(message, selector=select_by_hash, arg=order)
                queues[order].add(result.queue.queue_id)
    assert all(len(used) == 1 for used in queues.values()), queues
    # (these five order ids hash onto all four queues, two of them sharing one)
    assert len(set().union(*queues.values())) > 1

    total = len(orders) * per_order
    received = await cpp_receive(client, cluster, f"CG-{topic}", topic, total, orderly=True)

    assert len(received) == total
    steps: dict[str, list[int]] = defaultdict(list)
    for item in received:
        order, _, step = item.body.decode().partition(":")
        assert {item.queue_id} == queues[order]
        steps[order].append(int(step))
    assert steps == {order: list(range(per_order)) for order in orders}


async def test_our_admin_reads_a_cpp_push_consumers_running_info(client, cluster):
    """The C++ client answers GET_CONSUMER_RUNNING_INFO in a hand-built JSON of its own
    (pretty-printed queue keys, quoted longs); the broker relays it, Admin reads it."""
    topic = fresh_topic(cluster, "RunningInfo")
    group = f"CG-{topic}"
    wanted = {MessageQueue(topic, "broker-a", queue_id) for queue_id in range(4)}
    with CollectingConsumer(client, cluster.namesrv_address, group, topic, "a || b"):
        async with Admin(cluster.namesrv_address) as admin:
            info = None
            with anyio.move_on_after(20):  # until it has heartbeated and rebalanced
                while info is None or not wanted <= set(info.mq_table):
                    await anyio.sleep(0.1)
                    try:
                        connections = (await admin.group_connections(group)).connections
                        info = await admin.consumer_running_info(group, connections[0].client_id)
                    except AdminError:
                        continue
    assert info is not None
    assert wanted <= set(info.mq_table)
    assert connections[0].language == "CPP"
    assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
    assert info.properties["PROP_NAMESERVER_ADDR"] == cluster.namesrv_address
    assert int(info.properties["PROP_CONSUMER_START_TIMESTAMP"]) > 0
    assert {s.topic: s.sub_string for s in info.subscription_set}[topic] == "a || b"
    assert all(not info.mq_table[queue].dropped for queue in wanted)
    assert all(info.mq_table[queue].last_pull_timestamp > 0 for queue in wanted)


async def test_a_cpp_consumer_leaves_consume_directly_unanswered_and_the_broker_says_so(
    client, cluster
):
    """The C++ client registers CONSUME_MESSAGE_DIRECTLY but never answers it (nor runs
    its listener): the broker gives up after its relay timeout with Java's
    CONSUME_MSG_TIMEOUT and remark, and the consumer goes on consuming."""
    topic = fresh_topic(cluster, "Directly")
    group = f"CG-{topic}"
    with CollectingConsumer(client, cluster.namesrv_address, group, topic) as consumer:
        async with Admin(cluster.namesrv_address) as admin:
            connections = []
            with anyio.move_on_after(20):  # until it has heartbeated
                while not connections:
                    await anyio.sleep(0.1)
                    with contextlib.suppress(AdminError):
                        connections = (await admin.group_connections(group)).connections
            client_id = connections[0].client_id
            async with Producer(f"PG-{topic}", instance=admin.instance) as our_producer:
                msg_id = (await our_producer.send(Message(topic, "directly"))).msg_id
                await anyio.to_thread.run_sync(consumer.wait_for, 1)
                with pytest.raises(AdminError) as err:
                    await admin.consume_message_directly(group, client_id, msg_id, topic)
                await our_producer.send(Message(topic, "after"))
                await anyio.to_thread.run_sync(consumer.wait_for, 2)
    assert err.value.code == ResponseCode.CONSUME_MSG_TIMEOUT
    assert f"consumer <{group}> <{client_id}> Timeout" in str(err.value)
    assert [item.body for item in consumer.received] == [b"directly", b"after"]
