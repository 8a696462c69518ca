"""Admin against a real name server and broker over TCP (one cluster for the module; each
test has its own topics and groups)."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from rocketmq_core.client.admin import LATEST, Admin
from rocketmq_core.client.admin_types import AdminError, GroupConfig
from rocketmq_core.client.config import ClientConfig
from rocketmq_core.client.message import Message
from rocketmq_core.client.producer import Producer
from rocketmq_core.protocol.bodies import ConsumerRunningInfo
from rocketmq_core.protocol.codes import ResponseCode
from rocketmq_core.protocol.constants import ORDER_TOPIC_CONFIG_NAMESPACE
from rocketmq_core.protocol.heartbeat import ConsumerData, MessageQueue, SubscriptionData

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster  # one cluster for the module: its tests use fresh names


@pytest.fixture
async def admin(cluster):
    async with Admin(namesrv_addr=cluster.namesrv_address) as running:
        yield running


class FakeConsumer:
    """Just enough of a consumer to be online: heartbeat data and a reset inbox."""

    def __init__(self, group: str, topic: str) -> None:
        self.group = group
        self.topic = topic
        self.resets: list[tuple[str, dict[MessageQueue, int]]] = []

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(self.group, subscriptions=[SubscriptionData.of(self.topic, "*")])

    def request_rebalance(self) -> None:
        pass

    def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        self.resets.append((topic, offsets))

    def running_info(self) -> ConsumerRunningInfo:
        return ConsumerRunningInfo()


async def go_online(admin: Admin, group: str, topic: str) -> FakeConsumer:
    consumer = FakeConsumer(group, topic)
    admin.instance.consumers[group] = consumer
    await admin.instance.topic_route(topic)  # the instance heartbeats brokers it knows
    await admin.instance.heartbeat_all()
    return consumer


async def send(admin: Admin, topic: str, count: int, **fields: Any) -> list:
    async with Producer("PG-admin-test", instance=admin.instance) as producer:
        return [await producer.send(Message(topic, f"body-{n}", **fields)) for n in range(count)]


async def test_cluster_info_and_broker_runtime_info(admin, cluster):
    info = await admin.cluster_info()
    assert info.clusters == {"DefaultCluster": ["broker-a"]}
    broker = info.brokers["broker-a"]
    assert (broker.cluster, broker.master_address) == ("DefaultCluster", cluster.broker_address)
    assert info.masters() == [broker]
    assert info.broker_at(cluster.broker_address) is broker
    with pytest.raises(AdminError, match="cluster 'Nope' is not known"):
        info.masters("Nope")
    runtime = await admin.broker_runtime_info(cluster.broker_address)
    assert runtime["brokerVersionDesc"] == "V4_9_4"
    assert int(runtime["commitLogMaxOffset"]) >= 0


async def test_create_update_route_stats_and_delete_a_topic(admin, cluster, name):
    topic = name()
    created = await admin.create_topic(topic, 3, cluster="DefaultCluster")
    assert created == [cluster.broker_address]
    assert topic in await admin.list_topics()
    route = await admin.topic_route(topic)
    (queues,) = route.queue_datas
    assert (queues.broker_name, queues.read_queue_nums, queues.write_queue_nums) == (
        "broker-a",
        3,
        3,
    )
    assert route.broker_datas[0].master_addr == cluster.broker_address
    # update through one broker, read-only: the route follows before it returns
    await admin.update_topic(topic, 5, broker_addr=cluster.broker_address, perm=4)
    (queues,) = (await admin.topic_route(topic)).queue_datas
    assert (queues.read_queue_nums, queues.write_queue_nums, queues.perm) == (5, 5, 4)
    await admin.update_topic(topic, 2)  # the only cluster when none is named
    await send(admin, topic, 4)
    stats = await admin.topic_stats(topic)
    assert [q.queue.queue_id for q in stats.queues] == [0, 1]
    assert stats.total_messages == 4
    assert {q.queue.broker_name for q in stats.queues} == {"broker-a"}
    first = stats.queues[0]
    assert first.min_offset == 0 and first.max_offset == first.messages
    assert first.last_update_timestamp > 1_600_000_000_000
    assert await admin.delete_topic(topic) == [cluster.broker_address]
    assert topic not in await admin.list_topics()
    with pytest.raises(AdminError, match=f"topic '{topic}' has no route") as missing:
        await admin.topic_route(topic)
    assert missing.value.code == ResponseCode.TOPIC_NOT_EXIST


async def test_topic_refusals_name_the_broker_and_the_reason(admin, cluster, name):
    with pytest.raises(AdminError) as bad:
        await admin.create_topic("bad topic", cluster="DefaultCluster")
    assert cluster.broker_address in str(bad.value) and "illegal" in str(bad.value)
    assert (bad.value.address, bad.value.code) == (
        cluster.broker_address,
        ResponseCode.INVALID_PARAMETER,  # Java 5.x's code for a bad topic name
    )
    with pytest.raises(AdminError, match="cluster 'Elsewhere' is not known"):
        await admin.create_topic(name(), cluster="Elsewhere")
    with pytest.raises(ValueError, match="not both"):
        await admin.create_topic(name(), cluster="DefaultCluster", broker_addr="127.0.0.1:1")
    with pytest.raises(AdminError, match="has no route"):
        await admin.topic_stats(name())


async def test_an_orderly_topic_has_its_layout_in_the_name_server(admin, name):
    topic = name()
    await admin.create_topic(topic, 2, order=True)
    assert await admin.get_kv(ORDER_TOPIC_CONFIG_NAMESPACE, topic) == "broker-a:2"
    await admin.delete_topic(topic, cluster="DefaultCluster")
    assert await admin.get_kv(ORDER_TOPIC_CONFIG_NAMESPACE, topic) is None


async def test_create_list_and_delete_subscription_groups(admin, name):
    group = name("CG")
    assert await admin.create_group(GroupConfig(group, retry_max_times=3, retry_queue_nums=2))
    listed = {info.name: info for info in await admin.list_groups()}
    assert listed[group].brokers == ["broker-a"]
    assert (listed[group].config.retry_max_times, listed[group].config.retry_queue_nums) == (3, 2)
    await admin.update_group(GroupConfig(group, consume_enable=False), cluster="DefaultCluster")
    listed = {info.name: info for info in await admin.list_groups()}
    assert listed[group].config.consume_enable is False
    await admin.delete_group(group)
    assert group not in {info.name for info in await admin.list_groups()}


async def test_connections_and_consume_stats_of_a_group(admin, name):
    topic, group = name(), name("CG")
    await admin.create_topic(topic, 2)
    with pytest.raises(AdminError, match="no online consumer") as offline:
        await admin.group_connections(group)
    assert offline.value.code == ResponseCode.CONSUMER_NOT_ONLINE
    await send(admin, topic, 6)
    await go_online(admin, group, topic)
    connections = await admin.group_connections(group)
    assert [c.client_id for c in connections.connections] == [admin.instance.client_id]
    assert connections.connections[0].language == "PYTHON"
    assert connections.subscriptions == {topic: "*"}
    assert connections.message_model == "CLUSTERING"
    queue = MessageQueue(topic, "broker-a", 0)
    stats = await admin.consume_stats(group, topic)
    assert stats.total_lag == stats.broker_offset_total == 6
    await admin.instance.invoke(
        admin.instance.broker_address("broker-a"),
        15,  # UPDATE_CONSUMER_OFFSET, as a consumer commits
        {"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": "1"},
    )
    stats = await admin.consume_stats(group, topic)
    by_queue = {q.queue: q for q in stats.queues}
    assert by_queue[queue].consumer_offset == 1
    assert by_queue[queue].lag == by_queue[queue].broker_offset - 1
    assert by_queue[queue].last_timestamp > 1_600_000_000_000
    assert stats.total_lag == 5 and stats.consumer_offset_total == 1
    everything = await admin.consume_stats(group)  # every topic the group has offsets on
    assert {q.queue.topic for q in everything.queues} == {topic}
    await admin.instance.unregister(consumer_group=group)


async def test_reset_offsets_of_an_offline_and_an_online_group(admin, name):
    topic, group = name(), name("CG")
    await admin.create_topic(topic, 1)
    await send(admin, topic, 3)
    await anyio.sleep(0.01)
    middle = time.time_ns() // 1_000_000
    await anyio.sleep(0.01)
    await send(admin, topic, 2)
    # offline: committed directly, per queue (mqadmin's resetOffsetByTimeOld)
    reset = await admin.reset_offset_by_time(group, topic, middle)
    assert [(o.queue.queue_id, o.offset, o.online) for o in reset.offsets] == [(0, 3, False)]
    assert (await admin.consume_stats(group, topic)).total_lag == 2
    reset = await admin.reset_offset_by_time(group, topic, LATEST)
    assert [o.offset for o in reset.offsets] == [5]
    not_forced = await admin.reset_offset_by_time(group, topic, 0, force=False)
    assert [o.offset for o in not_forced.offsets] == [0]  # back is allowed
    # online: the broker moves the offsets and tells the consumer
    consumer = await go_online(admin, group, topic)
    reset = await admin.reset_offset_by_time(group, topic, middle)
    assert [(o.queue, o.offset, o.online) for o in reset.offsets] == [
        (MessageQueue(topic, "broker-a", 0), 3, True)
    ]
    with anyio.fail_after(5):
        while not consumer.resets:
            await anyio.sleep(0.01)
    assert consumer.resets == [(topic, {MessageQueue(topic, "broker-a", 0): 3})]
    await admin.instance.unregister(consumer_group=group)
    with pytest.raises(AdminError, match="has no route"):
        await admin.reset_offset_by_time(group, name(), 0)


async def test_query_by_key_and_view_by_either_id(admin, cluster, name):
    topic = name()
    await admin.create_topic(topic, 2)
    results = await send(admin, topic, 3, keys=["order-1", "shared"], tags="TagA")
    await send(admin, topic, 1, keys="other")
    found = await admin.query_message_by_key(topic, "order-1")
    assert sorted(m.msg_id for m in found) == sorted(r.msg_id for r in results)
    assert {m.body for m in found} == {b"body-0", b"body-1", b"body-2"}
    assert all(m.tags == "TagA" and m.queue.broker_name == "broker-a" for m in found)
    assert len(await admin.query_message_by_key(topic, "shared", max_num=2)) == 2
    assert await admin.query_message_by_key(topic, "nobody") == []
    assert await admin.query_message_by_key(topic, "order-1", end=1) == []
    sent = results[1]
    by_offset_id = await admin.view_message(sent.offset_msg_id)
    assert (by_offset_id.msg_id, by_offset_id.body) == (sent.msg_id, b"body-1")
    assert by_offset_id.store_host == cluster.broker_address
    assert by_offset_id.queue.broker_name == "broker-a"
    by_unique_id = await admin.view_message(sent.msg_id, topic)
    assert by_unique_id.offset_msg_id == sent.offset_msg_id
    with pytest.raises(AdminError, match="give the topic"):
        await admin.view_message(sent.msg_id)
    with pytest.raises(AdminError, match="no message"):
        await admin.view_message("0" * 32, topic)
    with pytest.raises(AdminError, match="can not find message by the offset"):
        await admin.view_message(sent.offset_msg_id[:-8] + "7FFFFFFF")


async def test_queue_offsets_and_search_by_time(admin, name):
    topic = name()
    await admin.create_topic(topic, 1)
    before = time.time_ns() // 1_000_000 - 1
    await send(admin, topic, 3)
    queue = MessageQueue(topic, "broker-a", 0)
    assert (await admin.min_offset(queue), await admin.max_offset(queue)) == (0, 3)
    assert await admin.search_offset(queue, before) == 0
    assert await admin.search_offset(queue, before + 60_000, boundary="upper") == 2
    with pytest.raises(AdminError, match="does not serve"):
        await admin.max_offset(MessageQueue(topic, "broker-z", 0))


async def test_kv_config_on_every_name_server(admin, name):
    namespace = name("NS")
    assert await admin.kv_list(namespace) == {}
    assert await admin.get_kv(namespace, "a") is None
    await admin.put_kv(namespace, "b", "2")
    await admin.put_kv(namespace, "a", "1")
    assert await admin.get_kv(namespace, "a") == "1"
    assert await admin.kv_list(namespace) == {"a": "1", "b": "2"}
    await admin.delete_kv(namespace, "a")
    assert await admin.kv_list(namespace) == {"b": "2"}


async def test_unreachable_servers_are_named(cluster):
    async with Admin(config=ClientConfig("127.0.0.1:1", request_timeout=1)) as admin:
        with pytest.raises(AdminError, match=r"no name server answered: 127\.0\.0\.1:1"):
            await admin.cluster_info()
        with pytest.raises(AdminError) as broker:
            await admin.broker_runtime_info("127.0.0.1:1")
        assert broker.value.address == "127.0.0.1:1"
        assert "broker 127.0.0.1:1 did not answer" in str(broker.value)
