"""Our SDK in a master/slave group (HA.md §6): pulls go where the broker suggests and to
the slave while the master is gone, offsets committed meanwhile reach the master when it
returns, and producers leave a broker group without a master alone.

Real in-process name server and brokers on loopback, with mmap stores.
"""

from __future__ import annotations

import anyio
import pytest

from rocketmq_core.broker.app import Broker
from rocketmq_core.client.config import ClientConfig
from rocketmq_core.client.consumer_requests import PullStatus
from rocketmq_core.client.message import Message
from rocketmq_core.client.producer import Producer
from rocketmq_core.client.pull_consumer import PullConsumer
from rocketmq_core.client.push import PushConsumer
from rocketmq_core.errors import ResponseError
from rocketmq_core.namesrv.server import NameServer
from rocketmq_core.protocol.bodies import TopicConfig
from rocketmq_core.protocol.heartbeat import MessageQueue
from rocketmq_core.testing.broker import broker_config
from rocketmq_core.testing.namesrv import namesrv_config

from .conftest import eventually

pytestmark = pytest.mark.anyio

TOPIC = TopicConfig("Orders", 1, 1)
Q0 = MessageQueue("Orders", "broker-a", 0)


@pytest.fixture
async def namesrv(tmp_path, plugin_host):
    async with NameServer.serving(namesrv_config(tmp_path / "ns"), host=plugin_host) as running:
        yield running


def serving(config, plugin_host):
    return Broker.serving(config, host=plugin_host)


def master_config(tmp_path, namesrv, name="broker-a", **overrides):
    return broker_config(tmp_path / name, namesrv.address, broker_name=name, **overrides)


def slave_config(tmp_path, namesrv):
    config = broker_config(tmp_path / "broker-a-s", namesrv.address, broker_role="SLAVE")
    config.broker_id = 1
    return config


def client_config(namesrv) -> ClientConfig:
    # routes and offsets every 0.2 s instead of 30 s and 5 s: the test sees a change soon
    return ClientConfig(
        namesrv_addr=namesrv.address, poll_namesrv_interval=0.2, persist_offset_interval=0.2
    )


def pulled(broker, group="CG") -> int:
    """Messages ``group`` pulled from ``broker`` in the last minute (its own counter)."""
    return round(broker.pull_rates.tps(group, ["Orders"]) * broker.pull_rates.window)


async def routed(client: PullConsumer | Producer, masters: set[str]) -> None:
    """Wait until the name server routes Orders to these broker groups' masters (brokers
    register a new topic soon, not at once)."""
    with anyio.fail_after(10):
        while True:
            try:
                route = await client.instance.topic_route("Orders", refresh=True)
            except ResponseError:  # not registered yet
                route = None
            if route and {b.broker_name for b in route.broker_datas if b.master_addr} == masters:
                return
            await anyio.sleep(0.02)


async def fill(namesrv, count: int, size: int = 0) -> None:
    async with Producer("PG", namesrv.address) as producer:
        for n in range(count):
            await producer.send(Message("Orders", f"m{n}".encode().ljust(size, b".")), queue=Q0)


async def test_a_pull_goes_to_the_slave_the_master_suggests(tmp_path, namesrv, plugin_host):
    # 40% of 1000 bytes of "RAM": a reader more than ~3 records behind is sent to the slave
    config = master_config(tmp_path, namesrv, slave_read_enable=True, total_physical_memory=1000)
    async with (
        serving(config, plugin_host) as master,
        serving(slave_config(tmp_path, namesrv), plugin_host) as slave,
    ):
        master.topics.update(TOPIC)
        slave.topics.update(TOPIC)
        async with PullConsumer("CG", namesrv.address) as consumer:
            await routed(consumer, {"broker-a"})
            await fill(namesrv, 40, size=100)
            await eventually(lambda: slave.store.max_offset("Orders", 0) == 40)
            first = await consumer.pull(Q0, 0, max_nums=16)
            assert consumer.instance.pull_broker_ids[("CG", Q0)] == 1
            second = await consumer.pull(Q0, 16, max_nums=16)
            # the slave (slaveReadEnable=false there) sends the reader back to the master
            assert consumer.instance.pull_broker_ids[("CG", Q0)] == 0
            third = await consumer.pull(Q0, 32)
        assert (pulled(master), pulled(slave)) == (16 + 8, 16)
    bodies = [m.body[:3] for m in first.messages + second.messages + third.messages]
    assert bodies == [f"m{n}".encode().ljust(3, b".") for n in range(40)]


