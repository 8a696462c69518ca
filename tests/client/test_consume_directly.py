"""CONSUME_MESSAGE_DIRECTLY end to end: Admin asks the broker storing a message to hand
it to one consumer of a group; the broker relays it, our push consumer runs its listener
once on it and answers a ConsumeMessageDirectlyResult (real cluster, real sockets)."""

from __future__ import annotations

import re

import orjson
import pytest

from rocketmq_core.cli import main
from rocketmq_core.cli.mqadmin import mqadmin
from rocketmq_core.client import sync
from rocketmq_core.client.admin import Admin
from rocketmq_core.client.admin_types import AdminError
from rocketmq_core.client.message import Message, ReceivedMessage
from rocketmq_core.client.producer import Producer
from rocketmq_core.client.pull_consumer import PullConsumer
from rocketmq_core.client.push import ConsumeStatus, PushConsumer
from rocketmq_core.protocol.bodies import CMResult
from rocketmq_core.protocol.codes import ResponseCode
from rocketmq_core.protocol.heartbeat import MessageQueue

from .conftest import eventually

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster


async def _send(admin: Admin, topic: str, body: str, group: str) -> str:
    async with Producer(group, instance=admin.instance) as producer:
        return (await producer.send(Message(topic, body, tags="t"))).msg_id


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrently", "orderly"])
async def test_the_listener_takes_the_message_once_and_no_offset_moves(cluster, name, orderly):
    topic, group = name("T"), name("CG")
    cluster.create_topic(topic, 1)
    seen: list[ReceivedMessage] = []

    async def listener(messages: list[ReceivedMessage]) -> ConsumeStatus:
        seen.extend(messages)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group, cluster.namesrv_address, listener=listener, consume_from="first", orderly=orderly
    )
    consumer.subscribe(topic)
    async with Admin(cluster.namesrv_address) as admin, consumer:
        msg_id = await _send(admin, topic, "hello", name("PG"))
        await eventually(lambda: len(seen) == 1)
        queue = MessageQueue(topic, "broker-a", 0)
        await eventually(lambda: consumer.offset_store.cached(queue) == 1)

        result = await admin.consume_message_directly(
            group, consumer.instance.client_id, msg_id, topic
        )

        assert result.consume_result is CMResult.CR_SUCCESS
        assert result.order is orderly
        assert result.remark is None
        assert 0 <= result.spent_time_mills < 5000
        assert [m.body for m in seen] == [b"hello", b"hello"]  # once pulled, once directly
        direct = seen[1]
        assert (direct.msg_id, direct.topic, direct.queue) == (msg_id, topic, queue)
        assert consumer.offset_store.cached(queue) == 1  # consuming directly commits nothing


async def test_a_listener_that_raises_answers_cr_throw_exception_with_what_it_raised(cluster, name):
    topic, group = name("T"), name("CG")
    cluster.create_topic(topic, 1)

    def listener(messages: list[ReceivedMessage]) -> None:  # a plain function: in a thread
        if any(m.body == b"poison" for m in messages):
            raise ValueError("cannot parse poison")

    consumer = PushConsumer(group, cluster.namesrv_address, listener=listener)
    consumer.subscribe(topic)
    async with Admin(cluster.namesrv_address) as admin, consumer:
        await consumer.instance.heartbeat_all()
        msg_id = await _send(admin, topic, "poison", name("PG"))
        result = await admin.consume_message_directly(group, None, msg_id, topic)
        later = await admin.consume_message_directly(
            group, consumer.instance.client_id, await _send(admin, topic, "ok", name("PG")), topic
        )
    assert result.consume_result is CMResult.CR_THROW_EXCEPTION
    assert result.remark is not None
    assert result.remark.startswith("ValueError: cannot parse poison, test_consume_directly.py:")
    assert result.remark.endswith(" in listener")
    assert later.consume_result is CMResult.CR_SUCCESS


async def test_a_listener_asking_for_later_answers_cr_later(cluster, name):
    topic, group = name("T"), name("CG")
    cluster.create_topic(topic, 1)
    consumer = PushConsumer(
        group, cluster.namesrv_address, listener=lambda messages: ConsumeStatus.RECONSUME_LATER
    )
    consumer.subscribe(topic)
    async with Admin(cluster.namesrv_address) as admin, consumer:
        msg_id = await _send(admin, topic, "again", name("PG"))
        result = await admin.consume_message_directly(
            group, consumer.instance.client_id, msg_id, topic
        )
    assert result.consume_result is CMResult.CR_LATER


async def test_a_client_not_online_is_refused_with_javas_code_and_remark(cluster, name):
    topic, group = name("T"), name("CG")
    cluster.create_topic(topic, 1)
    async with Admin(cluster.namesrv_address) as admin:
        msg_id = await _send(admin, topic, "nobody", name("PG"))
        with pytest.raises(AdminError) as err:
            await admin.consume_message_directly(group, "10.0.0.1@nobody", msg_id, topic)
    assert err.value.code == ResponseCode.SYSTEM_ERROR
    assert f"The Consumer <{group}> <10.0.0.1@nobody> not online" in str(err.value)


