"""The admin family over TCP (CODES.md §1.2)."""

from __future__ import annotations

import re
import time
from datetime import datetime

import anyio
import pytest

from rocketmq_core.broker.groups import SubscriptionGroupConfig
from rocketmq_core.config import parse_properties
from rocketmq_core.protocol import fastjson
from rocketmq_core.protocol.bodies import (
    DataVersion,
    GroupList,
    KVTable,
    TopicConfig,
    TopicConfigWrapper,
    TopicList,
)
from rocketmq_core.protocol.codes import LanguageCode, RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.headers import (
    CloneGroupOffsetRequestHeader,
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
        (create_topic("x" * 128), "longer than topic max length 127"),
        (create_topic("SCHEDULE_TOPIC_XXXX"), "is a system topic"),
        (create_topic("Zero", queues=0), "at least 1"),
    ]
    for fields, remark in cases:
        reply = await call(client, broker, R.UPDATE_AND_CREATE_TOPIC, fields)
        assert reply.code == ResponseCode.INVALID_PARAMETER
        assert remark in reply.remark


async def test_queue_counts_beyond_the_maximum_are_refused(broker, client):
    # a count near 2**31 was taken, and then every per-queue admin request walked it
    for read, write in [(2**31 - 1, 4), (4, 2**31 - 1), (1025, 1025)]:
        fields = create_topic("Huge")
        fields.update(readQueueNums=str(read), writeQueueNums=str(write))
        reply = await call(client, broker, R.UPDATE_AND_CREATE_TOPIC, fields)
        assert reply.code == ResponseCode.INVALID_PARAMETER, (read, write)
        assert "at most 1024 queues are allowed (maxTopicQueueNums)" in reply.remark
    assert broker.topics.get("Huge") is None
    accepted = await call(client, broker, R.UPDATE_AND_CREATE_TOPIC, create_topic("Huge", 1024))
    assert accepted.code == ResponseCode.SUCCESS, accepted.remark
    stats = await call(client, broker, R.GET_TOPIC_STATS_INFO, {"topic": "Huge"})
    assert stats.code == ResponseCode.SUCCESS, stats.remark


SYSTEM_TOPICS = [
    "TBW102",
    "SCHEDULE_TOPIC_XXXX",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "RMQ_SYS_TRACE_TOPIC",
    "rmq_sys_wheel_timer",
    "rmq_sys_REVIVE_LOG_DefaultCluster",  # any rmq_sys_ name, existing or not
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
    "BenchmarkTest",
    "CHECKPOINT_TOPIC",
    "DefaultCluster",  # the cluster's and the broker's own topics
    "broker-a",
    "DefaultCluster_REPLY_TOPIC",
]


@pytest.mark.parametrize("topic", SYSTEM_TOPICS)
async def test_system_topics_cannot_be_created_changed_or_deleted(broker, client, topic):
    before = broker.topics.get(topic)
    before_json = before.to_json() if before is not None else None
    changed = await call(client, broker, R.UPDATE_AND_CREATE_TOPIC, create_topic(topic, 1, 2))
    deleted = await call(client, broker, R.DELETE_TOPIC_IN_BROKER, {"topic": topic})
    for reply in (changed, deleted):
        assert reply.code == ResponseCode.INVALID_PARAMETER
        assert f"The topic[{topic}] is a system topic" in reply.remark
        assert "cannot be created, changed or deleted" in reply.remark
    after = broker.topics.get(topic)
    assert (after.to_json() if after is not None else None) == before_json


async def test_a_refused_change_to_tbw102_keeps_auto_creation_working(broker, client):
    refused = await call(client, broker, R.UPDATE_AND_CREATE_TOPIC, create_topic("TBW102", 8, 6))
    assert refused.code == ResponseCode.INVALID_PARAMETER
    sent = await client.invoke(broker.address, send_request(topic="AutoCreatedAfterwards"))
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    assert broker.topics.get("AutoCreatedAfterwards") is not None


