"""Producer against a real broker over TCP: what is sent is what is stored."""

from __future__ import annotations

import zlib

import pytest

from rocketmq_core.client.fault import LatencyFaultTolerance
from rocketmq_core.client.message import Message, SendStatus
from rocketmq_core.client.producer import MQClientError, Producer, PublishInfo
from rocketmq_core.client.selectors import RoundRobin, select_by_hash, select_by_key
from rocketmq_core.protocol.compression import CompressionType
from rocketmq_core.protocol.heartbeat import MessageQueue
from rocketmq_core.protocol.message import COMPRESSED

from .conftest import TOPIC, eventually, stored

pytestmark = pytest.mark.anyio
TRANSPORTS = ("tcp", "quic")  # every test that takes a cluster runs over both


async def test_a_sent_message_is_stored_with_its_fields(namesrv):
    async with Producer("PG", namesrv) as producer:
        result = await producer.send(
            Message(TOPIC, b"hello", tags="TagA", keys=["k1", "k2"], properties={"a": "1"})
        )
    assert result.status is SendStatus.SEND_OK
    assert result.queue.topic == TOPIC and result.queue_offset == 0
    message = await stored(namesrv, result.queue, result.queue_offset)
    assert (message.body, message.tags, message.keys) == (b"hello", "TagA", ["k1", "k2"])
    assert message.properties["a"] == "1"
    assert message.msg_id == result.msg_id == message.properties["UNIQ_KEY"]
    assert message.offset_msg_id == result.offset_msg_id


async def test_sends_rotate_over_the_queues(namesrv):
    async with Producer("PG", namesrv) as producer:
        results = [await producer.send(Message(TOPIC, b"x")) for _ in range(8)]
    assert sorted(r.queue.queue_id for r in results) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert len({r.msg_id for r in results}) == 8


@pytest.mark.parametrize("kind", [CompressionType.ZLIB, CompressionType.ZSTD])
async def test_large_bodies_are_compressed_and_come_back_whole(namesrv, kind):
    body = b"0123456789" * 1000
    async with Producer("PG", namesrv, compression=kind, compress_over=4096) as producer:
        big = await producer.send(Message(TOPIC, body))
        small = await producer.send(Message(TOPIC, b"tiny"))
    message = await stored(namesrv, big.queue, big.queue_offset)
    assert message.body == body
    assert message.sys_flag & COMPRESSED and message.sys_flag & 0x700 == kind.value << 8
    assert not (await stored(namesrv, small.queue, small.queue_offset)).sys_flag & COMPRESSED
    if kind is CompressionType.ZLIB:  # what the C++ client inflates: an RFC 1950 stream
        assert zlib.decompress(zlib.compress(body, 5)) == body


async def test_a_batch_is_split_to_the_size_limit_and_stored_in_order(namesrv):
    messages = [Message(TOPIC, b"%04d" % i + b"." * 1000, keys=f"k{i}") for i in range(40)]
    async with Producer("PG", namesrv, max_message_size=16 * 1024) as producer:
        results = await producer.send_batch(messages)
    assert len(results) == 40
    assert len({r.msg_id for r in results}) == 40
    # several SEND_BATCH_MESSAGE requests, each into one queue with consecutive offsets
    by_queue: dict[MessageQueue, list[int]] = {}
    for r in results:
        by_queue.setdefault(r.queue, []).append(r.queue_offset)
    assert len(by_queue) > 1
    for offsets in by_queue.values():
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
    last = results[-1]
    message = await stored(namesrv, last.queue, last.queue_offset)
    assert message.body.startswith(b"0039") and message.keys == ["k39"]
    assert message.msg_id == last.msg_id


async def test_a_batch_refuses_mixed_topics_and_delays(namesrv):
    async with Producer("PG", namesrv) as producer:
        with pytest.raises(MQClientError, match="one topic"):
            await producer.send_batch([Message(TOPIC, b"a"), Message("Other", b"b")])
        with pytest.raises(MQClientError, match="delayed"):
            await producer.send_batch([Message(TOPIC, b"a", delay_level=2)])


async def test_orderly_sends_keep_one_key_in_one_queue_in_order(namesrv):
    async with Producer("PG", namesrv) as producer:
        results = [
            await producer.send(
                Message(TOPIC, f"{order}-{step}".encode(), keys=f"order-{order}"),
                selector=select_by_hash,
                arg=f"order-{order}",
            )
            for step in range(5)
            for order in range(3)
        ]
        keyed = [
            await producer.send(Message(TOPIC, b"k", keys="order-1"), selector=select_by_key)
            for _ in range(2)
        ]
    for order in range(3):
        mine = [r for r in results if r.queue == results[order].queue]
        offsets = [r.queue_offset for r in results if r.queue == results[order].queue]
        assert offsets == sorted(offsets) and len(mine) >= 5
    assert keyed[0].queue == keyed[1].queue


async def test_round_robin_selector_and_a_fixed_queue(namesrv):
    rotate = RoundRobin()
    async with Producer("PG", namesrv) as producer:
        picked = [
            (await producer.send(Message(TOPIC, b"r"), selector=rotate)).queue.queue_id
            for _ in range(4)
        ]
        fixed = await producer.send(Message(TOPIC, b"f"), queue=MessageQueue(TOPIC, "broker-a", 2))
    assert picked == [0, 1, 2, 3]
    assert fixed.queue.queue_id == 2


