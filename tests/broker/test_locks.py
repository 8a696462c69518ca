"""Orderly consumers' queue locks: the table, and LOCK/UNLOCK_BATCH_MQ over TCP."""

from __future__ import annotations

import pytest

from rocketmq_core.broker.app import Broker
from rocketmq_core.broker.locks import LOCK_MAX_LIVE_MS, QueueLockTable
from rocketmq_core.protocol import fastjson
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.heartbeat import (
    LockBatchRequest,
    LockBatchResponse,
    MessageQueue,
)
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.testing.broker import broker_config

Q0, Q1, Q2 = (MessageQueue("Orders", "broker-a", n) for n in range(3))


def test_a_queue_belongs_to_one_client_until_it_unlocks():
    table = QueueLockTable()
    assert table.lock("G", "c1", [Q0, Q1], now=0) == [Q0, Q1]
    assert table.lock("G", "c2", [Q1, Q2], now=1) == [Q2]
    assert table.holder("G", Q1, now=1) == "c1"
    table.unlock("G", "c2", [Q1])  # not c2's: nothing happens
    assert table.holder("G", Q1, now=1) == "c1"
    table.unlock("G", "c1", [Q1])
    assert table.lock("G", "c2", [Q1], now=2) == [Q1]


def test_groups_lock_independently():
    table = QueueLockTable()
    assert table.lock("G1", "c1", [Q0], now=0) == [Q0]
    assert table.lock("G2", "c2", [Q0], now=0) == [Q0]


def test_a_lock_not_renewed_for_60_seconds_passes_to_another_client():
    table = QueueLockTable()
    table.lock("G", "c1", [Q0], now=0)
    assert table.lock("G", "c2", [Q0], now=LOCK_MAX_LIVE_MS) == []
    assert table.lock("G", "c1", [Q0], now=LOCK_MAX_LIVE_MS) == [Q0]  # renewed
    later = 2 * LOCK_MAX_LIVE_MS + 1
    assert table.holder("G", Q0, now=later) is None
    assert table.lock("G", "c2", [Q0], now=later) == [Q0]


def test_the_cpp_body_without_only_this_broker_is_read():
    body = (
        b'{"consumerGroup":"G","clientId":"1.2.3.4@9",'
        b'"mqSet":[{"brokerName":"b","queueId":3,"topic":"T"}]}'
    )
    request = LockBatchRequest.decode(body)
    assert request == LockBatchRequest("G", "1.2.3.4@9", [MessageQueue("T", "b", 3)])
    assert LockBatchRequest.decode(request.encode()) == request


@pytest.mark.anyio
async def test_lock_and_unlock_over_tcp(tmp_path, plugin_host):
    async with (
        Broker.serving(broker_config(tmp_path), host=plugin_host) as broker,
        RemotingClient(plugin_host.registry.transports.get("tcp")) as client,
    ):

        async def lock(code, client_id, queues):
            body = LockBatchRequest("CG", client_id, queues).encode()
            return await client.invoke(broker.address, RemotingCommand.request(code, {}, body))

        first = await lock(RequestCode.LOCK_BATCH_MQ, "c1", [Q0, Q1])
        assert first.code == ResponseCode.SUCCESS
        assert LockBatchResponse.decode(first.body).lock_ok_mq_set == [Q0, Q1]
        second = await lock(RequestCode.LOCK_BATCH_MQ, "c2", [Q1, Q2])
        assert LockBatchResponse.decode(second.body).lock_ok_mq_set == [Q2]
        assert fastjson.loads(second.body) == {"lockOKMQSet": [Q2.to_json()]}
        released = await lock(RequestCode.UNLOCK_BATCH_MQ, "c1", [Q1])
        assert released.code == ResponseCode.SUCCESS
        third = await lock(RequestCode.LOCK_BATCH_MQ, "c2", [Q1])
        assert LockBatchResponse.decode(third.body).lock_ok_mq_set == [Q1]
        broken = await client.invoke(
            broker.address, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, {}, b"[1]")
        )
        assert broken.code == ResponseCode.SYSTEM_ERROR
        assert "JSON object" in broken.remark