async def test_retry_and_dead_letter_topics_can_be_changed(broker, client):
    """Java lets operators change %RETRY% and %DLQ% topics (e.g. make a DLQ readable)."""
    for topic in ("%RETRY%CG", "%DLQ%CG", "%DLQ%" + "g" * 200):
        created = await call(client, broker, R.UPDATE_AND_CREATE_TOPIC, create_topic(topic, 1))
        assert created.code == ResponseCode.SUCCESS, created.remark
        deleted = await call(client, broker, R.DELETE_TOPIC_IN_BROKER, {"topic": topic})
        assert deleted.code == ResponseCode.SUCCESS, deleted.remark
        assert broker.topics.get(topic) is None


async def test_deleting_a_blank_topic_is_refused(broker, client):
    reply = await call(client, broker, R.DELETE_TOPIC_IN_BROKER, {"topic": " "})
    assert reply.code == ResponseCode.INVALID_PARAMETER
    assert reply.remark == "The specified topic is blank."


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
    assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE
    assert "Consumer not online" in offline.remark


async def test_producer_connections_from_heartbeats(broker, client):
    unknown = await call(client, broker, R.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG"})
    assert (unknown.code, unknown.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "the producer group[PG] not exist",
    )
    beat = RemotingCommand.request(R.HEART_BEAT, {}, HeartbeatData("p@1", ["PG"]).encode())
    beat.language = LanguageCode.CPP
    beat.version = 317
    await client.invoke(broker.address, beat)
    reply = await call(client, broker, R.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG"})
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    (connection,) = fastjson.loads(reply.body)["connectionSet"]
    assert connection["clientAddr"].startswith("127.0.0.1:")
    assert (connection["clientId"], connection["language"], connection["version"]) == (
        "p@1",
        "CPP",
        317,
    )
    missing = await call(client, broker, R.GET_PRODUCER_CONNECTION_LIST)
    assert missing.code == ResponseCode.SYSTEM_ERROR and "producerGroup" in missing.remark


async def test_who_consumes_a_topic_online_or_by_offsets(broker, client):
    beat = HeartbeatData(
        "c@1", consumers=[ConsumerData("Online", subscriptions=[SubscriptionData("Orders", "*")])]
    )
    await call(client, broker, R.HEART_BEAT, body=beat.encode())
    broker.offsets.commit("Committed", "Orders", 0, 4)
    broker.offsets.commit("Elsewhere", "Other", 0, 1)
    reply = await call(client, broker, R.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "Orders"})
    assert reply.code == ResponseCode.SUCCESS
    assert GroupList.decode(reply.body).group_list == ["Committed", "Online"]
    nobody = await call(client, broker, R.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "Nope"})
    assert GroupList.decode(nobody.body).group_list == []


