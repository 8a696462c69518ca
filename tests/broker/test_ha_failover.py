"""Failover, 4.x style (HA.md §8, docs/operations.md "Master and slave"): an operator
restarts a slave's store as the master; a slave that holds more than its master is
refused. In-process brokers on loopback with mmap stores, as in test_ha.py."""

from __future__ import annotations

import logging

import pytest

from rocketmq_core.protocol.bodies import TopicConfig
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.headers import (
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
)
from rocketmq_core.protocol.message import iter_records
from rocketmq_core.testing.broker import broker_config

from .test_ha import master_config, send, serving, slave_config, until
from .test_ha_sync import SYNC_SETTINGS, commit_request

pytestmark = pytest.mark.anyio


TOPIC = TopicConfig("Orders", 2, 2)
GROUP = "CG"
SENT_PER_QUEUE = 6


def pull_queue(queue_id, offset=0):
    header = PullMessageRequestHeader(
        consumer_group=GROUP,
        topic=TOPIC.topic_name,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=32,
        sys_flag=0x4,  # subscription in the request; no commit, no suspend
        commit_offset=0,
        suspend_timeout_millis=0,
        sub_version=0,
        subscription="*",
    )
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())


def query_offset(queue_id):
    header = QueryConsumerOffsetRequestHeader(
        consumer_group=GROUP, topic=TOPIC.topic_name, queue_id=queue_id
    )
    return RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext_fields())


async def served_messages(client, broker):
    """queue id -> [(queue offset, offset msgId, body)] as a consumer pulls them."""
    served = {}
    for queue_id in range(TOPIC.read_queue_nums):
        reply = await client.invoke(broker.address, pull_queue(queue_id), timeout=10)
        assert reply.code == ResponseCode.SUCCESS, (queue_id, reply.code, reply.remark)
        served[queue_id] = [
            (record.queue_offset, record.offset_msg_id, record.body)
            for record in iter_records(reply.body)
        ]
    return served


async def committed_offsets(client, broker):
    offsets = {}
    for queue_id in range(TOPIC.read_queue_nums):
        reply = await client.invoke(broker.address, query_offset(queue_id), timeout=10)
        assert reply.code == ResponseCode.SUCCESS, (queue_id, reply.code, reply.remark)
        offsets[queue_id] = int(reply.ext_fields["offset"])
    return offsets


def promoted_config(tmp_path, namesrv, role):
    """The slave's broker.conf, edited as docs/operations.md says: brokerId=0, a master role."""
    config = broker_config(tmp_path / "slave", namesrv.address, broker_role=role)
    config.broker_id = 0
    return config


