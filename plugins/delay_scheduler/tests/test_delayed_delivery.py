"""Delay levels and timer messages end to end: our producer sends, a push consumer
receives, through a broker with the delay_scheduler plugin installed."""

from __future__ import annotations

import dataclasses
import random
import time

import anyio
import pytest

from rocketmq_core.client.message import Message, ReceivedMessage
from rocketmq_core.client.producer import Producer
from rocketmq_core.client.push import PushConsumer
from rocketmq_core.errors import ResponseError
from rocketmq_core.protocol import fastjson
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.constants import SCHEDULE_TOPIC
from rocketmq_core.protocol.recall import RecallHandle
from rocketmq_core.remoting.client import RemotingClient

pytestmark = [
    pytest.mark.anyio,
    # the scheduler under test runs in the rocketmq_cluster broker, on asyncio whatever the
    # test's backend; a trio run would only repeat the producer and push consumer, which
    # tests/client runs on both backends
    pytest.mark.parametrize("anyio_backend", ["asyncio"]),
    pytest.mark.rocketmq(message_delay_level="1s 2s 3s"),
]

TOPIC = "Delayed"
LEVEL_MS = {1: 1000, 2: 2000, 3: 3000}
LATE_MS = 1000  # how late a delivery may be, at most


@pytest.fixture
def cluster(rocketmq_cluster):
    rocketmq_cluster.create_topic(TOPIC, queues=2)
    return rocketmq_cluster


class Inbox:
    """A push consumer's messages, by id (duplicates counted)."""

    def __init__(self) -> None:
        self.messages: dict[str, ReceivedMessage] = {}
        self.duplicates = 0

    async def listener(self, messages: list[ReceivedMessage]) -> None:
        for message in messages:
            if message.msg_id in self.messages:
                self.duplicates += 1
            self.messages[message.msg_id] = message

    def __len__(self) -> int:
        return len(self.messages)


def consumer(namesrv: str, inbox: Inbox, group: str = "CG-delay") -> PushConsumer:
    push = PushConsumer(group, namesrv, listener=inbox.listener, consume_from="first")
    push.subscribe(TOPIC)
    return push


async def eventually(condition, timeout: float = 15.0) -> None:
    with anyio.move_on_after(timeout):
        while not condition():
            await anyio.sleep(0.02)
    assert condition(), f"condition still false after {timeout} s"


def now_ms() -> int:
    return int(time.time() * 1000)


async def test_levels_deliver_no_earlier_than_their_delay_and_keep_the_message(cluster):
    inbox = Inbox()
    namesrv = cluster.namesrv_address
    sent = {}
    async with consumer(namesrv, inbox), Producer("PG", namesrv) as producer:
        for level in (1, 2, 3, 9):  # 9 is past the last level: it waits as long as level 3
            message = Message(
                TOPIC, f"L{level}".encode(), tags="TagA", keys=[f"key-{level}"], delay_level=level
            )
            message.properties["origin"] = "test"
            result = await producer.send(message)
            sent[result.msg_id] = min(level, 3)
        await anyio.sleep(0.5)
        assert len(inbox) == 0, "a delayed message arrived at once"
        await eventually(lambda: len(inbox) == 4)
    assert set(inbox.messages) == set(sent)
    for msg_id, message in inbox.messages.items():
        delay = LEVEL_MS[sent[msg_id]]
        assert message.born_timestamp + delay <= message.store_timestamp
        assert message.store_timestamp <= message.born_timestamp + delay + LATE_MS
        assert message.topic == TOPIC and message.tags == "TagA"
        assert message.keys == [f"key-{message.body.decode()[1:]}"]
        assert message.properties["origin"] == "test"
        assert message.properties["REAL_TOPIC"] == TOPIC  # left in place, as RocketMQ does
        assert "DELAY" not in message.properties


