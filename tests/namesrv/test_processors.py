"""Every name-server processor, through a real RemotingClient over TCP."""

from __future__ import annotations

import zlib

import orjson
import pytest

from rocketmq_core.namesrv.server import NameServer
from rocketmq_core.protocol.bodies import (
    ClusterInfo,
    DataVersion,
    KVTable,
    QueueData,
    TopicList,
    TopicRouteData,
)
from rocketmq_core.protocol.codes import VERSION_V3_1_8, RequestCode, ResponseCode
from rocketmq_core.protocol.constants import ORDER_TOPIC_CONFIG_NAMESPACE
from rocketmq_core.protocol.headers import (
    BrokerIdentityRequestHeader,
    GetRouteInfoRequestHeader,
    PutKVConfigRequestHeader,
)
from rocketmq_core.testing.namesrv import namesrv_config, register_broker_request

pytestmark = pytest.mark.anyio

A, A_SLAVE, B = "127.0.0.1:10911", "127.0.0.2:10911", "127.0.0.3:10911"
R = RequestCode


def identity(addr=A, name="broker-a", broker_id=0, cluster="DefaultCluster"):
    return BrokerIdentityRequestHeader(
        broker_name=name, broker_addr=addr, cluster_name=cluster, broker_id=broker_id
    )


async def route(call, topic, **options):
    return await call(R.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic), **options)


async def test_route_after_registration_in_both_json_forms(call):
    ok = await call.send(register_broker_request(broker_addr=A, topics={"T": 4, "TBW102": 8}))
    assert ok.code == ResponseCode.SUCCESS

    modern = await route(call, "T")
    assert modern.code == ResponseCode.SUCCESS
    assert orjson.loads(modern.body)["brokerDatas"][0]["brokerAddrs"] == {"0": A}

    old_client = await route(call, "T", version=VERSION_V3_1_8)
    assert b'"brokerAddrs":{0:"127.0.0.1:10911"}' in old_client.body
    assert TopicRouteData.decode(old_client.body) == TopicRouteData.decode(modern.body)

    asked_standard = await call(
        R.GET_ROUTEINFO_BY_TOPIC,
        GetRouteInfoRequestHeader(topic="T", accept_standard_json_only=True),
        version=VERSION_V3_1_8,
    )
    assert asked_standard.body == modern.body


async def test_unknown_topic_is_topic_not_exist_with_empty_body(call):
    missing = await route(call, "NoSuchTopic")
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    assert "No topic route info in name server for the topic: NoSuchTopic" in missing.remark
    assert missing.body == b""


async def test_slave_gets_master_and_ha_addresses(call):
    await call.send(register_broker_request(broker_addr=A, ha_server_addr="127.0.0.1:10912"))
    reply = await call.send(register_broker_request(broker_addr=A_SLAVE, broker_id=1))
    assert reply.ext_fields == {"masterAddr": A, "haServerAddr": "127.0.0.1:10912"}
    master_reply = await call.send(register_broker_request(broker_addr=A))
    assert not master_reply.ext_fields


async def test_compressed_registration_with_crc(call):
    request = register_broker_request(broker_addr=A, topics={"Z": 2}, compressed=True)
    request.ext_fields["bodyCrc32"] = str(zlib.crc32(request.body) & 0x7FFFFFFF)
    assert (await call.send(request)).code == ResponseCode.SUCCESS
    body = TopicRouteData.decode((await route(call, "Z")).body)
    assert body.queue_datas == [QueueData("broker-a", 2, 2, 6, 0)]


async def test_damaged_or_malformed_registrations_are_refused_and_the_connection_lives(call):
    damaged = register_broker_request(broker_addr=A, topics={"Z": 2})
    damaged.ext_fields["bodyCrc32"] = "12345"
    reply = await call.send(damaged)
    assert reply.code == ResponseCode.SYSTEM_ERROR and "crc32 not match" in reply.remark

    garbage = register_broker_request(broker_addr=A)
    garbage.body = b"{not json"
    reply = await call.send(garbage)
    assert reply.code == ResponseCode.SYSTEM_ERROR and "not JSON" in reply.remark

    headless = await call(R.REGISTER_BROKER, {"brokerName": "b"})
    assert headless.code == ResponseCode.SYSTEM_ERROR
    assert "<brokerAddr> is null" in headless.remark

    assert (await route(call, "Z")).code == ResponseCode.TOPIC_NOT_EXIST  # nothing half-applied
    assert (await call.send(register_broker_request(broker_addr=A))).code == ResponseCode.SUCCESS


