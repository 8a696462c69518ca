"""The broker's own puts replicate as a send does (HA.md §3): on a SYNC_MASTER a
send-back and a commit are answered only once the slave has them, a delay delivery
wakes the writers at once, and with no slave they are stored all the same."""

from __future__ import annotations

import pytest

from rocketmq_core.broker.ha import master as ha_master
from rocketmq_core.protocol.codes import ResponseCode
from rocketmq_core.protocol.constants import SCHEDULE_TOPIC
from rocketmq_core.protocol.message import (
    TRANSACTION_COMMIT,
    decode_offset_msg_id,
    decode_record,
    encode_properties,
)
from tests.missing import missing

from .test_ha import TOPIC, master_config, send, serving, slave_config, until
from .test_processors import send_back_request
from .test_transactions import end_request, half_request
from .wire import send_request

pytestmark = pytest.mark.anyio

RETRY_LEVEL_QUEUE = 2  # a first send-back waits at delay level 3: queue 2 of SCHEDULE_TOPIC


def commit_log_offset(sent) -> int:
    return decode_offset_msg_id(sent.ext_fields["msgId"])[1]


def delayed_send_request(level: int):
    request = send_request()
    request.ext_fields["i"] = encode_properties({"TAGS": "TagA", "DELAY": str(level)})
    return request


def delay_service(broker):
    service = broker.services.get("delay_levels")
    if service is None:
        missing("the delay_scheduler plugin (requirements.txt) is not installed")
    return service


async def records_on(broker, topic, queue_id=0):
    result = await broker.store.get(topic, queue_id, 0, 32)
    return [decode_record(bytes(record)) for record in result.records]


async def test_a_send_back_is_answered_once_the_slave_has_it(
    tmp_path, namesrv, client, plugin_host
):
    async with (
        serving(master_config(tmp_path, namesrv, "SYNC_MASTER"), plugin_host) as master,
        serving(slave_config(tmp_path, namesrv), plugin_host) as slave,
    ):
        master.topics.update(TOPIC)
        await until(lambda: master.ha.progress.connections == 1)
        sent = await send(client, master)
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        request = send_back_request(commit_log_offset(sent))
        reply = await client.invoke(master.address, request, timeout=10)
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        # no wait for the writers' poll here: the answer came after the slave's ack
        assert slave.store.max_offset(SCHEDULE_TOPIC, RETRY_LEVEL_QUEUE) == 1
        (retried,) = await records_on(slave, SCHEDULE_TOPIC, RETRY_LEVEL_QUEUE)
    assert (retried.body, retried.properties["REAL_TOPIC"]) == (b"hello", "%RETRY%CG")


async def test_a_committed_transaction_message_is_answered_once_the_slave_has_it(
    tmp_path, namesrv, client, plugin_host
):
    async with (
        serving(master_config(tmp_path, namesrv, "SYNC_MASTER"), plugin_host) as master,
        serving(slave_config(tmp_path, namesrv), plugin_host) as slave,
    ):
        master.topics.update(TOPIC)
        await until(lambda: master.ha.progress.connections == 1)
        half = await client.invoke(master.address, half_request(), timeout=10)
        assert half.code == ResponseCode.SUCCESS, half.remark
        assert slave.store.max_offset("Orders", 0) == 0  # a half is not in its topic yet
        ended = await client.invoke(master.address, end_request(half, TRANSACTION_COMMIT))
        assert ended.code == ResponseCode.SUCCESS, ended.remark
        assert slave.store.max_offset("Orders", 0) == 1
        (committed,) = await records_on(slave, "Orders")
    assert (committed.body, committed.properties["UNIQ_KEY"]) == (b"hello", "U1")


async def test_a_delayed_message_delivery_wakes_the_writers_for_the_slave(
    tmp_path, namesrv, client, plugin_host, monkeypatch
):
    # the writers' idle poll made longer than the test: only a wake-up sends the delivery
    monkeypatch.setattr(ha_master, "POLL_INTERVAL", 60.0)
    async with (
        serving(master_config(tmp_path, namesrv, "SYNC_MASTER"), plugin_host) as master,
        serving(slave_config(tmp_path, namesrv), plugin_host) as slave,
    ):
        delays = delay_service(master)
        master.topics.update(TOPIC)
        await until(lambda: master.ha.progress.connections == 1)
        sent = await client.invoke(master.address, delayed_send_request(1), timeout=10)
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        assert slave.store.max_offset("Orders", 0) == 0
        await until(lambda: delays.delivered == 1)  # delay level 1: a second
        # a delivery does not wait for a slave (WAIT=false, as Java's), but wakes the writers
        await until(lambda: slave.store.max_offset("Orders", 0) == 1)
        (delivered,) = await records_on(slave, "Orders")
    assert (delivered.body, delivered.properties["REAL_TOPIC"]) == (b"hello", "Orders")


async def test_without_a_slave_the_broker_puts_are_stored_and_say_so(
    tmp_path, namesrv, client, plugin_host
):
    async with serving(master_config(tmp_path, namesrv, "SYNC_MASTER"), plugin_host) as master:
        delays = delay_service(master)
        master.topics.update(TOPIC)
        delayed = await client.invoke(master.address, delayed_send_request(1), timeout=10)
        assert delayed.code == ResponseCode.SLAVE_NOT_AVAILABLE
        sent = await send(client, master)
        assert sent.code == ResponseCode.SLAVE_NOT_AVAILABLE
        request = send_back_request(commit_log_offset(sent))
        sent_back = await client.invoke(master.address, request, timeout=10)
        assert (sent_back.code, sent_back.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "SLAVE_NOT_AVAILABLE",
        )
        assert master.store.max_offset(SCHEDULE_TOPIC, RETRY_LEVEL_QUEUE) == 1  # stored
        # END_TRANSACTION counts a commit stored on no slave as done
        half = await client.invoke(master.address, half_request(), timeout=10)
        ended = await client.invoke(master.address, end_request(half, TRANSACTION_COMMIT))
        assert ended.code == ResponseCode.SUCCESS, ended.remark
        # the delivery waits for no slave: delivered once, not refused and tried again
        await until(lambda: delays.delivered == 1)
        bodies = [record.body for record in await records_on(master, "Orders")]
    assert len(bodies) == 3  # the send, the commit and the delivery, once each