async def test_a_timer_message_arrives_at_its_time_never_before(cluster):
    inbox = Inbox()
    namesrv = cluster.namesrv_address
    asked = {}
    async with consumer(namesrv, inbox), Producer("PG", namesrv) as producer:
        for offset_ms in (700, 1300, 1900):
            deliver = now_ms() + offset_ms
            result = await producer.send(
                Message(TOPIC, b"timer", tags="T", deliver_time_ms=deliver)
            )
            asked[result.msg_id] = deliver
        relative = Message(TOPIC, b"in a second", properties={"TIMER_DELAY_SEC": "1"})
        result = await producer.send(relative)
        asked[result.msg_id] = now_ms() + 1000 - 50  # the broker's clock started it a bit earlier
        await eventually(lambda: len(inbox) == 4)
    for msg_id, deliver in asked.items():
        stored = inbox.messages[msg_id].store_timestamp
        assert deliver <= stored <= deliver + LATE_MS, (msg_id, stored - deliver)
        assert "TIMER_OUT_MS" not in inbox.messages[msg_id].properties


async def test_a_timer_already_due_is_delivered_at_once(cluster):
    inbox = Inbox()
    namesrv = cluster.namesrv_address
    async with consumer(namesrv, inbox), Producer("PG", namesrv) as producer:
        await producer.send(Message(TOPIC, b"late", deliver_time_ms=now_ms() - 5000))
        await eventually(lambda: len(inbox) == 1, timeout=3)


@pytest.mark.rocketmq(timer_max_delay_sec=60)
@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"properties": {"TIMER_DELAY_SEC": "61"}}, "timerMaxDelaySec"),
        ({"deliver_time_ms": 2**70}, "timerMaxDelaySec"),  # no overflow: a refusal
        ({"properties": {"TIMER_DELAY_SEC": "soon"}}, "not a whole number"),
    ],
)
async def test_a_timer_beyond_the_max_delay_or_unreadable_is_refused(cluster, fields, says):
    async with Producer("PG", cluster.namesrv_address) as producer:
        with pytest.raises(ResponseError) as refused:
            await producer.send(Message(TOPIC, b"x", **fields))
    assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert says in str(refused.value)


async def test_get_all_delay_offset_reports_each_levels_progress(cluster):
    inbox = Inbox()
    namesrv = cluster.namesrv_address
    async with consumer(namesrv, inbox), Producer("PG", namesrv) as producer:
        for _ in range(3):
            await producer.send(Message(TOPIC, b"x", delay_level=1))
        await eventually(lambda: len(inbox) == 3)
    async with RemotingClient(cluster.host.registry.transports.get("tcp")) as client:
        request = RemotingCommand.request(RequestCode.GET_ALL_DELAY_OFFSET, {})
        reply = await client.invoke(cluster.broker_address, request, timeout=5)
    assert reply.code == ResponseCode.SUCCESS
    assert fastjson.loads(reply.body)["offsetTable"][1] == 3


async def test_clients_may_not_send_to_the_schedule_topic(cluster):
    async with Producer("PG", cluster.namesrv_address) as producer:
        with pytest.raises(Exception, match=r"forbidden|NO_PERMISSION|not exist|route"):
            await producer.send(Message(SCHEDULE_TOPIC, b"x"))


@pytest.mark.rocketmq(store="mmap", message_delay_level="1s 2s 3s")
async def test_ten_thousand_delayed_messages_survive_a_restart_mid_delay(cluster):
    count = 10_000
    namesrv = cluster.namesrv_address
    due: dict[str, int] = {}  # msg id -> earliest allowed store time (or -level)
    rng = random.Random(7)
    limiter = anyio.CapacityLimiter(64)

    async def send_one(producer: Producer, number: int) -> None:
        async with limiter:
            if number % 2:
                level = rng.randint(1, 3)
                result = await producer.send(Message(TOPIC, b"L%d" % number, delay_level=level))
                due[result.msg_id] = -level
            else:
                deliver = now_ms() + rng.randint(1500, 4000)
                result = await producer.send(
                    Message(TOPIC, b"T%d" % number, deliver_time_ms=deliver)
                )
                due[result.msg_id] = deliver

    async with Producer("PG", namesrv) as producer, anyio.create_task_group() as group:
        for number in range(count):
            group.start_soon(send_one, producer, number)
    pending = cluster.broker.services["timer_wheel"].stats()["pending"]
    assert pending > 0, "every timer was delivered before the restart: nothing was tested"
    await anyio.to_thread.run_sync(cluster.restart_broker)
    inbox = Inbox()
    async with consumer(namesrv, inbox, group="CG-restart"):
        await eventually(lambda: len(inbox) >= count, timeout=60)
        await anyio.sleep(0.5)
    assert set(inbox.messages) == set(due), "messages were lost across the restart"
    assert inbox.duplicates == 0
    for msg_id, message in inbox.messages.items():
        earliest = due[msg_id]
        if earliest < 0:
            earliest = message.born_timestamp + LEVEL_MS[-earliest]
        assert message.store_timestamp >= earliest, msg_id