async def test_unregister_removes_the_route(call):
    await call.send(register_broker_request(broker_addr=A, topics={"T": 4}))
    assert (await call(R.UNREGISTER_BROKER, identity())).code == ResponseCode.SUCCESS
    assert (await route(call, "T")).code == ResponseCode.TOPIC_NOT_EXIST


async def test_query_data_version_and_heartbeat(call, namesrv):
    await call.send(register_broker_request(broker_addr=A, version=DataVersion(5, 50)))
    same = await call(R.QUERY_DATA_VERSION, identity(), DataVersion(5, 50).encode())
    assert same.ext_fields["changed"] == "false"
    assert DataVersion.from_json(orjson.loads(same.body)) == DataVersion(5, 50)
    newer = await call(R.QUERY_DATA_VERSION, identity(), DataVersion(6, 60).encode())
    assert newer.ext_fields["changed"] == "true"
    unknown = await call(R.QUERY_DATA_VERSION, identity(addr=B), DataVersion(1, 1).encode())
    assert unknown.ext_fields["changed"] == "true" and unknown.body == b""

    before = namesrv.routes.live[A].last_update
    heartbeat = await call(
        R.BROKER_HEARTBEAT, {"clusterName": "DefaultCluster", "brokerAddr": A, "brokerName": "a"}
    )
    assert heartbeat.code == ResponseCode.SUCCESS
    assert namesrv.routes.live[A].last_update >= before


