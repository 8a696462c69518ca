"""POP checkpoints outlive the broker: a message popped and never acked comes back after
a clean restart and after a kill -9 of a broker process, and one put back before a
restart is not put back again after it."""

from __future__ import annotations

import pytest

from rocketmq_core.broker.app import Broker
from rocketmq_core.broker.pop import pop_service
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.headers import CreateTopicRequestHeader
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.testing.broker import broker_config
from tests.broker.pop_wire import GROUP, TOPIC, pop_request, pop_until, popped_messages
from tests.broker.test_pop import setup
from tests.broker.wire import send_request
from tests.processes import broker_process

pytestmark = pytest.mark.anyio


async def test_an_unacked_message_comes_back_after_a_restart(tmp_path, plugin_host, client):
    config = broker_config(tmp_path)
    async with Broker.serving(config, host=plugin_host) as broker:
        await setup(broker, client, count=2)
        popped = popped_messages(
            await client.invoke(broker.address, pop_request(invisible_ms=2000))
        )
        assert [p.body for p in popped] == [b"m0", b"m1"]
    async with Broker.serving(broker_config(tmp_path), host=plugin_host) as broker:
        back = await pop_until(client, broker.address)
        back += await pop_until(client, broker.address) if len(back) < 2 else []
        assert sorted(p.body for p in back) == [b"m0", b"m1"]
        assert {p.message.reconsume_times for p in back} == {1}


async def test_a_revived_checkpoint_is_not_revived_again_after_a_restart(
    tmp_path, plugin_host, client
):
    # one revive queue: the revived checkpoint lies behind an older one still open, so
    # the revive offset saved at the restart is before it
    config = broker_config(tmp_path, revive_queue_num=1)
    retry = f"%RETRY%{GROUP}_{TOPIC}"
    async with Broker.serving(config, host=plugin_host) as broker:
        await setup(broker, client, count=2)
        first = await client.invoke(broker.address, pop_request(invisible_ms=600_000, max_nums=1))
        second = await client.invoke(broker.address, pop_request(invisible_ms=300_000, max_nums=1))
        assert [p.body for p in popped_messages(first)] == [b"m0"]
        assert [p.body for p in popped_messages(second)] == [b"m1"]
        later = int(second.ext_fields["popTime"]) + 400_000  # m1 due, m0 not
        assert await pop_service(broker).revive.scan(now_ms=later) == 1
        assert broker.store.max_offset(retry, 0) == 1
    async with Broker.serving(
        broker_config(tmp_path, revive_queue_num=1), host=plugin_host
    ) as broker:
        revive = pop_service(broker).revive
        assert await revive.scan(now_ms=later) == 0
        assert broker.store.max_offset(retry, 0) == 1
        assert revive.open_checkpoints == 1  # m0's, still waiting for its time


async def test_an_unacked_message_comes_back_after_kill_9(tmp_path, plugin_host):
    server = broker_process(tmp_path / "broker", "", "ASYNC_MASTER", 0, cluster="PopCluster")
    try:
        async with RemotingClient(plugin_host.registry.transports.get("tcp")) as client:
            await create_topic(client, server.address)
            sent = await client.invoke(server.address, send_request(TOPIC, b"survivor"))
            assert sent.code == ResponseCode.SUCCESS, sent.remark
            popped = await pop_until(client, server.address, invisible_ms=2000)
            assert [p.body for p in popped] == [b"survivor"]
        server.kill()
        server.start()
        async with RemotingClient(plugin_host.registry.transports.get("tcp")) as client:
            # topic configs are saved once a second: one made just before the kill may be
            # gone, which is not what this test is about
            await create_topic(client, server.address)
            back = await pop_until(client, server.address, deadline_s=60)
            # at least once: the group's offset saved before the pop may be what a kill
            # leaves, so the queue can hand it out again besides the checkpoint's revive
            assert {p.body for p in back} == {b"survivor"}
    finally:
        server.stop()


async def create_topic(client, address: str) -> None:
    header = CreateTopicRequestHeader(
        topic=TOPIC,
        default_topic="TBW102",
        read_queue_nums=1,
        write_queue_nums=1,
        perm=6,
        topic_filter_type="SINGLE_TAG",
    )
    request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
    created = await client.invoke(address, request)
    assert created.code == ResponseCode.SUCCESS, created.remark
