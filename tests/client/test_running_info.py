"""GET_CONSUMER_RUNNING_INFO end to end: Admin asks a broker, the broker relays the request
to the consumer named, the consumer's ConsumerRunningInfo comes back (real cluster)."""

from __future__ import annotations

import time

import anyio
import pytest

from rocketmq_core.client.admin import Admin
from rocketmq_core.client.admin_types import AdminError
from rocketmq_core.client.message import Message, ReceivedMessage
from rocketmq_core.client.producer import Producer
from rocketmq_core.client.pull_consumer import PullConsumer
from rocketmq_core.client.push import PushConsumer
from rocketmq_core.protocol.codes import ResponseCode
from rocketmq_core.protocol.heartbeat import MessageQueue

from .conftest import eventually

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster


async def test_admin_reads_what_a_running_push_consumer_reports(cluster, name):
    topic, group = name("T"), name("CG")
    cluster.create_topic(topic, 2)
    consumed: list[ReceivedMessage] = []

    async def collect(messages: list[ReceivedMessage]) -> None:
        consumed.extend(messages)

    consumer = PushConsumer(
        group, cluster.namesrv_address, listener=collect, consume_from="first", orderly=True
    )
    consumer.subscribe(topic, "a || b")
    before = int(time.time() * 1000)
    async with Admin(cluster.namesrv_address) as admin, consumer:
        async with Producer(name("PG"), instance=admin.instance) as producer:
            for n in range(4):
                await producer.send(Message(topic, f"body-{n}", tags="a"))
        await eventually(lambda: len(consumed) == 4)
        client_id = consumer.instance.client_id
        assert [c.client_id for c in (await admin.group_connections(group)).connections] == [
            client_id
        ]

        # the offsets are committed just after the listener returns: ask until they are
        with anyio.move_on_after(10):
            while True:
                info = await admin.consumer_running_info(group, client_id)
                committed = [e.commit_offset for q, e in info.mq_table.items() if q.topic == topic]
                if sum(committed) == 4:
                    break
                await anyio.sleep(0.05)

    assert info.properties["consumerGroup"] == group
    assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
    assert info.properties["PROP_CONSUMEORDERLY"] == "true"
    assert before <= int(info.properties["PROP_CONSUMER_START_TIMESTAMP"]) <= time.time() * 1000
    assert info.properties["PROP_NAMESERVER_ADDR"] == cluster.namesrv_address
    subscribed = {s.topic: s.sub_string for s in info.subscription_set}
    assert subscribed == {topic: "a || b", f"%RETRY%{group}": "*"}
    owned = {queue for queue in info.mq_table if queue.topic == topic}
    assert owned == {MessageQueue(topic, "broker-a", 0), MessageQueue(topic, "broker-a", 1)}
    entries = [info.mq_table[queue] for queue in owned]
    assert all(entry.locked and not entry.dropped for entry in entries)  # orderly: locked
    assert all(entry.last_pull_timestamp >= before for entry in entries)
    assert sum(entry.commit_offset for entry in entries) == 4  # every message committed
    assert any(entry.last_consume_timestamp >= before for entry in entries)
    assert all(entry.cached_msg_count == 0 for entry in entries)


async def test_a_pull_consumer_reports_itself_and_owns_no_queue(cluster, name):
    topic, group = name("T"), name("CG")
    cluster.create_topic(topic, 1)
    async with Admin(cluster.namesrv_address) as admin:
        async with PullConsumer(group, cluster.namesrv_address) as consumer:
            await consumer.queues(topic)  # a topic asked about is in its heartbeats
            await consumer.instance.heartbeat_all()
            info = await admin.consumer_running_info(group, consumer.instance.client_id)
    assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_ACTIVELY"
    assert [s.topic for s in info.subscription_set] == [topic]
    assert info.mq_table == {}


async def test_a_consumer_not_online_is_an_admin_error_naming_it(cluster, name):
    group = name("CG")
    async with Admin(cluster.namesrv_address) as admin:
        with pytest.raises(AdminError, match=f"'nobody@1' of group '{group}'.*not online") as err:
            await admin.consumer_running_info(group, "nobody@1")
    assert err.value.code == ResponseCode.CONSUMER_NOT_ONLINE
