"""PullConsumer and LitePullConsumer against a real broker."""

from __future__ import annotations

import time

import anyio
import pytest

from rocketmq_core.client.consumer_requests import ConsumerError, PullStatus
from rocketmq_core.client.message import Message
from rocketmq_core.client.producer import Producer
from rocketmq_core.client.pull_consumer import LitePullConsumer, PullConsumer
from rocketmq_core.protocol.heartbeat import MessageQueue

from .conftest import TOPIC

pytestmark = pytest.mark.anyio
TRANSPORTS = ("tcp", "quic")  # every test that takes a cluster runs over both

Q0 = MessageQueue(TOPIC, "broker-a", 0)


async def fill(namesrv: str, count: int, queue: MessageQueue = Q0, **fields) -> list:
    async with Producer("PG", namesrv) as producer:
        return [
            await producer.send(Message(TOPIC, f"m{i}".encode(), **fields), queue=queue)
            for i in range(count)
        ]


async def test_pull_answers_each_status(namesrv):
    await fill(namesrv, 3, tags="A")
    async with PullConsumer("CG", namesrv) as consumer:
        assert await consumer.queues(TOPIC) == [
            MessageQueue(TOPIC, "broker-a", i) for i in range(4)
        ]
        found = await consumer.pull(Q0, 0, max_nums=2)
        assert found.status is PullStatus.FOUND
        assert [m.body for m in found.messages] == [b"m0", b"m1"]
        assert found.next_begin_offset == 2 and (found.min_offset, found.max_offset) == (0, 3)
        assert found.messages[0].properties["MAX_OFFSET"] == "3"
        assert (await consumer.pull(Q0, 3)).status is PullStatus.NO_NEW_MSG
        assert (await consumer.pull(Q0, 0, expression="B")).status is PullStatus.NO_MATCHED_MSG
        assert (await consumer.pull(Q0, 50)).status is PullStatus.OFFSET_ILLEGAL
        with pytest.raises(ConsumerError, match="at least 0"):
            await consumer.pull(Q0, -1)
        assert (await consumer.min_offset(Q0), await consumer.max_offset(Q0)) == (0, 3)
        assert await consumer.search_offset(Q0, 0) == 0
        assert await consumer.committed_offset(Q0) == -1
        await consumer.commit(Q0, 2)
        assert await consumer.committed_offset(Q0) == 2


async def test_a_waiting_pull_returns_when_a_message_arrives(namesrv):
    async with PullConsumer("CG", namesrv) as consumer:
        await consumer.queues(TOPIC)
        result = None

        async def wait_for_one():
            nonlocal result
            result = await consumer.pull(Q0, 0, wait=10)

        started = time.monotonic()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(wait_for_one)
            await anyio.sleep(0.3)
            await fill(namesrv, 1)
        assert result is not None and [m.body for m in result.messages] == [b"m0"]
        assert time.monotonic() - started < 5, "the held pull was not woken by the message"


async def test_lite_pull_iterates_and_auto_commits(namesrv):
    await fill(namesrv, 6)
    consumer = LitePullConsumer("CG", namesrv, consume_from="first", auto_commit_interval=0.1)
    consumer.subscribe(TOPIC)
    bodies = []
    async with consumer:
        async for message in consumer:
            bodies.append(message.body)
            if len(bodies) == 6:
                break
        assert consumer.committed(Q0) == 6
    assert bodies == [f"m{i}".encode() for i in range(6)]
    async with PullConsumer("CG", namesrv) as checker:
        assert await checker.committed_offset(Q0) == 6


async def test_lite_pull_assign_seek_and_manual_commit(namesrv):
    sent = await fill(namesrv, 5)
    q1 = MessageQueue(TOPIC, "broker-a", 1)
    await fill(namesrv, 2, queue=q1)
    consumer = LitePullConsumer("CG", namesrv, consume_from="first", auto_commit=False)
    consumer.assign([Q0])
    async with consumer:
        assert set(consumer.queues) == {Q0}
        first = await consumer.poll(timeout=5)
        assert [m.body for m in first] == [f"m{i}".encode() for i in range(5)]
        await consumer.seek(Q0, 3)
        assert [m.body for m in await consumer.poll(timeout=5)] == [b"m3", b"m4"]
        await consumer.seek_to_begin(Q0)
        assert (await consumer.poll(timeout=5))[0].body == b"m0"
        await consumer.seek_to_timestamp(Q0, sent[2].queue_offset and 0)
        await consumer.seek_to_end(Q0)
        assert await consumer.poll(timeout=0.3) == []
        with pytest.raises(ConsumerError, match="outside"):
            await consumer.seek(Q0, 99)
        with pytest.raises(ConsumerError, match="not assigned"):
            await consumer.seek(q1, 0)
        await consumer.commit({Q0: 4})
    async with PullConsumer("CG", namesrv) as checker:
        assert await checker.committed_offset(Q0) == 4
        assert await checker.committed_offset(q1) == -1