async def test_cluster_info_and_topic_lists(call):
    await call.send(register_broker_request(broker_addr=A, topics={"T": 4}, cluster="C1"))
    await call.send(
        register_broker_request(broker_addr=B, broker_name="b", topics={"U": 1}, cluster="C2")
    )
    info = ClusterInfo.decode((await call(R.GET_BROKER_CLUSTER_INFO)).body)
    assert info.cluster_addr_table == {"C1": ["broker-a"], "C2": ["b"]}
    assert info.broker_addr_table["b"].broker_addrs == {0: B}

    everything = TopicList.decode((await call(R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body)
    assert sorted(everything.topic_list) == ["T", "U"]
    by_cluster = await call(R.GET_TOPICS_BY_CLUSTER, {"cluster": "C2"})
    assert TopicList.decode(by_cluster.body).topic_list == ["U"]
    system = TopicList.decode((await call(R.GET_SYSTEM_TOPIC_LIST_FROM_NS)).body)
    assert system.topic_list == ["C1", "broker-a", "C2", "b"]
    assert system.broker_addr == A
    for code in (
        R.GET_UNIT_TOPIC_LIST,
        R.GET_HAS_UNIT_SUB_TOPIC_LIST,
        R.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
    ):
        assert TopicList.decode((await call(code)).body).topic_list == []


async def test_topic_lists_can_be_disabled(call):
    update = await call(
        R.UPDATE_NAMESRV_CONFIG, body=b"enableAllTopicList=false\nenableTopicList=false\n"
    )
    assert update.code == ResponseCode.SUCCESS
    for code, fields in (
        (R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, None),
        (R.GET_TOPICS_BY_CLUSTER, {"cluster": "C"}),
        (R.GET_UNIT_TOPIC_LIST, None),
    ):
        refused = await call(code, fields)
        assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_ERROR, "disable")


async def test_delete_and_register_topic(call):
    await call.send(register_broker_request(broker_addr=A, topics={"T": 4}))
    deleted = await call(R.DELETE_TOPIC_IN_NAMESRV, {"topic": "T"})
    assert deleted.code == ResponseCode.SUCCESS
    assert (await route(call, "T")).code == ResponseCode.TOPIC_NOT_EXIST

    body = TopicRouteData(queue_datas=[QueueData("broker-a", 3, 3, 6), QueueData("gone", 1, 1, 6)])
    await call(R.REGISTER_TOPIC_IN_NAMESRV, {"topic": "NEW"}, body.encode())
    registered = TopicRouteData.decode((await route(call, "NEW")).body)
    assert registered.queue_datas == [QueueData("broker-a", 3, 3, 6)]  # unknown brokers skipped


async def test_wipe_and_add_write_permission(call):
    await call.send(register_broker_request(broker_addr=A, topics={"T": 4, "U": 4}))
    wiped = await call(R.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert wiped.ext_fields == {"wipeTopicCount": "2"}
    perms = {q.perm for q in TopicRouteData.decode((await route(call, "T")).body).queue_datas}
    assert perms == {4}
    added = await call(R.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert added.ext_fields == {"addTopicCount": "2"}


async def test_broker_member_group(call):
    await call.send(register_broker_request(broker_addr=A))
    await call.send(register_broker_request(broker_addr=A_SLAVE, broker_id=1))
    group = await call(
        R.GET_BROKER_MEMBER_GROUP, {"clusterName": "DefaultCluster", "brokerName": "broker-a"}
    )
    assert orjson.loads(group.body) == {
        "brokerAddrs": {"0": A, "1": A_SLAVE},
        "brokerName": "broker-a",
        "cluster": "DefaultCluster",
    }


async def test_kv_config_round_trip_and_persistence(call, namesrv, tmp_path, plugin_host):
    put = PutKVConfigRequestHeader(namespace="NS", key="k1", value="v1")
    assert (await call(R.PUT_KV_CONFIG, put)).code == ResponseCode.SUCCESS
    await call(R.PUT_KV_CONFIG, PutKVConfigRequestHeader(namespace="NS", key="k2", value="v2"))
    got = await call(R.GET_KV_CONFIG, {"namespace": "NS", "key": "k1"})
    assert (got.code, got.ext_fields) == (ResponseCode.SUCCESS, {"value": "v1"})
    listed = await call(R.GET_KVLIST_BY_NAMESPACE, {"namespace": "NS"})
    assert KVTable.decode(listed.body).table == {"k1": "v1", "k2": "v2"}

    on_disk = orjson.loads((tmp_path / "kvConfig.json").read_bytes())
    assert on_disk == {"configTable": {"NS": {"k1": "v1", "k2": "v2"}}}

    assert (await call(R.DELETE_KV_CONFIG, {"namespace": "NS", "key": "k1"})).code == 0
    missing = await call(R.GET_KV_CONFIG, {"namespace": "NS", "key": "k1"})
    assert missing.code == ResponseCode.QUERY_NOT_FOUND
    assert missing.remark == "No config item, Namespace: NS Key: k1"
    empty = await call(R.GET_KVLIST_BY_NAMESPACE, {"namespace": "none"})
    assert (empty.code, empty.remark) == (
        ResponseCode.QUERY_NOT_FOUND,
        "No config item, Namespace: none",
    )

    # a new name server on the same file has the same table
    restarted = NameServer(namesrv_config(tmp_path), host=plugin_host)
    restarted.kv.load()
    assert restarted.kv.table == {"NS": {"k2": "v2"}}


async def test_order_topic_config_reaches_brokers_and_routes(call):
    await call(
        R.PUT_KV_CONFIG,
        PutKVConfigRequestHeader(
            namespace=ORDER_TOPIC_CONFIG_NAMESPACE, key="T", value="broker-a:4"
        ),
    )
    registered = await call.send(register_broker_request(broker_addr=A, topics={"T": 4}))
    assert KVTable.decode(registered.body).table == {"T": "broker-a:4"}
    assert TopicRouteData.decode((await route(call, "T")).body).order_topic_conf is None

    await call(R.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true")
    assert TopicRouteData.decode((await route(call, "T")).body).order_topic_conf == "broker-a:4"


async def test_namesrv_config_update_get_and_refusals(call, tmp_path):
    updated = await call(R.UPDATE_NAMESRV_CONFIG, body=b"brokerChannelExpiredTime=30000\n")
    assert updated.code == ResponseCode.SUCCESS
    text = (await call(R.GET_NAMESRV_CONFIG)).body.decode()
    assert "brokerChannelExpiredTime=30000\n" in text
    assert "brokerChannelExpiredTime=30000\n" in (tmp_path / "namesrv.properties").read_text()

    black = await call(R.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/tmp/elsewhere")
    assert black.code == ResponseCode.NO_PERMISSION
    assert "kvConfigPath" in black.remark
    bad = await call(R.UPDATE_NAMESRV_CONFIG, body=b"listenPort=many")
    assert bad.code == ResponseCode.SYSTEM_ERROR
    assert "listenPort must be an integer" in bad.remark
    # a typo is refused, and the good key beside it is not applied either
    typo = b"orderMessageEnable=true\nenableTopicLst=false"
    refused = await call(R.UPDATE_NAMESRV_CONFIG, body=typo)
    assert refused.code == ResponseCode.SYSTEM_ERROR
    assert "enableTopicLst" in refused.remark
    assert "orderMessageEnable=false\n" in (await call(R.GET_NAMESRV_CONFIG)).body.decode()


async def test_unknown_request_code(call):
    reply = await call(9999)
    assert reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
