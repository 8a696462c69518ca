"""The admin family over TCP (CODES.md §1.2)."""

from __future__ import annotations

import anyio
import pytest

from rocketmq_core.broker.groups import SubscriptionGroupConfig
from rocketmq_core.protocol import fastjson
from rocketmq_core.protocol.bodies import KVTable, TopicConfigWrapper
from rocketmq_core.protocol.codes import LanguageCode, RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.headers import (
    CreateTopicRequestHeader,
    ResetOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketmq_core.protocol.heartbeat import ConsumerData, HeartbeatData, SubscriptionData
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.remoting.processor import ProcessorTable

from .wire import send_request

pytestmark = pytest.mark.anyio
R = RequestCode


async def call(client, broker, code, fields=None, body=b""):
    return await client.invoke(broker.address, RemotingCommand.request(code, fields or {}, body))


def create_topic(topic, queues=2, perm=6):
    return CreateTopicRequestHeader(
        topic=topic,
        default_topic="TBW102",
        read_queue_nums=queues,
        write_queue_nums=queues,
        perm=perm,
        topic_filter_type="SINGLE_TAG",
    ).to_ext_fields()


def queue_key(topic, queue_id, broker_name="broker-a"):
    return (("brokerName", broker_name), ("queueId", queue_id), ("topic", topic))


async def test_create_list_and_delete_a_topic(broker, client):
    created = await call(client, broker, R.UPDATE_AND_CREATE_TOPIC, create_topic("Admin", 3))
    assert created.code == ResponseCode.SUCCESS, created.remark
    listed = await call(client, broker, R.GET_ALL_TOPIC_CONFIG)
    wrapper = TopicConfigWrapper.from_json(fastjson.loads(listed.body))
    assert wrapper.topic_configs["Admin"].write_queue_nums == 3
    assert wrapper.data_version == broker.topics.data_version
    await client.invoke(broker.address, send_request(topic="Admin"))
    deleted = await call(client, broker, R.DELETE_TOPIC_IN_BROKER, {"topic": "Admin"})
    assert deleted.code == ResponseCode.SUCCESS
    assert broker.topics.get("Admin") is None
    assert broker.store.max_offset("Admin", 0) <= 0  # its queues are gone too


async def test_topic_creation_refusals_say_why(broker, client):
    cases = [
        (create_topic("bad topic"), "illegal characters"),
        (create_topic("SCHEDULE_TOPIC_XXXX"), "conflict with system topic"),
        (create_topic("Zero", queues=0), "at least 1"),
    ]
    for fields, remark in cases:
        reply = await call(client, broker, R.UPDATE_AND_CREATE_TOPIC, fields)
        assert reply.code == ResponseCode.SYSTEM_ERROR
        assert remark in reply.remark


async def test_topic_stats_have_object_keys_and_offsets(broker, client):
    for _ in range(3):
        await client.invoke(broker.address, send_request())
    reply = await call(client, broker, R.GET_TOPIC_STATS_INFO, {"topic": "Orders"})
    assert reply.code == ResponseCode.SUCCESS
    # fastjson writes a MessageQueue key as an object: {{"brokerName":..}:{...}}
    assert reply.body.startswith(b'{"offsetTable":{{"brokerName":"broker-a"')
    table = fastjson.loads(reply.body)["offsetTable"]
    first = table[queue_key("Orders", 0)]
    assert (first["minOffset"], first["maxOffset"]) == (0, 3)
    assert first["lastUpdateTimestamp"] > 1_600_000_000_000
    assert table[queue_key("Orders", 1)]["maxOffset"] == 0
    missing = await call(client, broker, R.GET_TOPIC_STATS_INFO, {"topic": "Nope"})
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST


async def test_subscription_groups_and_offsets(broker, client):
    body = fastjson.dumps(SubscriptionGroupConfig("AdminGroup", retry_max_times=3).to_json())
    created = await call(client, broker, R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
    assert created.code == ResponseCode.SUCCESS, created.remark
    listed = await call(client, broker, R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    groups = fastjson.loads(listed.body)["subscriptionGroupTable"]
    assert groups["AdminGroup"]["retryMaxTimes"] == 3
    await client.invoke(broker.address, send_request())
    commit = UpdateConsumerOffsetRequestHeader(
        consumer_group="AdminGroup", topic="Orders", queue_id=0, commit_offset=1
    ).to_ext_fields()
    await call(client, broker, R.UPDATE_CONSUMER_OFFSET, commit)
    offsets = await call(client, broker, R.GET_ALL_CONSUMER_OFFSET)
    assert offsets.body == b'{"offsetTable":{"Orders@AdminGroup":{0:1}}}'
    stats = await call(client, broker, R.GET_CONSUME_STATS, {"consumerGroup": "AdminGroup"})
    queue = fastjson.loads(stats.body)["offsetTable"][queue_key("Orders", 0)]
    assert (queue["brokerOffset"], queue["consumerOffset"]) == (1, 1)
    assert queue["lastTimestamp"] > 0
    fields = {"groupName": "AdminGroup", "cleanOffset": "true"}
    deleted = await call(client, broker, R.DELETE_SUBSCRIPTIONGROUP, fields)
    assert deleted.code == ResponseCode.SUCCESS
    assert "AdminGroup" not in broker.groups.table
    assert broker.offsets.query("AdminGroup", "Orders", 0) == -1
    broken = await call(client, broker, R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b"{}")
    assert broken.code == ResponseCode.SYSTEM_ERROR and "groupName" in broken.remark


async def test_consumer_connections_and_runtime_info(broker, client):
    offline = await call(client, broker, R.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG"})
    assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE
    beat = HeartbeatData(
        "10.0.0.1@1",
        consumers=[ConsumerData("CG", subscriptions=[SubscriptionData("Orders", "TagA")])],
    )
    await call(client, broker, R.HEART_BEAT, body=beat.encode())
    online = await call(client, broker, R.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG"})
    value = fastjson.loads(online.body)
    assert [c["clientId"] for c in value["connectionSet"]] == ["10.0.0.1@1"]
    assert [c["language"] for c in value["connectionSet"]] == ["JAVA"]
    assert value["messageModel"] == "CLUSTERING"
    assert value["subscriptionTable"]["Orders"]["subString"] == "TagA"
    await client.invoke(broker.address, send_request())
    info = KVTable.decode((await call(client, broker, R.GET_BROKER_RUNTIME_INFO)).body).table
    assert info["brokerVersionDesc"] == "V4_9_4"
    assert int(info["commitLogMaxOffset"]) > 0
    assert info["msgPutTotalTodayNow"] == "1"
    assert info["runtime"].startswith("[ 0 days")


async def test_reset_offset_by_time_moves_offsets_and_tells_each_online_consumer(
    broker, plugin_host
):
    for _ in range(3):
        async with RemotingClient(plugin_host.registry.transports.get("tcp")) as sender:
            await sender.invoke(broker.address, send_request())
    pushed: list[tuple[str, RemotingCommand]] = []
    tcp = plugin_host.registry.transports.get("tcp")

    def consumer_table(name):
        table = ProcessorTable()
        table.register(R.RESET_CONSUMER_CLIENT_OFFSET, lambda ctx, req: pushed.append((name, req)))
        return table

    async with (
        RemotingClient(tcp, processors=consumer_table("java")) as java,
        RemotingClient(tcp, processors=consumer_table("cpp")) as cpp,
    ):
        for client_id, remoting, language in (("j@1", java, "JAVA"), ("c@1", cpp, "CPP")):
            beat = HeartbeatData(client_id, consumers=[ConsumerData("CG")])
            request = RemotingCommand.request(R.HEART_BEAT, {}, beat.encode())
            request.language = LanguageCode[language]
            await remoting.invoke(broker.address, request)
        broker.offsets.commit("CG", "Orders", 0, 3)
        reset = ResetOffsetRequestHeader(group="CG", topic="Orders", timestamp=0, is_force=True)
        reply = await java.invoke(
            broker.address,
            RemotingCommand.request(R.INVOKE_BROKER_TO_RESET_OFFSET, reset.to_ext_fields()),
        )
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        with anyio.fail_after(5):
            while len(pushed) < 2:
                await anyio.sleep(0.01)
    assert fastjson.loads(reply.body)["offsetTable"][queue_key("Orders", 0)] == 0
    assert broker.offsets.query("CG", "Orders", 0) == 0
    bodies = {name: fastjson.loads(request.body) for name, request in pushed}
    # Java reads fastjson's object-keyed map; the C++ client only an array (REMOTING §11)
    assert bodies["java"]["offsetTable"][queue_key("Orders", 0)] == 0
    assert {"brokerName": "broker-a", "queueId": 0, "topic": "Orders", "offset": 0} in bodies[
        "cpp"
    ]["offsetTable"]
    assert {name: request.ext_fields["group"] for name, request in pushed} == {
        "java": "CG",
        "cpp": "CG",
    }


async def test_reset_offset_needs_the_topic_and_an_online_group(broker, client):
    reset = ResetOffsetRequestHeader(group="CG", topic="Nope", timestamp=0, is_force=True)
    unknown = await call(client, broker, R.INVOKE_BROKER_TO_RESET_OFFSET, reset.to_ext_fields())
    assert unknown.code == ResponseCode.TOPIC_NOT_EXIST
    await client.invoke(broker.address, send_request())
    reset.topic = "Orders"
    offline = await call(client, broker, R.INVOKE_BROKER_TO_RESET_OFFSET, reset.to_ext_fields())
    assert offline.code == ResponseCode.SYSTEM_ERROR
    assert "Consumer not online" in offline.remark
