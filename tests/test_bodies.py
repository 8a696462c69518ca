"""Name-server bodies: registration (plain and compressed), routes, lists."""

from __future__ import annotations

import struct
import zlib

import pytest

from rocketmq_core.errors import BodyError
from rocketmq_core.protocol.bodies import (
    ClusterInfo,
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigWrapper,
    TopicList,
)

BODY = RegisterBrokerBody(
    TopicConfigWrapper(
        {
            "TopicTest": TopicConfig("TopicTest", 8, 8, 6),
            "TBW102": TopicConfig("TBW102", 8, 8, 7, attributes={"+message.type": "NORMAL"}),
        },
        DataVersion(counter=3, timestamp=1700000000000, state_version=0),
    ),
    ["10.0.0.9:30000"],
)


@pytest.mark.parametrize("compressed", [False, True])
def test_register_body_round_trips(compressed):
    assert RegisterBrokerBody.decode(BODY.encode(compressed), compressed) == BODY


def test_java_4_9_register_body_is_read():
    # as a 4.9 broker sends it: no attributes, no stateVersion
    data = (
        b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":2,'
        b'"timestamp":1690000000000},"topicConfigTable":{"T":{"order":false,"perm":6,'
        b'"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,'
        b'"writeQueueNums":4}}}}'
    )
    body = RegisterBrokerBody.decode(data)
    assert body.topic_config_wrapper.data_version == DataVersion(2, 1690000000000)
    assert body.topic_config_wrapper.topic_configs["T"] == TopicConfig("T", 4, 4, 6)


def test_compressed_body_without_attributes_part():
    # a 4.9 broker's compressed form: "name read write perm filterType", no 6th field
    def sized(data: bytes) -> bytes:
        return struct.pack(">i", len(data)) + data

    raw = (
        sized(b'{"counter":1,"timestamp":5}')
        + struct.pack(">i", 1)
        + sized(b"T 4 2 6 SINGLE_TAG")
        + sized(b"[]")
    )
    body = RegisterBrokerBody.decode(zlib.compress(raw), compressed=True)
    assert body.topic_config_wrapper.topic_configs == {"T": TopicConfig("T", 4, 2, 6)}
    assert body.topic_config_wrapper.data_version == DataVersion(1, 5)


def test_pre_3_0_11_broker_sends_the_bare_wrapper():
    data = b'{"dataVersion":{"counter":1,"timestamp":1},"topicConfigTable":{}}'
    assert RegisterBrokerBody.decode(data) == RegisterBrokerBody(
        TopicConfigWrapper({}, DataVersion(1, 1))
    )


@pytest.mark.parametrize(
    ("data", "compressed", "message"),
    [
        (b"not json", False, "not JSON"),
        (b"[]", False, "not a JSON object"),
        (
            b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":"x"}}}}',
            False,
            "perm is not an integer",
        ),
        (b"garbage", True, "not zlib"),
        (zlib.compress(b"\x00\x00\x00\x10{}"), True, "declares 16 bytes"),
        (zlib.compress(b"\x00\x00"), True, "ends inside a length"),
        (zlib.compress(b"\xff\xff\xff\xff"), True, "negative length"),
    ],
)
def test_bad_register_bodies_say_what_is_wrong(data, compressed, message):
    with pytest.raises(BodyError, match=message):
        RegisterBrokerBody.decode(data, compressed)


def test_lists_and_tables_encode_as_java_does():
    assert TopicList(["A", "B"]).encode() == b'{"topicList":["A","B"]}'
    assert TopicList(["A"], "1.2.3.4:10911").encode() == (
        b'{"brokerAddr":"1.2.3.4:10911","topicList":["A"]}'
    )
    assert KVTable({"k": "v"}).encode() == b'{"table":{"k":"v"}}'
    assert KVTable.decode(b'{"table":{"k":"v"}}') == KVTable({"k": "v"})


def test_cluster_info_uses_bare_keys_and_reads_back():
    from rocketmq_core.protocol.bodies import BrokerData

    info = ClusterInfo(
        {"broker-a": BrokerData("C", "broker-a", {0: "1.1.1.1:1", 1: "1.1.1.2:1"})},
        {"C": ["broker-a"]},
    )
    data = info.encode()
    assert b'{0:"1.1.1.1:1",1:"1.1.1.2:1"}' in data
    assert ClusterInfo.decode(data) == info


def test_old_field_name_topic_syn_flag_is_read():
    from rocketmq_core.protocol.bodies import QueueData

    queue = QueueData.from_json(
        {"brokerName": "b", "perm": 6, "readQueueNums": 1, "writeQueueNums": 1, "topicSynFlag": 2}
    )
    assert queue.topic_sys_flag == 2