async def test_reads_and_offsets_go_on_at_the_slave_while_the_master_is_gone(
    tmp_path, namesrv, plugin_host
):
    config = master_config(tmp_path, namesrv)
    async with (
        serving(slave_config(tmp_path, namesrv), plugin_host) as slave,
        PullConsumer("CG", config=client_config(namesrv)) as reader,
    ):
        slave.topics.update(TOPIC)
        async with serving(config, plugin_host) as master:
            master.topics.update(TOPIC)
            await routed(reader, {"broker-a"})
            await fill(namesrv, 10)
            await eventually(lambda: slave.store.max_offset("Orders", 0) == 10)
            before = await reader.pull(Q0, 0, max_nums=5)
        # the master is gone: the reader's next route refresh shows the slave alone
        await eventually(lambda: reader.instance.master_address("broker-a") is None)
        after = await reader.pull(Q0, 5)
        assert [m.body for m in before.messages + after.messages] == [
            f"m{n}".encode() for n in range(10)
        ]
        assert after.status is PullStatus.FOUND and pulled(slave) == 5

        # a push consumer started now consumes from the slave and commits there
        bodies: list[bytes] = []

        async def listener(messages):
            bodies.extend(message.body for message in messages)

        consumer = PushConsumer(
            "CG2", listener=listener, consume_from="first", config=client_config(namesrv)
        )
        consumer.subscribe("Orders")
        async with consumer:
            await eventually(lambda: len(bodies) == 10)
            await eventually(lambda: slave.offsets.query("CG2", "Orders", 0) == 10)
            assert consumer.offset_store.cached(Q0) == 10
            # the master comes back (same ports, same store): the kept offset reaches it
            async with serving(config, plugin_host) as master:
                await eventually(lambda: master.offsets.query("CG2", "Orders", 0) == 10)
    assert sorted(bodies) == [f"m{n}".encode() for n in range(10)]


async def test_a_message_failed_while_the_master_is_gone_comes_back_through_another_group(
    tmp_path, namesrv, plugin_host
):
    # delay level 3 (a first retry's) lasts 1 s instead of 10 s
    b_config = master_config(tmp_path, namesrv, "broker-b", message_delay_level="1s 1s 1s 1s")
    async with (
        serving(slave_config(tmp_path, namesrv), plugin_host) as slave,
        serving(b_config, plugin_host) as broker_b,
    ):
        slave.topics.update(TOPIC)
        async with serving(master_config(tmp_path, namesrv), plugin_host) as master:
            master.topics.update(TOPIC)
            async with Producer("PG", config=client_config(namesrv)) as producer:
                await routed(producer, {"broker-a"})
                slave.request_registration()  # learn the master's HA address now
                sent = [
                    await producer.send(Message("Orders", f"m{n}".encode()), queue=Q0)
                    for n in range(5)
                ]
            await eventually(lambda: slave.store.max_offset("Orders", 0) == 5)

        seen: list[tuple[bytes, int, str, str]] = []  # body, reconsumeTimes, topic, msgId

        async def listener(messages):
            for message in messages:
                seen.append((message.body, message.reconsume_times, message.topic, message.msg_id))
            return not any(m.body == b"m2" and m.reconsume_times == 0 for m in messages)

        consumer = PushConsumer(
            "CG",
            listener=listener,
            consume_from="first",
            config=client_config(namesrv),
            rebalance_interval=0.2,
        )
        consumer.subscribe("Orders")
        async with consumer:
            await eventually(lambda: consumer.instance.master_address("broker-a") is None)
            # broker-a's slave refuses the send-back; broker-b's master takes the copy
            await eventually(lambda: len(seen) == 6, timeout=15)
            await eventually(lambda: slave.offsets.query("CG", "Orders", 0) == 5)
        retried = broker_b.store.max_offset("%RETRY%CG", 0)
    first_m2 = (b"m2", 0, "Orders", sent[2].msg_id)
    again_m2 = (b"m2", 1, "Orders", sent[2].msg_id)
    assert sorted(seen) == sorted(
        [(f"m{n}".encode(), 0, "Orders", sent[n].msg_id) for n in range(5)] + [again_m2]
    )
    assert seen.index(first_m2) < seen.index(again_m2)
    assert retried == 1


async def test_a_producer_sends_only_to_broker_groups_with_a_master(tmp_path, namesrv, plugin_host):
    b_config = master_config(tmp_path, namesrv, "broker-b")
    async with (
        serving(slave_config(tmp_path, namesrv), plugin_host) as slave,
        serving(b_config, plugin_host) as broker_b,
        Producer("PG", config=client_config(namesrv)) as producer,
    ):
        slave.topics.update(TOPIC)
        broker_b.topics.update(TOPIC)
        async with serving(master_config(tmp_path, namesrv), plugin_host) as master:
            master.topics.update(TOPIC)
            await routed(producer, {"broker-a", "broker-b"})
            before = [await producer.send(Message("Orders", b"x")) for _ in range(2)]
        # broker-a's slave still serves the topic, but it has no master to send to
        await eventually(lambda: producer.instance.master_address("broker-a") is None)
        info = await producer.publish_info("Orders")
        after = [await producer.send(Message("Orders", f"m{n}".encode())) for n in range(10)]
        stored_at_b = broker_b.store.max_offset("Orders", 0)
    assert {result.queue.broker_name for result in before} == {"broker-a", "broker-b"}
    assert {queue.broker_name for queue in info.queues} == {"broker-b"}
    assert {result.queue.broker_name for result in after} == {"broker-b"}
    assert stored_at_b == 1 + 10
