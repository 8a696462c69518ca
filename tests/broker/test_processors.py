"""Broker processors through a real RemotingClient over TCP."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import anyio
import pytest

from rocketmq_core.broker.app import Broker
from rocketmq_core.broker.groups import SubscriptionGroupConfig
from rocketmq_core.broker.processors import pull
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.constants import SCHEDULE_TOPIC
from rocketmq_core.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
)
from rocketmq_core.protocol.heartbeat import ConsumerData, HeartbeatData, SubscriptionData
from rocketmq_core.protocol.message import decode_record, iter_records
from rocketmq_core.store.api import SupportsDurableCallback, SupportsImmediateGet
from rocketmq_core.testing.broker import broker_config

from .wire import pull_request, send_request

pytestmark = pytest.mark.anyio
R = RequestCode


async def test_send_then_pull(broker, client):
    sent = await client.invoke(broker.address, send_request())
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    assert sent.ext_fields["queueId"] == "0" and sent.ext_fields["queueOffset"] == "0"
    assert sent.ext_fields["MSG_REGION"] == "DefaultRegion"
    assert sent.ext_fields["transactionId"] == "U1"
    pulled = await client.invoke(broker.address, pull_request())
    assert pulled.code == ResponseCode.SUCCESS
    (message,) = list(iter_records(pulled.body))
    assert (message.topic, message.body, message.tags) == ("Orders", b"hello", "TagA")
    assert message.properties["CLUSTER"] == "DefaultCluster"
    assert pulled.ext_fields["nextBeginOffset"] == "1"


async def test_a_pull_the_store_answers_at_once_takes_no_task(broker, client):
    """The pull figures (benchmarks/vs_nats.py) depend on it: with a store that reads
    without waiting (SupportsImmediateGet), a pull that finds records, or finds none and
    is not held, is answered by the processor's call itself; only a held pull is a
    coroutine (a task of the connection)."""
    assert isinstance(broker.store, SupportsImmediateGet)
    await client.invoke(broker.address, send_request())
    found = pull.pull_message(broker, None, pull_request())
    assert isinstance(found, RemotingCommand) and found.code == ResponseCode.SUCCESS
    empty = pull.pull_message(broker, None, pull_request(offset=1))
    assert isinstance(empty, RemotingCommand) and empty.code == ResponseCode.PULL_NOT_FOUND
    held = pull.pull_message(
        broker, None, pull_request(offset=1, sys_flag=pull.SUSPEND | pull.SUBSCRIPTION)
    )
    assert inspect.iscoroutine(held)
    held.close()


async def test_a_record_stored_before_a_held_pull_waits_is_not_missed(broker, client):
    """The pull that found nothing is held by a coroutine its connection runs as a task
    later: a record stored in between (another frame of the same read, another client)
    is read by that coroutine, not left until the suspend time ends."""
    await client.invoke(broker.address, send_request())
    held = pull.pull_message(
        broker,
        SimpleNamespace(connection=object()),
        pull_request(offset=1, sys_flag=pull.SUSPEND | pull.SUBSCRIPTION, suspend=20_000),
    )
    assert inspect.iscoroutine(held)
    stored = await client.invoke(broker.address, send_request(body=b"meanwhile"))
    assert stored.code == ResponseCode.SUCCESS
    with anyio.fail_after(5):  # not the 20 s suspend
        answer = await held
    assert answer.code == ResponseCode.SUCCESS
    assert [message.body for message in iter_records(answer.body)] == [b"meanwhile"]


async def test_refusals_say_why(broker, client, tmp_path):
    cases = [
        (send_request(topic="SCHEDULE_TOPIC_XXXX"), ResponseCode.NO_PERMISSION, "forbidden"),
        (send_request(topic="bad topic"), ResponseCode.INVALID_PARAMETER, "illegal characters"),
        (
            send_request(body=b"x" * (4 * 1024 * 1024 + 1)),
            ResponseCode.MESSAGE_ILLEGAL,
            "maxMessageSize",
        ),
        (send_request(queue_id=99), ResponseCode.INVALID_PARAMETER, "out of range"),
        (pull_request(topic="NoSuchTopic"), ResponseCode.TOPIC_NOT_EXIST, "not exist"),
        (pull_request(sys_flag=0), ResponseCode.SUBSCRIPTION_NOT_EXIST, "subscription"),
    ]
    await client.invoke(broker.address, send_request())  # creates Orders
    for request, code, remark in cases:
        reply = await client.invoke(broker.address, request, timeout=10)
        assert reply.code == code, (request.code, reply.remark)
        assert remark in reply.remark


async def test_sync_flush_sends_are_answered_once_durable(tmp_path, plugin_host, client):
    """The answers leave once a group commit covers them, from the flusher's callback
    (SupportsDurableCallback: no task per send); the CommitLog keeps 4 KiB pages, as a
    flush of a 2 MiB folio per group commit wrote 2 MiB (huge folios refused)."""
    config = broker_config(tmp_path, flush_disk_type="SYNC_FLUSH", commit_log_huge_folios=True)
    async with Broker.serving(config, host=plugin_host) as broker:
        assert isinstance(broker.store, SupportsDurableCallback)
        assert not broker.store.commitlog.files.huge_folios
        answers_later = []
        route = broker.server.processors.lookup(R.SEND_MESSAGE_V2)
        assert route is not None
        processor = route.processor

        def counted(ctx, request):
            answer = processor(ctx, request)
            answers_later.append(type(answer).__name__)
            return answer

        route.processor = counted
        with anyio.fail_after(10):
            async with anyio.create_task_group() as task_group:
                replies = []

                async def send(number: int) -> None:
                    body = b"m%d" % number
                    replies.append(await client.invoke(broker.address, send_request(body=body)))

                for number in range(8):
                    task_group.start_soon(send, number)
        flushed = broker.store.stats()["flushed_offset"]
        written = broker.store.max_commit_log_offset
    assert [reply.code for reply in replies] == [ResponseCode.SUCCESS] * 8
    assert flushed >= written > 0
    assert answers_later == ["LaterAnswer"] * 8


async def test_the_commit_log_takes_huge_folios_when_asked_and_async_flushed(
    tmp_path, plugin_host, broker, caplog
):
    """commitLogHugeFolios (off by default); a SYNC_FLUSH store keeps 4 KiB pages, and
    says so."""
    assert not broker.store.commitlog.files.huge_folios
    for flush_disk_type, huge in (("ASYNC_FLUSH", True), ("SYNC_FLUSH", False)):
        config = broker_config(
            tmp_path / flush_disk_type, flush_disk_type=flush_disk_type, commit_log_huge_folios=True
        )
        caplog.clear()
        async with Broker.serving(config, host=plugin_host) as asked:
            assert asked.store.commitlog.files.huge_folios is huge
        ignored = "commitLogHugeFolios is ignored with SYNC_FLUSH" in caplog.text
        assert ignored is not huge


async def test_unknown_topic_without_auto_create(tmp_path, plugin_host, client):
    config = broker_config(tmp_path, auto_create_topic_enable=False)
    async with Broker.serving(config, host=plugin_host) as broker:
        reply = await client.invoke(broker.address, send_request(topic="Fresh"))
    assert reply.code == ResponseCode.TOPIC_NOT_EXIST
    assert "topic[Fresh] not exist, apply first please!" in reply.remark


async def test_a_held_pull_is_answered_by_the_next_message(broker, client):
    await client.invoke(broker.address, send_request())
    results = {}

    async def held_pull():
        results["reply"] = await client.invoke(
            broker.address, pull_request(offset=1, sys_flag=0x4 | 0x2), timeout=20
        )

    async with anyio.create_task_group() as task_group:
        task_group.start_soon(held_pull)
        with anyio.fail_after(5):
            while broker.pulls.holding == 0:
                await anyio.sleep(0.01)
        await client.invoke(broker.address, send_request(body=b"second"))
    reply = results["reply"]
    assert reply.code == ResponseCode.SUCCESS
    assert [m.body for m in iter_records(reply.body)] == [b"second"]


async def test_a_held_pull_times_out_as_not_found(broker, client):
    await client.invoke(broker.address, send_request())
    reply = await client.invoke(
        broker.address, pull_request(offset=1, sys_flag=0x4 | 0x2, suspend=200), timeout=10
    )
    assert reply.code == ResponseCode.PULL_NOT_FOUND
    assert reply.ext_fields["nextBeginOffset"] == "1"


async def test_heartbeat_consumer_list_and_offsets(broker, client):
    beat = HeartbeatData(
        "127.0.0.1@1#x",
        ["PG"],
        [ConsumerData("CG", subscriptions=[SubscriptionData.of("Orders", "*")])],
    )
    reply = await client.invoke(
        broker.address, RemotingCommand.request(R.HEART_BEAT, None, beat.encode())
    )
    assert reply.code == ResponseCode.SUCCESS
    assert broker.topics.get("%RETRY%CG") is not None
    members = await client.invoke(
        broker.address,
        RemotingCommand.request(R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG"}),
    )
    assert members.body == b'{"consumerIdList":["127.0.0.1@1#x"]}'
    await client.invoke(broker.address, send_request())
    fields = {"consumerGroup": "CG", "topic": "Orders", "queueId": "0"}
    young = await client.invoke(
        broker.address, RemotingCommand.request(R.QUERY_CONSUMER_OFFSET, fields)
    )
    assert young.ext_fields == {"offset": "0"}  # a young queue starts at 0
    await client.invoke(
        broker.address,
        RemotingCommand.request(R.UPDATE_CONSUMER_OFFSET, {**fields, "commitOffset": "1"}),
    )
    stored = await client.invoke(
        broker.address, RemotingCommand.request(R.QUERY_CONSUMER_OFFSET, fields)
    )
    assert stored.ext_fields == {"offset": "1"}
    top = await client.invoke(
        broker.address,
        RemotingCommand.request(R.GET_MAX_OFFSET, {"topic": "Orders", "queueId": "0"}),
    )
    assert top.ext_fields == {"offset": "1"}


async def test_query_by_key_and_view_by_offset(broker, client):
    sent = await client.invoke(broker.address, send_request(body=b"findme"))
    offset = int(sent.ext_fields["msgId"][-16:], 16)
    fields = {
        "topic": "Orders",
        "key": "k1",
        "maxNum": "8",
        "beginTimestamp": "0",
        "endTimestamp": str(2**62),
    }
    found = await client.invoke(broker.address, RemotingCommand.request(R.QUERY_MESSAGE, fields))
    assert found.code == ResponseCode.SUCCESS
    assert [m.body for m in iter_records(found.body)] == [b"findme"]
    assert int(found.ext_fields["indexLastUpdatePhyoffset"]) == offset
    missing = await client.invoke(
        broker.address, RemotingCommand.request(R.QUERY_MESSAGE, {**fields, "key": "nope"})
    )
    assert missing.code == ResponseCode.QUERY_NOT_FOUND
    viewed = await client.invoke(
        broker.address, RemotingCommand.request(R.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
    )
    assert [m.body for m in iter_records(viewed.body)] == [b"findme"]
    wrong = await client.invoke(
        broker.address, RemotingCommand.request(R.VIEW_MESSAGE_BY_ID, {"offset": str(offset + 1)})
    )
    assert wrong.code == ResponseCode.SYSTEM_ERROR and "can not find message" in wrong.remark


def send_back_request(offset, group="CG", delay_level=0, version=0, **fields):
    header = ConsumerSendMsgBackRequestHeader(
        offset=offset, group=group, delay_level=delay_level, **fields
    )
    request = RemotingCommand.request(R.CONSUMER_SEND_MSG_BACK, header.to_ext_fields())
    request.version = version
    return request


async def stored_message(broker, topic, queue_id, offset):
    result = await broker.store.get(topic, queue_id, offset, 1)
    (record,) = result.records
    return decode_record(bytes(record))


async def test_send_back_goes_to_the_retry_topic_with_a_growing_delay_level(broker, client):
    sent = await client.invoke(broker.address, send_request())
    original = await stored_message(broker, "Orders", 0, 0)
    assert sent.code == ResponseCode.SUCCESS
    reply = await client.invoke(broker.address, send_back_request(original.commit_log_offset))
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    # parked at its delay level (3: queue 2) by the delay scheduler, bound for the retry topic
    retried = await stored_message(broker, SCHEDULE_TOPIC, 2, 0)
    assert (retried.properties["REAL_TOPIC"], retried.properties["REAL_QID"]) == ("%RETRY%CG", "0")
    assert (retried.body, retried.reconsume_times) == (b"hello", 1)
    assert retried.properties["RETRY_TOPIC"] == "Orders"
    assert retried.properties["ORIGIN_MESSAGE_ID"] == "U1"  # the producer's UNIQ_KEY
    assert retried.properties["DELAY"] == "3"  # level 0 asks the broker: 3 + reconsumeTimes
    assert retried.properties["KEYS"] == "k1" and retried.tags == "TagA"
    # its next failure waits longer, and keeps the first topic and id
    await client.invoke(broker.address, send_back_request(retried.commit_log_offset))
    twice = await stored_message(broker, SCHEDULE_TOPIC, 3, 0)
    assert (twice.reconsume_times, twice.properties["DELAY"]) == (2, "4")
    assert twice.properties["RETRY_TOPIC"] == "Orders"
    assert twice.properties["ORIGIN_MESSAGE_ID"] == "U1"
    assert broker.groups.table["CG"].retry_max_times == 16  # created on first use


async def test_send_back_past_the_limit_or_with_a_negative_level_is_a_dead_letter(broker, client):
    await client.invoke(broker.address, send_request(reconsume_times=3))
    original = await stored_message(broker, "Orders", 0, 0)
    # version >= 121 (V3_4_9): the limit in the header counts
    limited = send_back_request(original.commit_log_offset, max_reconsume_times=3, version=121)
    assert (await client.invoke(broker.address, limited)).code == ResponseCode.SUCCESS
    dead = await stored_message(broker, "%DLQ%CG", 0, 0)
    assert (dead.body, dead.reconsume_times, dead.properties.get("DELAY")) == (b"hello", 4, None)
    negative = send_back_request(original.commit_log_offset, delay_level=-1)
    assert (await client.invoke(broker.address, negative)).code == ResponseCode.SUCCESS
    assert broker.store.max_offset("%DLQ%CG", 0) == 2
    assert broker.topics.get("%DLQ%CG").read_queue_nums == 1


async def test_send_back_refusals_say_why(tmp_path, plugin_host, client):
    config = broker_config(tmp_path, auto_create_subscription_group=False)
    async with Broker.serving(config, host=plugin_host) as broker:
        await client.invoke(broker.address, send_request())
        original = await stored_message(broker, "Orders", 0, 0)
        unknown = await client.invoke(broker.address, send_back_request(original.commit_log_offset))
        assert unknown.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert "subscription group not exist, CG" in unknown.remark
        broker.groups.update(SubscriptionGroupConfig("CG"))
        missing = await client.invoke(broker.address, send_back_request(1 << 40))
        assert missing.code == ResponseCode.SYSTEM_ERROR
        assert "look message by offset failed" in missing.remark
        broker.groups.update(SubscriptionGroupConfig("CG", retry_queue_nums=0))
        dropped = await client.invoke(broker.address, send_back_request(original.commit_log_offset))
        assert dropped.code == ResponseCode.SUCCESS
        assert broker.topics.get("%RETRY%CG") is None  # no retries wanted: dropped


async def test_a_group_that_may_not_consume_is_refused(broker, client):
    await client.invoke(broker.address, send_request())
    broker.groups.update(SubscriptionGroupConfig("CG", consume_enable=False))
    reply = await client.invoke(broker.address, pull_request())
    assert reply.code == ResponseCode.NO_PERMISSION
    assert "subscription group no permission, CG" in reply.remark