# a third of 0.00025 h is 300 ms: timers further off than that are re-parked as it ends
@pytest.mark.rocketmq(file_reserved_time=0.00025)
async def test_a_timer_beyond_the_roll_window_is_re_parked_and_still_delivered_once(cluster):
    inbox = Inbox()
    namesrv = cluster.namesrv_address
    async with consumer(namesrv, inbox), Producer("PG", namesrv) as producer:
        deliver = now_ms() + 2000  # five windows away: re-parked some times (load permitting)
        result = await producer.send(Message(TOPIC, b"far", deliver_time_ms=deliver))
        await eventually(lambda: len(inbox) == 1)
        await anyio.sleep(0.3)
    stats = cluster.broker.services["timer_wheel"].stats()
    assert stats["rolled"] >= 2 and stats["delivered"] == 1 and stats["pending"] == 0
    message = inbox.messages[result.msg_id]
    assert deliver <= message.store_timestamp <= deliver + LATE_MS
    assert inbox.duplicates == 0
    assert message.properties["TIMER_ROLL_TIMES"] == str(stats["rolled"])


async def test_a_recalled_timer_message_is_never_delivered(cluster):
    inbox = Inbox()
    namesrv = cluster.namesrv_address
    async with consumer(namesrv, inbox), Producer("PG", namesrv) as producer:
        deliver = now_ms() + 1200
        kept = await producer.send(Message(TOPIC, b"kept", deliver_time_ms=deliver))
        recalled = await producer.send(Message(TOPIC, b"recalled", deliver_time_ms=deliver))
        plain = await producer.send(Message(TOPIC, b"plain"))
        assert plain.recall_handle is None  # only timer messages can be recalled
        assert await producer.recall(TOPIC, recalled.recall_handle) == recalled.msg_id
        await eventually(lambda: kept.msg_id in inbox.messages)
        await anyio.sleep(0.5)
        assert set(inbox.messages) == {kept.msg_id, plain.msg_id}
        # once it is due, a handle cannot recall anything
        with pytest.raises(ResponseError) as too_late:
            await producer.recall(TOPIC, kept.recall_handle)
        assert too_late.value.code == ResponseCode.ILLEGAL_OPERATION
        other = RecallHandle.decode(recalled.recall_handle)
        elsewhere = dataclasses.replace(other, topic="Other", deliver_ms=now_ms() + 60_000)
        with pytest.raises(ResponseError, match="topic not match") as mismatched:
            await producer.recall(TOPIC, elsewhere.encode())
    assert mismatched.value.code == ResponseCode.ILLEGAL_OPERATION
    assert cluster.broker.services["timer_wheel"].stats()["pending"] == 0


@pytest.mark.rocketmq(store="mmap")
async def test_a_recall_holds_across_a_broker_restart(cluster):
    namesrv = cluster.namesrv_address
    async with Producer("PG", namesrv) as producer:
        deliver = now_ms() + 2000
        recalled = await producer.send(Message(TOPIC, b"recalled", deliver_time_ms=deliver))
        kept = await producer.send(Message(TOPIC, b"kept", deliver_time_ms=deliver))
        await producer.recall(TOPIC, recalled.recall_handle)
    await anyio.to_thread.run_sync(cluster.restart_broker)
    inbox = Inbox()
    async with consumer(namesrv, inbox, group="CG-recall-restart"):
        await eventually(lambda: kept.msg_id in inbox.messages)
        await anyio.sleep(0.5)
    assert set(inbox.messages) == {kept.msg_id}
