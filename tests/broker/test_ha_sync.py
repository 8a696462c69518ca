"""A slave's copy of its master's tables (HA.md §5), the VIP port, and what runs on a master
only (HA.md §8): in-process brokers on loopback with mmap stores, as in test_ha.py."""

from __future__ import annotations

import socket
import time

import anyio
import pytest
from anyio.abc import SocketAttribute
from rocketmq_delay_scheduler.checkpoint import TimerCheckpoint
from rocketmq_delay_scheduler.wheel import DoneLog

from rocketmq_core.broker.config import BrokerConfig
from rocketmq_core.errors import ConfigError
from rocketmq_core.protocol.bodies import SubscriptionGroupConfig, TopicConfig
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.constants import SCHEDULE_TOPIC, TIMER_TOPIC
from rocketmq_core.protocol.headers import UpdateConsumerOffsetRequestHeader
from rocketmq_core.protocol.message import encode_properties
from rocketmq_core.testing.broker import broker_config
from rocketmq_core.testing.ports import free_port
from tests.processes import listen_port_with_free_neighbours

from .test_ha import master_config, serving, slave_config, until
from .wire import send_request

pytestmark = pytest.mark.anyio


TOPIC = TopicConfig("Orders", 2, 2)
SYNC_SETTINGS = {"slave_sync_delay": 50, "slave_sync_interval": 100}


def fast_slave_config(tmp_path, namesrv, **overrides):
    return slave_config(tmp_path, namesrv, **SYNC_SETTINGS, **overrides)


def commit_request(group, topic, queue_id, offset):
    fields = UpdateConsumerOffsetRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, commit_offset=offset
    ).to_ext_fields()
    return RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, fields)


async def test_a_topic_created_on_the_master_appears_on_the_slave(tmp_path, namesrv, plugin_host):
    async with (
        serving(master_config(tmp_path, namesrv), plugin_host) as master,
        serving(fast_slave_config(tmp_path, namesrv), plugin_host) as slave,
    ):
        assert slave.topics.get("Orders") is None
        master.topics.update(TOPIC)
        await until(lambda: slave.topics.get("Orders") is not None)
        assert slave.topics.get("Orders") == TOPIC
        assert slave.topics.data_version == master.topics.data_version
        await until(lambda: "Orders" in (tmp_path / "slave/config/topics.json").read_text())
        master.topics.delete("Orders")  # replaced whole: a topic gone on the master goes
        await until(lambda: slave.topics.get("Orders") is None)


async def test_offsets_committed_on_the_master_reach_the_slave_and_the_slaves_own_stay(
    tmp_path, namesrv, client, plugin_host
):
    async with (
        serving(master_config(tmp_path, namesrv), plugin_host) as master,
        serving(fast_slave_config(tmp_path, namesrv), plugin_host) as slave,
    ):
        master.topics.update(TOPIC)
        slave.offsets.commit("OnlyOnSlave", "Orders", 0, 7)  # a key the master lacks
        for queue_id, offset in ((0, 42), (1, 17)):
            reply = await client.invoke(
                master.address, commit_request("CG", "Orders", queue_id, offset), timeout=10
            )
            assert reply.code == ResponseCode.SUCCESS, reply.remark
        await until(lambda: slave.offsets.offsets("CG", "Orders") == {0: 42, 1: 17})
        assert slave.offsets.query("OnlyOnSlave", "Orders", 0) == 7

        def persisted():
            path = tmp_path / "slave/config/consumerOffset.json"
            return path.exists() and "Orders@CG" in path.read_text()

        await until(persisted)


async def test_a_group_created_on_the_master_appears_on_the_slave(tmp_path, namesrv, plugin_host):
    async with (
        serving(master_config(tmp_path, namesrv), plugin_host) as master,
        serving(fast_slave_config(tmp_path, namesrv), plugin_host) as slave,
    ):
        master.groups.update(SubscriptionGroupConfig("Billing", retry_max_times=3))
        await until(lambda: "Billing" in slave.groups.table)
        assert slave.groups.table["Billing"].retry_max_times == 3
        assert slave.groups.data_version == master.groups.data_version


async def test_a_group_a_slave_makes_for_a_pull_leaves_its_copy_in_step(
    tmp_path, namesrv, plugin_host
):
    """A group made on first use on a slave keeps the master's version: the sync neither
    replaces the table nor writes the file each interval for it."""
    async with (
        serving(master_config(tmp_path, namesrv), plugin_host) as master,
        serving(fast_slave_config(tmp_path, namesrv), plugin_host) as slave,
    ):
        master.groups.update(SubscriptionGroupConfig("Billing"))
        await until(lambda: "Billing" in slave.groups.table)
        sync = slave.services["slave_sync"]
        rounds = sync.rounds
        # the round that copied it has persisted (rounds take longer on a loaded machine)
        await until(lambda: sync.rounds > rounds, timeout=30)
        assert slave.groups.find("ReaderOnSlave") is not None
        assert slave.groups.data_version == master.groups.data_version
        path = tmp_path / "slave/config/subscriptionGroup.json"
        written = path.stat().st_mtime_ns
        rounds = sync.rounds
        await until(lambda: sync.rounds >= rounds + 2, timeout=30)
        assert "ReaderOnSlave" in slave.groups.table
        assert path.stat().st_mtime_ns == written


