"""fastjson's two forms, written and read (ROUTE.md §1.1, CODES.md §5.3)."""

from __future__ import annotations

import pytest

from rocketmq_core.protocol import fastjson
from rocketmq_core.protocol.bodies import BrokerData, QueueData, TopicRouteData

ROUTE = TopicRouteData(
    queue_datas=[QueueData("broker-a", 4, 4, 6, 0)],
    broker_datas=[BrokerData("DefaultCluster", "broker-a", {0: "192.168.0.1:10911"})],
)


def test_route_for_old_clients_matches_the_java_bytes():
    # the 5.x name server's answer to a client < 4.9.4, from ROUTE.md §1.1
    assert ROUTE.encode(standard=False) == (
        b'{"brokerDatas":[{"brokerAddrs":{0:"192.168.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},'
        b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,'
        b'"topicSysFlag":0,"writeQueueNums":4}]}'
    )


def test_route_for_new_clients_matches_the_java_bytes():
    assert ROUTE.encode(standard=True) == (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"192.168.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},'
        b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,'
        b'"topicSysFlag":0,"writeQueueNums":4}]}'
    )


def test_standard_form_sorts_maps_escapes_non_ascii_and_quotes_big_longs():
    value = {"b": {10: "x", 2: "y"}, "a": "名", "n": 2**60, "m": -(2**53) + 1}
    assert fastjson.dumps(value, standard=True) == (
        b'{"a":"\\u540d","b":{"2":"y","10":"x"},"m":-9007199254740991,"n":"1152921504606846976"}'
    )
    # Java's default form keeps insertion order, raw UTF-8 and plain numbers
    assert fastjson.dumps(value, standard=False) == (
        '{"b":{10:"x",2:"y"},"a":"名","n":1152921504606846976,"m":-9007199254740991}'.encode()
    )


def test_both_route_forms_read_back():
    for standard in (True, False):
        assert TopicRouteData.decode(ROUTE.encode(standard=standard)) == ROUTE


def test_lenient_reader_takes_bare_and_object_keys():
    text = (
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"maxOffset":5}},'
        b"1:[true,null]}"
    )
    value = fastjson.loads(text)
    key = (("brokerName", "b"), ("queueId", 0), ("topic", "T"))
    assert value == {"offsetTable": {key: {"maxOffset": 5}}, 1: [True, None]}


def test_lenient_reader_takes_escapes_and_numbers():
    assert fastjson.loads('{0:"a\\"b\\u0041", -1:1.5e2}') == {0: 'a"bA', -1: 150.0}


@pytest.mark.parametrize("bad", [b"{0:", b'{"a" 1}', b"[1,,2]", b"{0:1} x", b"", b"{@:1}"])
def test_lenient_reader_reports_where_it_failed(bad):
    with pytest.raises(ValueError, match=r"invalid JSON at character \d+"):
        fastjson.loads(bad)


def test_writer_refuses_what_json_cannot_carry():
    with pytest.raises(TypeError):
        fastjson.dumps({(1, 2): "tuple key"})
    with pytest.raises(TypeError):
        fastjson.dumps(object())


@pytest.mark.parametrize(
    "body",
    [
        b" " * 4090 + b"[" * 64 + b"]" * 64,  # deepest point across a chunk boundary
        b"[" + b"[]," * 300_000 + b"[]]",  # many brackets, shallow
        b'["' + b"[" * 10_000 + b'"]',  # brackets inside a string do not count
    ],
)
def test_depth_check_accepts_shallow_bodies_of_any_size(body):
    fastjson.check_depth(body)


@pytest.mark.parametrize(
    "body",
    [
        b"[" * (4 << 20),
        b" " * 4090 + b"[" * 65 + b"]" * 65,
        b'{"a": "[", "b":' + b"[" * 65 + b"]" * 65 + b"}",
    ],
)
def test_depth_check_refuses_bodies_nested_too_deep(body):
    with pytest.raises(fastjson.JsonError, match="more than 64 levels deep"):
        fastjson.check_depth(body)