@pytest.mark.parametrize("role", ["ASYNC_MASTER", "SYNC_MASTER"])
async def test_a_slave_restarted_as_master_serves_what_it_replicated(
    tmp_path, namesrv, client, plugin_host, role
):
    committed = {0: 4, 1: 2}
    async with (
        serving(master_config(tmp_path, namesrv), plugin_host) as master,
        serving(slave_config(tmp_path, namesrv, **SYNC_SETTINGS), plugin_host) as slave,
    ):
        master.topics.update(TOPIC)
        sent = {}
        for n in range(SENT_PER_QUEUE * TOPIC.write_queue_nums):
            queue_id = n % TOPIC.write_queue_nums
            reply = await send(client, master, f"m{n}".encode(), queue_id=queue_id)
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            sent.setdefault(queue_id, []).append(
                (int(reply.ext_fields["queueOffset"]), reply.ext_fields["msgId"], f"m{n}".encode())
            )
        for queue_id, offset in committed.items():
            reply = await client.invoke(
                master.address, commit_request(GROUP, "Orders", queue_id, offset), timeout=10
            )
            assert reply.code == ResponseCode.SUCCESS, reply.remark
        await until(
            lambda: all(
                slave.store.max_offset("Orders", queue_id) == SENT_PER_QUEUE
                for queue_id in committed
            )
        )
        await until(lambda: slave.offsets.offsets(GROUP, "Orders") == committed)
        assert slave.topics.get("Orders") == TOPIC
        replicated_end = master.store.max_commit_log_offset
        await until(lambda: slave.store.max_commit_log_offset == replicated_end)
    # both are down; the operator restarts the slave's directory as the master
    async with serving(promoted_config(tmp_path, namesrv, role), plugin_host) as promoted:
        assert promoted.ha is not None and promoted.ha.master is not None
        assert promoted.store.max_commit_log_offset == replicated_end
        assert await served_messages(client, promoted) == sent
        assert await committed_offsets(client, promoted) == committed
        # a new, empty slave follows the promoted master and gets it all, tables included
        fresh = broker_config(
            tmp_path / "new-slave", namesrv.address, broker_role="SLAVE", **SYNC_SETTINGS
        )
        fresh.broker_id = 1
        async with serving(fresh, plugin_host) as new_slave:
            await until(lambda: new_slave.store.max_commit_log_offset == replicated_end)
            await until(lambda: new_slave.offsets.offsets(GROUP, "Orders") == committed)
            await until(lambda: new_slave.topics.get("Orders") == TOPIC)
            assert await served_messages(client, new_slave) == sent
            # the promoted master takes writes, and the new slave has them at once
            reply = await send(client, promoted, b"after", queue_id=0)
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            assert reply.ext_fields["queueOffset"] == str(SENT_PER_QUEUE)
            await until(lambda: new_slave.store.max_offset("Orders", 0) == SENT_PER_QUEUE + 1)


async def test_a_slave_ahead_of_its_master_is_refused_and_reported_once(
    tmp_path, namesrv, client, plugin_host, caplog
):
    caplog.set_level(logging.INFO, logger="rocketmq.broker.ha")
    # reports every 100 ms, so the refuse-and-reconnect loop turns several times
    config = slave_config(tmp_path, namesrv, ha_send_heartbeat_interval=100)
    async with serving(config, plugin_host) as slave:
        slave.topics.update(TopicConfig("Orders", 1, 1))
        slave.ha.client.reconnect_delay = 0.1
        async with serving(master_config(tmp_path, namesrv), plugin_host) as master:
            master.topics.update(TopicConfig("Orders", 1, 1))
            slave.request_registration()  # learn the master's HA address now
            for n in range(3):
                await send(client, master, f"lost{n}".encode())
            await until(lambda: slave.store.max_offset("Orders", 0) == 3)
        slave_end = slave.store.max_commit_log_offset
        await until(lambda: slave.ha.client.connected_to is None)
        caplog.clear()
        # the old master's disk is gone: a new master starts empty (async loss)
        fresh = master_config(tmp_path / "fresh", namesrv, "SYNC_MASTER", slave_timeout=300)
        async with serving(fresh, plugin_host) as master:
            master.topics.update(TopicConfig("Orders", 1, 1))
            slave.request_registration()

            def refusals():
                return [r for r in caplog.records if "disconnected" in r.getMessage()]

            await until(lambda: len(refusals()) >= 3)
            reply = await send(client, master, b"new")
            assert reply.code in (
                ResponseCode.SLAVE_NOT_AVAILABLE,
                ResponseCode.FLUSH_SLAVE_TIMEOUT,
            )
            assert reply.ext_fields["msgId"]  # stored all the same
            assert master.ha.progress.acked == 0  # the ahead slave's report is no ack
            master_end = master.store.max_commit_log_offset
            await until(lambda: len(refusals()) >= 5)
            assert slave.store.max_commit_log_offset == slave_end  # it was sent nothing
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    ahead = [line for line in warnings if "ahead of this master" in line]
    assert len(ahead) == 1, warnings
    (line,) = ahead
    assert "127.0.0.1" in line and "\n" not in line
    assert f"end {slave_end}" in line and f"{slave_end} bytes" in line
    assert "promote" in line and "clear" in line
    assert master_end < slave_end