async def test_a_pull_consumer_has_no_listener_to_consume_with(cluster, name):
    topic, group = name("T"), name("CG")
    cluster.create_topic(topic, 1)
    async with Admin(cluster.namesrv_address) as admin:
        msg_id = await _send(admin, topic, "pulled", name("PG"))
        async with PullConsumer(group, cluster.namesrv_address) as consumer:
            await consumer.queues(topic)  # a topic asked about is in its heartbeats
            await consumer.instance.heartbeat_all()
            with pytest.raises(AdminError) as err:
                await admin.consume_message_directly(
                    group, consumer.instance.client_id, msg_id, topic
                )
    assert err.value.code == ResponseCode.SYSTEM_ERROR
    assert f"The Consumer Group <{group}> not exist in this consumer" in str(err.value)


async def test_an_unknown_message_id_names_it(cluster, name):
    topic = name("T")
    cluster.create_topic(topic, 1)
    async with Admin(cluster.namesrv_address) as admin:
        with pytest.raises(AdminError, match="no message 'ABCDEF"):
            await admin.consume_message_directly(name("CG"), None, "ABCDEF" + "0" * 26, topic)


async def test_a_dead_lettered_message_is_redriven_to_a_consumer_of_its_group(cluster, name):
    """The dashboard's DLQ resend: a message of %DLQ%group consumed directly by a client
    of the group, once the listener is fixed."""
    topic, group = name("T"), name("CG")
    cluster.create_topic(topic, 1)
    broken = True
    seen: list[ReceivedMessage] = []

    async def listener(messages: list[ReceivedMessage]) -> ConsumeStatus:
        seen.extend(messages)
        return ConsumeStatus.RECONSUME_LATER if broken else ConsumeStatus.CONSUME_SUCCESS

    dlq = f"%DLQ%{group}"
    consumer = PushConsumer(
        group,
        cluster.namesrv_address,
        listener=listener,
        consume_from="first",
        max_reconsume_times=0,  # the first failure dead-letters it
    )
    consumer.subscribe(topic)
    async with Admin(cluster.namesrv_address) as admin, consumer:
        msg_id = await _send(admin, topic, "order-42", name("PG"))
        await eventually(lambda: cluster.namesrv.routes.route(dlq) is not None)
        dead = await admin.message_at(MessageQueue(dlq, "broker-a", 0), 0)
        assert (dead.msg_id, dead.body) == (msg_id, b"order-42")

        broken = False  # the listener is fixed: redrive the dead letter
        result = await admin.consume_message_directly(group, None, dead.msg_id, dlq)

    assert result.consume_result is CMResult.CR_SUCCESS
    assert [(m.topic, m.body) for m in seen] == [(topic, b"order-42"), (dlq, b"order-42")]
    assert seen[1].properties["RETRY_TOPIC"] == topic  # where it came from, for the listener


def test_the_cli_and_mqadmin_push_a_message_to_a_consumer(cluster, name, capsys):
    topic, group = name("T"), name("CG")
    cluster.create_topic(topic, 1)
    seen: list[bytes] = []

    def listener(messages: list[ReceivedMessage]) -> bool:
        seen.extend(m.body for m in messages)
        return not any(m.body == b"refused" for m in messages)

    namesrv = cluster.namesrv_address
    with sync.Producer(name("PG"), namesrv) as producer:
        accepted = producer.send(Message(topic, "accepted")).msg_id
        refused = producer.send(Message(topic, "refused")).msg_id
    consumer = sync.PushConsumer(group, namesrv, listener=listener, consume_from="last")
    consumer.subscribe(topic)
    with consumer:
        consumer.call(consumer.async_client.instance.heartbeat_all)
        client_id = consumer.async_client.instance.client_id
        base = ["message", "consume-directly", "-g", group, "-t", topic, "-n", namesrv]

        assert main([*base, "-i", accepted, "-d", client_id, "--json"]) == 0
        document = orjson.loads(capsys.readouterr().out)
        assert document["consume_result"] == "CR_SUCCESS"
        assert document["order"] is False and document["remark"] is None

        assert main([*base, "-i", refused]) == 1  # the listener declined it: exit 1
        assert re.search(r"consume_result\s+CR_LATER", capsys.readouterr().out)

        apache = ["queryMsgById", "-t", topic, "-i", accepted, "-g", group, "-d", client_id]
        assert mqadmin([*apache, "-n", namesrv]) == 0
        assert re.search(r"consume_result\s+CR_SUCCESS", capsys.readouterr().out)

        assert main([*base, "-i", accepted, "-d", "10.0.0.1@nobody"]) == 1
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and "Traceback" not in error
        assert f"The Consumer <{group}> <10.0.0.1@nobody> not online" in error
    assert seen == [b"accepted", b"refused", b"accepted"]
