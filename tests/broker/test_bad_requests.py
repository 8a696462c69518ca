"""Each crash class the fuzzing found, over TCP against a real broker: the right code,
a remark a person can act on, no traceback in the log, and the connection serves on."""

from __future__ import annotations

import logging

import pytest

from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.message import BatchItem, encode_batch
from rocketmq_core.remoting.bad_requests import MAX_TRACKED, BadRequestLog

from .wire import send_request

pytestmark = pytest.mark.anyio
R = RequestCode
DEEP_ARRAYS = b"[" * 5000 + b"]" * 5000
DEEP_OBJECTS = b'{"a":' * 5000 + b"1" + b"}" * 5000
JSON_BODY_CODES = [
    R.HEART_BEAT,
    R.LOCK_BATCH_MQ,
    R.UNLOCK_BATCH_MQ,
    R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
]


def request(code: int, body: bytes) -> RemotingCommand:
    return RemotingCommand.request(code, {}, body)


@pytest.mark.parametrize(
    ("field", "value", "remark"),
    [
        ("e", str(2**31), "<e> (<queueId>) is out of range for an int32: '2147483648'"),
        ("f", str(-(2**31) - 1), "<f> (<sysFlag>) is out of range for an int32"),
        ("h", str(2**40), "<h> (<flag>) is out of range for an int32"),
        ("g", str(2**63), "<g> (<bornTimestamp>) is out of range for an int64"),
        ("d", "9" * 5000, "<d> (<defaultTopicQueueNums>) is not an integer: '9999"),
    ],
)
async def test_send_header_ints_beyond_their_java_type(
    broker, client, caplog, field, value, remark
):
    bad = send_request()
    bad.ext_fields[field] = value
    reply = await client.invoke(broker.address, bad)
    assert reply.code == ResponseCode.INVALID_PARAMETER
    assert remark in reply.remark and len(reply.remark) < 200
    assert (await client.invoke(broker.address, send_request())).code == ResponseCode.SUCCESS
    assert not [record for record in caplog.records if record.exc_info]


@pytest.mark.parametrize("body", [DEEP_ARRAYS, DEEP_OBJECTS], ids=["arrays", "objects"])
@pytest.mark.parametrize("code", JSON_BODY_CODES, ids=lambda code: R(code).name)
async def test_deeply_nested_json_bodies(broker, client, caplog, code, body):
    reply = await client.invoke(broker.address, request(code, body))
    assert reply.code == ResponseCode.INVALID_PARAMETER
    assert "JSON nested more than 64 levels deep: at most 64 are accepted" in reply.remark
    assert not [record for record in caplog.records if record.exc_info]


@pytest.mark.parametrize("code", JSON_BODY_CODES, ids=lambda code: R(code).name)
async def test_bodies_that_are_not_utf8(broker, client, caplog, code):
    reply = await client.invoke(broker.address, request(code, b'{"clientID":"\xc3\x28"}'))
    assert reply.code == ResponseCode.INVALID_PARAMETER
    assert "not UTF-8 at byte 13" in reply.remark
    assert not [record for record in caplog.records if record.exc_info]


@pytest.mark.parametrize(
    ("code", "body", "remark"),
    [
        (R.HEART_BEAT, b'{"clientID":"c","consumerDataSet":true}', "heartbeat body has a value"),
        (
            R.HEART_BEAT,
            b'{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":5}]}',
            "heartbeat body has a value of the wrong type",
        ),
    ],
)
async def test_json_values_of_the_wrong_type(broker, client, code, body, remark):
    reply = await client.invoke(broker.address, request(code, body))
    assert reply.code == ResponseCode.INVALID_PARAMETER, reply.remark
    assert remark in reply.remark


async def test_a_batch_has_a_maximum_record_count(broker, client):
    def batch(count: int) -> RemotingCommand:
        command = send_request(body=encode_batch([BatchItem(0, b"x", b"")] * count), batch=True)
        command.code = R.SEND_BATCH_MESSAGE
        return command

    refused = await client.invoke(broker.address, batch(100_000), timeout=20)
    assert refused.code == ResponseCode.MESSAGE_ILLEGAL
    assert "more than 10000 messages (maxBatchMessageCount)" in refused.remark
    accepted = await client.invoke(broker.address, batch(10_000), timeout=20)
    assert accepted.code == ResponseCode.SUCCESS, accepted.remark


def test_bad_requests_are_logged_once_per_window_with_a_count(caplog):
    now = [0.0]
    bad = BadRequestLog(logging.getLogger("test.bad"), window=10, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, "test.bad")
    for opaque in range(1000):
        bad.bad_request(f"10.0.0.1:{40000 + opaque % 7}", R.HEART_BEAT, ValueError(opaque))
    assert [record.getMessage() for record in caplog.records] == [
        "bad request from 10.0.0.1:40000: HEART_BEAT: 0"
    ]
    now[0] = 10.5
    bad.bad_request("10.0.0.1:40001", R.LOCK_BATCH_MQ, ValueError("deep"))
    assert [record.getMessage() for record in caplog.records[1:]] == [
        "999 more bad requests from 10.0.0.1:40001 in the last 10 s, last: HEART_BEAT: 999",
        "bad request from 10.0.0.1:40001: LOCK_BATCH_MQ: deep",
    ]


def test_processor_failures_keep_one_traceback_per_window(caplog):
    now = [0.0]
    bad = BadRequestLog(logging.getLogger("test.bug"), window=10, clock=lambda: now[0])
    for attempt in range(50):
        try:
            raise KeyError(attempt)
        except KeyError as exc:
            bad.failure("send_message", R.SEND_MESSAGE, exc)
    now[0] = 11
    bad.failure("send_message", R.SEND_MESSAGE, KeyError("again"))
    tracebacks = [record for record in caplog.records if record.exc_info]
    assert len(tracebacks) == 2
    assert "49 more failures of send_message" in caplog.records[1].getMessage()


def test_beyond_the_hosts_remembered_the_rest_are_counted_together(caplog):
    now = [0.0]
    bad = BadRequestLog(logging.getLogger("test.many"), window=10, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, "test.many")
    hosts = MAX_TRACKED + 500
    for attempt in range(3):
        for host in range(hosts):
            bad.bad_request(f"10.{host // 256}.{host % 256}.1:1", R.HEART_BEAT, ValueError(attempt))
    assert len(bad._peers) == MAX_TRACKED + 1
    assert len(caplog.records) == MAX_TRACKED + 1  # one line each, one for the others
    caplog.clear()
    now[0] = 10.5
    bad.bad_request("10.200.0.1:1", R.HEART_BEAT, ValueError("late"))
    lines = [record.getMessage() for record in caplog.records]
    # the counts of forgotten tallies are logged, not lost
    assert "2 more bad requests from 10.0.0.1 in the last 10 s, last: HEART_BEAT: 2" in lines
    assert "1499 more bad requests from other hosts in the last 10 s, last: HEART_BEAT: 2" in lines