async def test_callbacks_sync_and_async_get_exactly_one_outcome(namesrv):
    outcomes = []

    async def async_callback(result, error):
        outcomes.append(("async", result, error))

    def sync_callback(result, error):
        outcomes.append(("sync", result, error))

    async with Producer("PG", namesrv) as producer:
        producer.send_with_callback(Message(TOPIC, b"a"), async_callback)
        producer.send_with_callback(Message(TOPIC, b"b"), sync_callback)
        producer.send_with_callback(Message("BadTopic!", b"c"), sync_callback)
        await eventually(lambda: len(outcomes) == 3)
    ok = [o for o in outcomes if o[2] is None]
    assert {o[0] for o in ok} == {"async", "sync"}
    assert all(o[1].status is SendStatus.SEND_OK for o in ok)
    failed = [o for o in outcomes if o[2] is not None]
    assert len(failed) == 1 and failed[0][1] is None and "not valid" in str(failed[0][2])


async def test_oneway_sends_are_stored(namesrv):
    async with Producer("PG", namesrv) as producer:
        await producer.send_oneway(
            Message(TOPIC, b"fire"), queue=MessageQueue(TOPIC, "broker-a", 1)
        )
        last = await producer.send(
            Message(TOPIC, b"after"), queue=MessageQueue(TOPIC, "broker-a", 1)
        )
    assert last.queue_offset == 1
    assert (await stored(namesrv, last.queue, 0)).body == b"fire"


async def test_a_broker_missing_from_the_known_routes_is_looked_up_before_sending(namesrv):
    async with Producer("PG", namesrv) as producer:
        await producer.send(Message(TOPIC, b"first"))
        producer.instance.broker_addrs.pop("broker-a")  # as if its route had not come yet
        found = await producer.send(Message(TOPIC, b"a"), queue=MessageQueue(TOPIC, "broker-a", 3))
        producer.instance.broker_addrs.pop("broker-a")
        await producer.send_oneway(Message(TOPIC, b"b"), queue=MessageQueue(TOPIC, "broker-a", 3))
        nowhere = MessageQueue(TOPIC, "broker-nowhere", 0)
        for send in (producer.send, producer.send_oneway):
            with pytest.raises(MQClientError, match="'broker-nowhere' has no master to send to"):
                await send(Message(TOPIC, b"x"), queue=nowhere)
    assert found.status is SendStatus.SEND_OK
    assert (await stored(namesrv, found.queue, found.queue_offset)).body == b"a"
    assert (await stored(namesrv, found.queue, found.queue_offset + 1)).body == b"b"


async def test_an_unknown_topic_is_created_through_the_default_topic(cluster, namesrv):
    async with Producer("PG", namesrv) as producer:
        first = await producer.send(Message("BrandNew", b"1"))
        second = await producer.send(Message("BrandNew", b"2"))
    assert first.status is SendStatus.SEND_OK and second.status is SendStatus.SEND_OK
    # the broker created it and registers it with the name server
    await eventually(lambda: cluster.namesrv.routes.route("BrandNew") is not None)
    assert (await stored(namesrv, first.queue, first.queue_offset)).body == b"1"


@pytest.mark.rocketmq(auto_create_topic_enable=False)
async def test_without_auto_create_an_unknown_topic_is_a_clear_error(rocketmq_cluster):
    async with Producer("PG", rocketmq_cluster.namesrv_address) as producer:
        with pytest.raises(MQClientError, match="create it first"):
            await producer.send(Message("Missing", b"x"))


async def test_bad_input_is_refused_before_sending(namesrv):
    with pytest.raises(MQClientError, match="producer group"):
        Producer("DEFAULT_PRODUCER", namesrv)
    with pytest.raises(ValueError, match="set by the client"):
        Message(TOPIC, b"x", properties={"TAGS": "sneaky"})
    async with Producer("PG", namesrv, max_message_size=1024, compress_over=1 << 30) as producer:
        with pytest.raises(MQClientError, match="limit is 1024"):
            await producer.send(Message(TOPIC, b"x" * 2048))
        with pytest.raises(MQClientError, match="not valid"):
            await producer.send(Message("spaces are bad", b"x"))
        with pytest.raises(MQClientError, match="template"):
            await producer.send(Message("TBW102", b"x"))


async def test_sending_outside_the_context_is_an_error(namesrv):
    producer = Producer("PG", namesrv)
    with pytest.raises(MQClientError, match="not started"):
        await producer.send(Message(TOPIC, b"x"))


def test_queue_choice_avoids_a_broker_that_just_failed():
    queues = tuple(MessageQueue(TOPIC, name, i) for name in ("a", "b") for i in range(2))
    producer = Producer("PG", "127.0.0.1:9876")
    info = PublishInfo(queues)
    assert all(producer._pick_queue(info, "a").broker_name == "b" for _ in range(6))
    # a broker isolated after a failure is skipped even on a first attempt
    producer.faults.record("b", 0.0, now=1e12, failed=True)
    picks = {producer._pick_queue(info, None).broker_name for _ in range(6)}
    assert picks == {"a"}


def test_brokers_whose_time_away_ran_out_are_forgotten():
    """A broker kept away that then left the route gets no quick send to clear it."""
    faults = LatencyFaultTolerance()
    faults.record("a", 0.0, now=100.0, failed=True)  # a failure: 180 s away
    faults.record("b", 0.6, now=100.0)  # a slow send: 30 s away
    assert faults.keeps_any_away(131.0)  # "a" still is
    assert faults.available("b", 131.0) and not faults.available("a", 131.0)
    assert not faults.keeps_any_away(281.0)
    assert not faults.keeps_any_away(100.0)  # forgotten, not merely out of time