async def test_consume_time_span_per_queue(broker, client):
    for queue_id in (0, 0, 0, 1):
        await client.invoke(broker.address, send_request(queue_id=queue_id))
    broker.offsets.commit("CG", "Orders", 0, 1)  # one of three consumed
    broker.offsets.commit("CG", "Orders", 1, 1)  # all consumed
    await anyio.sleep(0.02)  # the next message of queue 0 has waited at least 20 ms
    fields = {"topic": "Orders", "group": "CG"}
    reply = await call(client, broker, R.QUERY_CONSUME_TIME_SPAN, fields)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    spans = fastjson.loads(reply.body)["consumeTimeSpanSet"]
    assert len(spans) == broker.topics.get("Orders").write_queue_nums
    by_queue = {span["messageQueue"]["queueId"]: span for span in spans}
    assert by_queue[0]["messageQueue"] == {
        "brokerName": "broker-a",
        "queueId": 0,
        "topic": "Orders",
    }
    first, second = by_queue[0], by_queue[1]
    stats = await call(client, broker, R.GET_TOPIC_STATS_INFO, {"topic": "Orders"})
    last_stored = fastjson.loads(stats.body)["offsetTable"][queue_key("Orders", 0)]
    assert first["maxTimeStamp"] == last_stored["lastUpdateTimestamp"]
    assert 1_600_000_000_000 < first["minTimeStamp"] <= first["maxTimeStamp"]
    assert first["consumeTimeStamp"] == first["minTimeStamp"]  # message 0 was consumed
    now = int(time.time() * 1000)
    assert 20 <= first["delayTime"] <= now - first["minTimeStamp"]
    assert second["delayTime"] == 0
    assert second["consumeTimeStamp"] == second["maxTimeStamp"] > 0
    empty = by_queue[2]
    assert (empty["minTimeStamp"], empty["maxTimeStamp"], empty["delayTime"]) == (0, 0, 0)
    # the formatted forms Java's QueueTimeSpan getters add, in the broker's local time
    stamp = first["minTimeStamp"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d#\d\d:\d\d:\d\d:\d{3}", first["minTimeStampStr"])
    local = datetime.fromtimestamp(stamp // 1000).strftime("%Y-%m-%d#%H:%M:%S")
    assert first["minTimeStampStr"] == f"{local}:{stamp % 1000:03d}"
    missing = await call(
        client, broker, R.QUERY_CONSUME_TIME_SPAN, {"topic": "Nope", "group": "CG"}
    )
    assert (missing.code, missing.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[Nope] not exist")


async def test_system_topic_list_from_broker(broker, client):
    reply = await call(client, broker, R.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
    assert reply.code == ResponseCode.SUCCESS
    assert b"brokerAddr" not in reply.body
    topics = TopicList.decode(reply.body).topic_list
    assert topics == sorted(topics)
    for topic in (
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "OFFSET_MOVED_EVENT",
    ):
        assert topic in topics
    assert "Orders" not in topics and "broker-a" not in topics


async def test_broker_config_get_update_and_persist(broker, client, tmp_path):
    before = await call(client, broker, R.GET_BROKER_CONFIG)
    assert before.code == ResponseCode.SUCCESS
    values = parse_properties(before.body.decode())
    assert values["brokerName"] == "broker-a"
    assert values["longPollingEnable"] == "true"
    version = DataVersion.from_json(fastjson.loads(before.ext_fields["version"]))
    saved = tmp_path / "conf" / "broker.properties"
    broker.config.broker_config_path = str(saved)
    body = b"# from mqadmin\nlongPollingEnable=false\nautoCreateSubscriptionGroup = false\n"
    updated = await call(client, broker, R.UPDATE_BROKER_CONFIG, body=body)
    assert updated.code == ResponseCode.SUCCESS, updated.remark
    assert broker.config.long_polling_enable is False
    assert broker.groups.auto_create is False  # the copy the group table keeps follows
    after = await call(client, broker, R.GET_BROKER_CONFIG)
    assert "longPollingEnable=false\n" in after.body.decode()
    assert DataVersion.from_json(fastjson.loads(after.ext_fields["version"])).counter == (
        version.counter + 1
    )
    # the file keeps every key; the answer leaves the secrets (passwords, credentials) out
    secrets = broker.config.secret_keys()
    assert {"tls.server.keyPassword", "innerClientAuthenticationCredentials"} <= secrets
    shown = parse_properties(after.body.decode())
    assert not secrets & shown.keys()
    kept = parse_properties(saved.read_text())
    assert {key: value for key, value in kept.items() if key not in secrets} == shown


async def test_broker_config_update_refusals_name_the_key(broker, client):
    broker.config.config_black_list = "configBlackList;brokerConfigPath;regionId"
    cases = [
        (b"brokerConfigPath=/tmp/x", ResponseCode.NO_PERMISSION, "brokerConfigPath"),
        (b"rocketmqHome=/opt", ResponseCode.NO_PERMISSION, "rocketmqHome"),
        (b"configBlackList=", ResponseCode.NO_PERMISSION, "configBlackList"),
        (b"regionId=Elsewhere", ResponseCode.NO_PERMISSION, "regionId"),
        (b"listenPort=1", ResponseCode.NO_PERMISSION, "listenPort"),
        (b"noSuchKey=1", ResponseCode.SYSTEM_ERROR, "noSuchKey"),
        (b"maxMessageSize=big", ResponseCode.SYSTEM_ERROR, "maxMessageSize must be an integer"),
        (b"traceOn=maybe", ResponseCode.SYSTEM_ERROR, "traceOn must be true or false"),
        (b"brokerPermission=-1", ResponseCode.SYSTEM_ERROR, "brokerPermission must be"),
        # read at startup only: refused, whatever the value
        (b"flushDiskType=SYNC_FLUSH", ResponseCode.NO_PERMISSION, "startup only: flushDiskType"),
        # all or nothing: the good key of a refused update is not applied either
        (b"longPollingEnable=false\nmaxMessageSize=big", ResponseCode.SYSTEM_ERROR, "maxMessage"),
    ]
    for body, code, remark in cases:
        reply = await call(client, broker, R.UPDATE_BROKER_CONFIG, body=body)
        assert reply.code == code, body
        assert remark in reply.remark, (body, reply.remark)
    assert broker.config.long_polling_enable is True
    assert broker.config.flush_disk_type == "ASYNC_FLUSH"
    assert broker.config_version.counter == 0
    assert broker.config.listen_port == int(broker.address.rsplit(":", 1)[1])


async def test_clone_group_offset(broker, client):
    for topic in ("Orders", "Other"):
        await call(client, broker, R.UPDATE_AND_CREATE_TOPIC, create_topic(topic))
    broker.offsets.commit("Src", "Orders", 0, 2)
    broker.offsets.commit("Src", "Orders", 1, 1)
    broker.offsets.commit("Src", "Other", 0, 5)
    broker.offsets.commit("Src", "Gone", 0, 7)  # offsets of a topic deleted since

    def clone(dest, topic=None, offline=False):
        header = CloneGroupOffsetRequestHeader(
            src_group="Src", dest_group=dest, topic=topic, offline=offline
        )
        return call(client, broker, R.CLONE_GROUP_OFFSET, header.to_ext_fields())

    assert (await clone("One", "Orders")).code == ResponseCode.SUCCESS
    assert broker.offsets.offsets("One", "Orders") == {0: 2, 1: 1}
    assert broker.offsets.topics_of("One") == ["Orders"]
    await clone("All")
    assert broker.offsets.topics_of("All") == ["Orders", "Other"]
    assert broker.offsets.offsets("All", "Other") == {0: 5}
    # an online source group lends only the topics it subscribes to, unless offline
    beat = HeartbeatData(
        "c@1", consumers=[ConsumerData("Src", subscriptions=[SubscriptionData("Orders", "*")])]
    )
    await call(client, broker, R.HEART_BEAT, body=beat.encode())
    await clone("Online")
    assert broker.offsets.topics_of("Online") == ["Orders"]
    await clone("Offline", offline=True)
    assert broker.offsets.topics_of("Offline") == ["Orders", "Other"]
    assert broker.offsets.offsets("Src", "Orders") == {0: 2, 1: 1}  # the source is untouched
    missing = await call(client, broker, R.CLONE_GROUP_OFFSET, {"srcGroup": "Src"})
    assert missing.code == ResponseCode.SYSTEM_ERROR and "destGroup" in missing.remark


async def test_one_topic_and_one_subscription_group_config(broker, client):
    await call(client, broker, R.UPDATE_AND_CREATE_TOPIC, create_topic("Admin", 3, perm=4))
    reply = await call(client, broker, R.GET_TOPIC_CONFIG, {"topic": "Admin"})
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    config = TopicConfig.from_json(fastjson.loads(reply.body))
    assert config == TopicConfig("Admin", 3, 3, 4)
    everything = await call(client, broker, R.GET_ALL_TOPIC_CONFIG)
    assert (
        fastjson.loads(reply.body) == fastjson.loads(everything.body)["topicConfigTable"]["Admin"]
    )
    unknown = await call(client, broker, R.GET_TOPIC_CONFIG, {"topic": "Nope"})
    assert (unknown.code, unknown.remark) == (
        ResponseCode.TOPIC_NOT_EXIST,
        "No topic in this broker. topic: Nope",
    )

    group = SubscriptionGroupConfig("AdminGroup", retry_max_times=5, consume_enable=False)
    body = fastjson.dumps(group.to_json())
    await call(client, broker, R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
    reply = await call(client, broker, R.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "AdminGroup"})
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert SubscriptionGroupConfig.from_json(fastjson.loads(reply.body)) == group
    groups = await call(client, broker, R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    table = fastjson.loads(groups.body)["subscriptionGroupTable"]
    assert fastjson.loads(reply.body) == table["AdminGroup"]
    unknown = await call(client, broker, R.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "NoGroup"})
    assert unknown.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert "NoGroup" in unknown.remark
    assert "NoGroup" not in broker.groups.table  # a read creates nothing