async def test_the_masters_delay_offsets_are_kept_verbatim_on_the_slave(
    tmp_path, namesrv, plugin_host
):
    async with (
        serving(master_config(tmp_path, namesrv), plugin_host) as master,
        serving(fast_slave_config(tmp_path, namesrv), plugin_host) as slave,
    ):
        master.services["delay_levels"].table.advance(3, 12)
        await until(lambda: slave.services["delay_levels"].table.offsets.get(3) == 12)
        text = (tmp_path / "slave/config/delayOffset.json").read_bytes()
        assert text == master.services["delay_levels"].table.encode()


async def test_a_slave_without_a_known_master_does_not_sync(tmp_path, namesrv, plugin_host):
    async with serving(fast_slave_config(tmp_path, namesrv), plugin_host) as slave:
        await anyio.sleep(0.3)
        assert slave.services["slave_sync"].rounds == 0
    async with serving(master_config(tmp_path, namesrv), plugin_host) as master:
        assert "slave_sync" not in master.services  # a master runs no sync


async def test_a_slave_runs_no_delay_delivery(tmp_path, namesrv, client, plugin_host):
    async with serving(fast_slave_config(tmp_path, namesrv), plugin_host) as slave:
        async with serving(master_config(tmp_path, namesrv), plugin_host) as master:
            master.topics.update(TOPIC)
            slave.ha.client.reconnect_delay = 0.1
            slave.request_registration()  # learn the master's HA address now
            request = send_request()
            request.ext_fields["i"] = encode_properties({"TAGS": "TagA", "DELAY": "1"})
            reply = await client.invoke(master.address, request, timeout=10)
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            await until(lambda: slave.store.max_offset(SCHEDULE_TOPIC, 0) == 1)
            replicated_end = slave.store.max_commit_log_offset
        # the master is gone before the message is due (level 1: 1 s); the slave must not
        # deliver it: its CommitLog is the master's, byte for byte
        await anyio.sleep(1.5)
        assert slave.store.max_offset("Orders", 0) == 0
        assert slave.store.max_commit_log_offset == replicated_end


def timer_request(deliver_ms: int, n: int):
    request = send_request(body=f"t{n}".encode())
    properties = {"TAGS": "TagA", "UNIQ_KEY": f"T{n}", "TIMER_DELIVER_MS": str(deliver_ms)}
    request.ext_fields["i"] = encode_properties(properties)
    return request


async def test_a_slave_keeps_the_masters_timer_progress_and_resumes_from_it_as_master(
    tmp_path, namesrv, client, plugin_host
):
    async with (
        serving(master_config(tmp_path, namesrv), plugin_host) as master,
        serving(fast_slave_config(tmp_path, namesrv), plugin_host) as slave,
    ):
        master.topics.update(TOPIC)
        slave.ha.client.reconnect_delay = 0.1
        slave.request_registration()  # learn the master's HA address now
        now = int(time.time() * 1000)
        due = [now + 200] * 3 + [now + 5000]  # three fire here, one after the promotion
        for n, deliver_ms in enumerate(due):
            reply = await client.invoke(master.address, timer_request(deliver_ms, n), timeout=10)
            assert reply.code == ResponseCode.SUCCESS, reply.remark
        await until(lambda: master.store.max_offset("Orders", 0) == 3)
        master_timers, slave_timers = master.services["timer_wheel"], slave.services["timer_wheel"]

        def slave_has_the_masters_progress():
            progress = slave_timers.checkpoint.progress
            return progress == master_timers.checkpoint.progress and DoneLog.decode(
                progress
            ).is_done(2)

        # 10 s: a loaded CI machine once took longer than 5 for the synchronizer's rounds
        await until(slave_has_the_masters_progress, timeout=10)
        await until(lambda: slave.store.max_offset("Orders", 0) == 3)
        await until(lambda: slave.store.max_offset(TIMER_TOPIC, 0) == 4)
        over_the_wire = await client.invoke(
            slave.address, RemotingCommand.request(RequestCode.GET_TIMER_CHECK_POINT, {}), 10
        )
    slave_file = (tmp_path / "slave/config/timerProgress").read_bytes()
    assert slave_file == master_timers.checkpoint.progress
    checkpoint = TimerCheckpoint.decode(over_the_wire.body)
    assert (checkpoint.last_timer_queue_offset, checkpoint.progress) == (0, slave_file)
    assert checkpoint.last_read_time_ms >= now + 200  # every timer due before it is finished

    # the slave's disk, started as the master: the one timer left is delivered, the three
    # the old master delivered are not delivered again
    promoted = broker_config(tmp_path / "slave", namesrv.address, broker_role="ASYNC_MASTER")
    async with serving(promoted, plugin_host) as new_master:
        await until(lambda: new_master.store.max_offset("Orders", 0) == 4, timeout=10)
        await anyio.sleep(0.5)  # time enough to deliver any of the three again
        delivered = new_master.store.max_offset("Orders", 0)
    assert delivered == 4


