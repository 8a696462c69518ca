"""PushConsumer against a real broker: rebalance, filtering, retries, DLQ, orderly,
broadcasting, flow control, where to start."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from rocketmq_core.client.consumer_requests import ConsumerError
from rocketmq_core.client.message import Message
from rocketmq_core.client.producer import Producer
from rocketmq_core.client.pull_consumer import PullConsumer
from rocketmq_core.client.push import ConsumeStatus, PushConsumer
from rocketmq_core.protocol.heartbeat import MessageModel, MessageQueue

from .conftest import TOPIC, eventually

pytestmark = pytest.mark.anyio
TRANSPORTS = ("tcp", "quic")  # every test that takes a cluster runs over both
# retries wait at level 3 + reconsumeTimes: a second each here, not 10 s, 30 s, ...
SHORT_RETRY_DELAYS = "1s 1s 1s 1s 1s 1s"


async def send(namesrv: str, count: int, topic: str = TOPIC, **fields) -> list:
    async with Producer("PG", namesrv) as producer:
        return [
            await producer.send(Message(topic, f"m{i}".encode(), **fields)) for i in range(count)
        ]


def collector():
    bodies: list[bytes] = []

    async def listener(messages):
        bodies.extend(message.body for message in messages)

    return bodies, listener


async def test_every_message_is_consumed_once_across_a_group(namesrv):
    await send(namesrv, 40)
    first_bodies, first_listener = collector()
    second_bodies, second_listener = collector()
    first = PushConsumer("CG", namesrv, listener=first_listener, consume_from="first")
    second = PushConsumer("CG", namesrv, listener=second_listener, consume_from="first")
    first.subscribe(TOPIC)
    second.subscribe(TOPIC)
    async with first:
        await eventually(lambda: len(first_bodies) == 40)
        # offsets reach the broker every 5 s; a joiner reading them earlier would get
        # those messages again (at-least-once, as in RocketMQ)
        await first.offset_store.persist()
        async with second:  # the broker tells the group; both rebalance
            # the group's retry topic (one queue) joins the share once its route is out
            def orders(consumer):
                return {queue for queue in consumer.queues if queue.topic == TOPIC}

            await eventually(lambda: len(orders(first)) == 2 and len(orders(second)) == 2)
            assert not set(first.queues) & set(second.queues)
            await send(namesrv, 40)
            await eventually(lambda: len(first_bodies) + len(second_bodies) == 80)
    assert sorted(first_bodies + second_bodies) == sorted([f"m{i}".encode() for i in range(40)] * 2)
    assert second_bodies, "the second consumer owned queues but got nothing"


async def test_only_subscribed_tags_arrive(namesrv):
    async with Producer("PG", namesrv) as producer:
        for i in range(12):
            await producer.send(Message(TOPIC, f"m{i}".encode(), tags="ABC"[i % 3]))
    bodies, listener = collector()
    consumer = PushConsumer("CG", namesrv, listener=listener, consume_from="first")
    consumer.subscribe(TOPIC, "A || C")
    async with consumer:
        await eventually(lambda: len(bodies) == 8)
        await send(namesrv, 3, tags="B")
        await send(namesrv, 1, tags="C")
        await eventually(lambda: len(bodies) == 9)
    assert all(int(body[1:]) % 3 != 1 for body in bodies[:8])


@pytest.mark.rocketmq(message_delay_level=SHORT_RETRY_DELAYS)
async def test_a_failed_message_comes_back_then_goes_to_the_dead_letter_queue(cluster, namesrv):
    await send(namesrv, 3)
    seen: list[tuple[bytes, int]] = []

    async def listener(messages):
        for message in messages:
            seen.append((message.body, message.reconsume_times))
            assert message.topic == TOPIC  # a retry shows its original topic
            if message.body == b"m1":
                return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "CG", namesrv, listener=listener, consume_from="first", max_reconsume_times=2
    )
    consumer.subscribe(TOPIC)
    async with consumer:
        await eventually(
            lambda: [s for s in seen if s[0] == b"m1"] == [(b"m1", i) for i in range(3)]
        )
    await eventually(lambda: cluster.namesrv.routes.route("%DLQ%CG") is not None)
    async with PullConsumer("CG-check", namesrv) as checker:
        dead = await checker.pull(MessageQueue("%DLQ%CG", "broker-a", 0), 0)
    assert [m.body for m in dead.messages] == [b"m1"]
    assert sorted(body for body, times in seen if times == 0) == [b"m0", b"m1", b"m2"]


@pytest.mark.rocketmq(message_delay_level=SHORT_RETRY_DELAYS)
async def test_a_raising_listener_counts_as_a_failure(namesrv):
    await send(namesrv, 1)
    calls = []

    async def listener(messages):
        calls.append(messages[0].reconsume_times)
        if len(calls) == 1:
            raise RuntimeError("boom")

    consumer = PushConsumer("CG", namesrv, listener=listener, consume_from="first")
    consumer.subscribe(TOPIC)
    async with consumer:
        await eventually(lambda: calls == [0, 1])


async def test_a_plain_function_listener_runs_in_a_worker_thread(namesrv):
    await send(namesrv, 5)
    threads = set()
    bodies = []

    def listener(messages):
        threads.add(threading.get_ident())
        bodies.extend(m.body for m in messages)

    consumer = PushConsumer("CG", namesrv, listener=listener, consume_from="first")
    consumer.subscribe(TOPIC)
    async with consumer:
        await eventually(lambda: len(bodies) == 5)
    assert threading.get_ident() not in threads


async def test_orderly_consumption_keeps_queue_order_through_failures(cluster, namesrv):
    async with Producer("PG", namesrv) as producer:
        for i in range(20):
            await producer.send(
                Message(TOPIC, f"{i % 2}-{i}".encode()),
                queue=MessageQueue(TOPIC, "broker-a", i % 2),
            )
    seen: list[bytes] = []
    failed = set()

    async def listener(messages):
        for message in messages:
            if message.body == b"0-6" and message.body not in failed:
                failed.add(message.body)
                return ConsumeStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            seen.append(message.body)

    consumer = PushConsumer(
        "CG",
        namesrv,
        listener=listener,
        orderly=True,
        consume_from="first",
        suspend_on_failure=0.05,
    )
    consumer.subscribe(TOPIC)
    async with consumer:
        await eventually(lambda: len(seen) == 20)
        broker = cluster.broker
        owner = broker.queue_locks.holder("CG", MessageQueue(TOPIC, "broker-a", 0), broker.now())
        assert owner == consumer.instance.client_id  # orderly consumers lock their queues
    for queue_id in (0, 1):
        mine = [b for b in seen if b.startswith(f"{queue_id}-".encode())]
        assert mine == [f"{queue_id}-{i}".encode() for i in range(queue_id, 20, 2)]


async def test_broadcasting_gives_everything_to_everyone_and_keeps_offsets_locally(
    namesrv, tmp_path
):
    await send(namesrv, 10)
    first_bodies, first_listener = collector()
    second_bodies, second_listener = collector()
    options = dict(
        message_model=MessageModel.BROADCASTING, consume_from="first", offset_store_dir=tmp_path
    )
    first = PushConsumer("CG", namesrv, listener=first_listener, **options)
    second = (
        PushConsumer("CG", namesrv, listener=second_listener, **options, instance_name_hint=None)
        if False
        else PushConsumer("CG", namesrv, listener=second_listener, **options)
    )
    first.subscribe(TOPIC)
    second.subscribe(TOPIC)
    async with first, second:
        await eventually(lambda: len(first_bodies) == 10 and len(second_bodies) == 10)
    files = list(tmp_path.rglob("offsets.json"))
    assert files, "broadcast offsets were not written to the local store"
    # a restarted broadcasting consumer goes on from its file: nothing again
    again, listener = collector()
    third = PushConsumer("CG", namesrv, listener=listener, **options)
    third.subscribe(TOPIC)
    async with third:
        await send(namesrv, 1)
        await eventually(lambda: len(again) == 1)
    assert again == [b"m0"]


async def test_flow_control_bounds_what_is_in_hand_per_queue(namesrv):
    async with Producer("PG", namesrv) as producer:
        await producer.send_batch(
            [Message(TOPIC, b"x") for _ in range(200)], queue=MessageQueue(TOPIC, "broker-a", 0)
        )
    gate_open = False
    done = []
    peak = 0

    async def listener(messages):
        nonlocal peak
        state = consumer.queues[MessageQueue(TOPIC, "broker-a", 0)]
        peak = max(peak, len(state.in_flight))
        while not gate_open:
            await anyio.sleep(0.01)
        done.extend(messages)

    consumer = PushConsumer(
        "CG",
        namesrv,
        listener=listener,
        consume_from="first",
        pull_threshold_for_queue=20,
        pull_batch_size=10,
    )
    consumer.subscribe(TOPIC)
    async with consumer:
        await eventually(lambda: peak >= 20)
        await anyio.sleep(0.3)  # the pull loop must be holding back now
        state = consumer.queues[MessageQueue(TOPIC, "broker-a", 0)]
        assert len(state.in_flight) < 20 + 10
        gate_open = True
        await eventually(lambda: len(done) == 200)


async def test_consume_from_last_first_and_a_timestamp(namesrv):
    await send(namesrv, 4)
    time.sleep(0.01)  # store times are whole milliseconds: keep the first four strictly before
    cut = int(time.time() * 1000)
    time.sleep(0.01)
    await send(namesrv, 4)
    started = {}
    for where in ("timestamp", "first", "last"):
        bodies, listener = collector()
        count = bodies.__len__
        consumer = PushConsumer(
            f"CG-{where}", namesrv, listener=listener, consume_from=where, consume_timestamp=cut
        )
        consumer.subscribe(TOPIC)
        async with consumer:
            await send(namesrv, 4)  # after the start: every setting sees these
            await eventually(lambda count=count: count() >= 4)
            await anyio.sleep(0.2)
        started[where] = len(bodies)
    # 4 before the cut, 4 after it, then 4 more per consumer started
    assert started == {"timestamp": 8, "first": 16, "last": 4}
    with pytest.raises(ConsumerError, match="consume_timestamp"):
        PushConsumer("CG", namesrv, listener=print, consume_from="timestamp")
    with pytest.raises(ConsumerError, match="first"):
        PushConsumer("CG", namesrv, listener=print, consume_from="middle")


async def test_offsets_are_committed_to_the_broker_at_stop(namesrv):
    await send(namesrv, 8)
    bodies, listener = collector()
    consumer = PushConsumer("CG", namesrv, listener=listener, consume_from="first")
    consumer.subscribe(TOPIC)
    async with consumer:
        await eventually(lambda: len(bodies) == 8)
    async with PullConsumer("CG", namesrv) as checker:
        committed = [
            await checker.committed_offset(MessageQueue(TOPIC, "broker-a", i)) for i in range(4)
        ]
    assert committed == [2, 2, 2, 2]
    # the next consumer of the group starts there: nothing is consumed twice
    again, listener = collector()
    consumer = PushConsumer("CG", namesrv, listener=listener, consume_from="first")
    consumer.subscribe(TOPIC)
    async with consumer:
        await send(namesrv, 1)
        await eventually(lambda: len(again) == 1)
    assert again == [b"m0"]


async def test_a_consumer_needs_a_subscription_and_a_real_group(namesrv):
    with pytest.raises(ConsumerError, match="consumer group"):
        PushConsumer("DEFAULT_CONSUMER", namesrv, listener=print)
    consumer = PushConsumer("CG", namesrv, listener=print)
    with pytest.raises(ConsumerError, match="subscribe"):
        async with consumer:
            pass