def test_the_sync_settings_are_broker_conf_keys(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("slaveSyncDelay=10\nslaveSyncInterval=20\nfastListenPort=20909\n")
    config = BrokerConfig.load(conf)
    assert (config.slave_sync_delay, config.slave_sync_interval) == (10, 20)
    assert config.fast_listen_port == 20909


async def test_the_slave_asks_the_masters_vip_port_for_topics(tmp_path, namesrv, plugin_host):
    config = master_config(tmp_path, namesrv, listen_port=listen_port_with_free_neighbours())
    async with serving(config, plugin_host) as master:
        assert master.config.fast_listen_port == master.config.listen_port - 2
        master.topics.update(TOPIC)
        async with serving(fast_slave_config(tmp_path, namesrv), plugin_host) as slave:
            await until(lambda: slave.topics.get("Orders") is not None)
        assert master.vip_server.accepted["tcp"] >= 1


async def test_a_vip_port_that_never_answers_costs_the_slave_one_round_only(
    tmp_path, namesrv, plugin_host
):
    """listenPort - 2 held by a program that takes the request and never answers: the
    first round waits out the request's timeout, the later ones ask the main port."""
    port = free_port(neighbours=(-2, 1, 2))
    vip = port + 2  # the master's own VIP port elsewhere
    config = master_config(tmp_path, namesrv, listen_port=port, fast_listen_port=vip)
    with socket.socket() as silent:
        silent.bind(("0.0.0.0", port - 2))
        silent.listen()
        async with serving(config, plugin_host) as master:
            master.topics.update(TOPIC)
            async with serving(fast_slave_config(tmp_path, namesrv), plugin_host) as slave:
                await until(lambda: slave.topics.get("Orders") is not None, timeout=30)
                sync = slave.services["slave_sync"]
                rounds = sync.rounds
                # 100 ms apart now; 5 rounds of a 3 s timeout each would take 15 s
                await until(lambda: sync.rounds >= rounds + 5, timeout=8)


async def test_the_vip_port_answers_what_the_main_port_answers(tmp_path, client, plugin_host):
    async with serving(broker_config(tmp_path), plugin_host) as broker:
        broker.topics.update(TOPIC)
        vip = f"127.0.0.1:{broker.config.fast_listen_port}"
        assert broker.config.fast_listen_port not in (0, broker.config.listen_port)
        reply = await client.invoke(vip, send_request(), timeout=10)
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        topics = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG, {})
        listed = await client.invoke(vip, topics, timeout=10)
        assert broker.store.max_offset("Orders", 0) == 1
    assert listed.code == ResponseCode.SUCCESS and b'"Orders"' in listed.body


async def test_a_taken_vip_port_is_a_one_line_start_error(tmp_path, plugin_host):
    async with await anyio.create_tcp_listener(local_host="0.0.0.0") as taken:
        port = taken.extra(SocketAttribute.local_port)
        config = broker_config(tmp_path, fast_listen_port=port)
        with pytest.raises((ConfigError, ExceptionGroup)) as raised:
            async with serving(config, plugin_host):
                pass
    error = raised.value
    while isinstance(error, ExceptionGroup):  # the task groups' wrapping, as for listenPort
        (error,) = error.exceptions
    assert isinstance(error, ConfigError)
    message = str(error)
    assert message.startswith("the VIP port (fastListenPort, listenPort - 2): cannot listen on")
    assert f":{port}" in message and "\n" not in message


def test_the_vip_port_is_listen_port_minus_two_unless_set():
    assert BrokerConfig(listen_port=10911).vip_port() == 10909
    assert BrokerConfig(listen_port=0).vip_port() == 0
    assert BrokerConfig(listen_port=10911, fast_listen_port=20000).vip_port() == 20000
    with pytest.raises(ConfigError, match="listenPort 2 leaves no VIP port"):
        BrokerConfig(listen_port=2).validate()
