"""Master/slave replication: in-process brokers on loopback with mmap stores (HA.md).

The slave learns its master's HA address from the name server's REGISTER_BROKER reply,
as Java's does; what a slave serves, what it refuses, and what a SYNC_MASTER answers
are checked over the wire.
"""

from __future__ import annotations

import socket
from contextlib import asynccontextmanager
from itertools import pairwise

import anyio
import pytest
from anyio.abc import SocketAttribute, SocketStream

from rocketmq_core.broker.app import Broker
from rocketmq_core.broker.processors import send_fast
from rocketmq_core.protocol.bodies import TopicConfig
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.ha import TransferReader, encode_offset_report, encode_transfer_header
from rocketmq_core.protocol.headers import CreateTopicRequestHeader
from rocketmq_core.protocol.message import BatchItem, encode_batch, encode_properties, iter_records
from rocketmq_core.remoting.connection import Connection, LaterAnswer
from rocketmq_core.testing.broker import broker_config

from .wire import pull_request, send_request

pytestmark = pytest.mark.anyio

TOPIC = TopicConfig("Orders", 1, 1)
PEER = "127.0.0.1:40000"


def master_config(tmp_path, namesrv, role="ASYNC_MASTER", **overrides):
    return broker_config(tmp_path / "master", namesrv.address, broker_role=role, **overrides)


def slave_config(tmp_path, namesrv, **overrides):
    config = broker_config(tmp_path / "slave", namesrv.address, broker_role="SLAVE", **overrides)
    config.broker_id = 1
    return config


@asynccontextmanager
async def serving(config, plugin_host):
    async with Broker.serving(config, host=plugin_host) as broker:
        yield broker


async def until(predicate, timeout=5.0):
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.01)


async def send(client, broker, body=b"hello", **fields):
    return await client.invoke(broker.address, send_request(body=body, **fields), timeout=10)


class FakeSlave:
    """A slave on the HA wire without a store: it reports 0 (start at the master's last
    file), then, when ``acking``, the end of every frame it reads; ``report`` sends one."""

    def __init__(self, stream, acking: bool) -> None:
        self.stream = stream
        self.acking = acking
        self.received = 0  # the end of the last frame read

    @classmethod
    @asynccontextmanager
    async def following(cls, master, *, acking=True):
        stream = await anyio.connect_tcp("127.0.0.1", master.config.ha_listen_port)
        async with stream, anyio.create_task_group() as group:
            slave = cls(stream, acking)
            await slave.report(0)
            await until(lambda: master.ha.progress.connections == 1)
            group.start_soon(slave._read)
            yield slave
            group.cancel_scope.cancel()

    async def report(self, offset: int) -> None:
        await self.stream.send(encode_offset_report(offset))

    async def _read(self) -> None:
        reader = TransferReader()
        while True:
            for transfer in reader.feed(await self.stream.receive()):
                self.received = transfer.offset + len(transfer.body)
                if self.acking and transfer.body:
                    await self.report(self.received)


async def test_the_slave_serves_the_masters_messages_at_the_same_offsets_and_ids(
    tmp_path, namesrv, client, plugin_host
):
    async with serving(master_config(tmp_path, namesrv), plugin_host) as master:
        master.topics.update(TOPIC)
        sent = [await send(client, master, f"m{n}".encode()) for n in range(5)]
        assert {reply.code for reply in sent} == {ResponseCode.SUCCESS}
        async with serving(slave_config(tmp_path, namesrv), plugin_host) as slave:
            assert slave.ha is not None and master.ha is not None
            # no topic sync yet: the slave is given the topic by hand
            slave.topics.update(TOPIC)
            more = [await send(client, master, f"n{n}".encode()) for n in range(3)]
            await until(lambda: slave.store.max_offset("Orders", 0) == 8)
            assert slave.store.max_commit_log_offset == master.store.max_commit_log_offset
            await until(lambda: master.ha.progress.acked == master.store.max_commit_log_offset)
            pulled = await client.invoke(slave.address, pull_request(), timeout=10)
    assert pulled.code == ResponseCode.SUCCESS, pulled.remark
    records = list(iter_records(pulled.body))
    bodies = [b"m0", b"m1", b"m2", b"m3", b"m4", b"n0", b"n1", b"n2"]
    assert [record.body for record in records] == bodies
    assert [record.queue_offset for record in records] == list(range(8))
    sent_ids = [reply.ext_fields["msgId"] for reply in sent + more]
    assert [record.offset_msg_id for record in records] == sent_ids


async def test_a_slave_refuses_writes_and_says_where_to_send(
    tmp_path, namesrv, client, plugin_host
):
    async with (
        serving(master_config(tmp_path, namesrv), plugin_host),
        serving(slave_config(tmp_path, namesrv), plugin_host) as slave,
    ):
        refused = await send(client, slave)
        fields = CreateTopicRequestHeader(
            topic="Fresh",
            default_topic="TBW102",
            read_queue_nums=1,
            write_queue_nums=1,
            perm=6,
            topic_filter_type="SINGLE_TAG",
        ).to_ext_fields()
        create = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
        not_created = await client.invoke(slave.address, create, timeout=10)
        group = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {})
        group_not_created = await client.invoke(slave.address, group, timeout=10)
        back = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, {})
        not_sent_back = await client.invoke(slave.address, back, timeout=10)
    assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
    assert refused.remark.startswith("service not available now.")
    assert "broker-a (brokerId 1" in refused.remark and "SLAVE" in refused.remark
    assert not_created.code == ResponseCode.SYSTEM_ERROR
    assert not_created.remark.startswith("Can't modify topic or subscription group from slave")
    assert (group_not_created.code, group_not_created.remark) == (
        not_created.code,
        not_created.remark,
    )
    assert not_sent_back.code == ResponseCode.SYSTEM_ERROR
    assert not_sent_back.remark.startswith("SERVICE_NOT_AVAILABLE")


async def test_a_sync_master_answers_send_ok_once_the_slave_has_the_message(
    tmp_path, namesrv, client, plugin_host
):
    async with (
        serving(master_config(tmp_path, namesrv, "SYNC_MASTER"), plugin_host) as master,
        serving(slave_config(tmp_path, namesrv), plugin_host) as slave,
    ):
        master.topics.update(TOPIC)
        await until(lambda: master.ha.progress.connections == 1)
        replies = [await send(client, master, f"s{n}".encode()) for n in range(20)]
        assert [reply.code for reply in replies] == [ResponseCode.SUCCESS] * 20
        # answered only once acked: the slave had each one when its producer heard SEND_OK
        assert master.ha.progress.acked >= master.store.max_commit_log_offset
        assert slave.store.max_offset("Orders", 0) == 20


async def test_a_sync_master_without_a_slave_stores_and_answers_slave_not_available(
    tmp_path, namesrv, client, plugin_host
):
    async with serving(master_config(tmp_path, namesrv, "SYNC_MASTER"), plugin_host) as master:
        master.topics.update(TOPIC)
        with anyio.fail_after(1):  # at once, not after slaveTimeout
            reply = await send(client, master)
        assert reply.code == ResponseCode.SLAVE_NOT_AVAILABLE
        assert reply.ext_fields["msgId"] and reply.ext_fields["queueOffset"] == "0"
        assert master.store.max_offset("Orders", 0) == 1  # stored all the same
        # a producer that does not wait for the store (WAIT=false) is not told either
        request = send_request()
        request.ext_fields["i"] = encode_properties({"TAGS": "TagA", "WAIT": "false"})
        unwaited = await client.invoke(master.address, request, timeout=10)
        assert unwaited.code == ResponseCode.SUCCESS, unwaited.remark


async def test_a_sync_master_answers_flush_slave_timeout_when_the_slave_stops_acking(
    tmp_path, namesrv, client, plugin_host
):
    config = master_config(tmp_path, namesrv, "SYNC_MASTER", slave_timeout=300)
    async with serving(config, plugin_host) as master:
        master.topics.update(TOPIC)
        # a "slave" that reports once and then never again
        stalled = await anyio.connect_tcp("127.0.0.1", master.config.ha_listen_port)
        async with stalled:
            await stalled.send(encode_offset_report(0))
            await until(lambda: master.ha.progress.connections == 1)
            started = anyio.current_time()
            reply = await send(client, master)
            waited = anyio.current_time() - started
        assert reply.code == ResponseCode.FLUSH_SLAVE_TIMEOUT
        assert reply.ext_fields["msgId"]
        assert 0.25 <= waited < 3
        assert master.ha.progress.waiting == 0  # the timed-out waiter was let go


async def test_a_sync_master_answers_a_waiting_send_when_the_slave_acks_its_end_not_before(
    tmp_path, namesrv, client, plugin_host
):
    async with serving(master_config(tmp_path, namesrv, "SYNC_MASTER"), plugin_host) as master:
        master.topics.update(TOPIC)
        async with FakeSlave.following(master, acking=False) as slave:
            replies = []

            async def send_one(body):
                replies.append(await send(client, master, body))

            async with anyio.create_task_group() as group:
                group.start_soon(send_one, b"first")
                await until(lambda: master.ha.progress.waiting == 1)
                first_end = master.store.max_commit_log_offset
                group.start_soon(send_one, b"second")
                await until(lambda: master.ha.progress.waiting == 2)
                await until(lambda: slave.received == master.store.max_commit_log_offset)
                await slave.report(first_end - 1)  # short of the first's end: no answer
                await anyio.sleep(0.1)
                assert replies == [] and master.ha.progress.acked == first_end - 1
                await slave.report(first_end)  # the first's end: the first only
                await until(lambda: len(replies) == 1)
                await anyio.sleep(0.05)
                assert len(replies) == 1 and master.ha.progress.waiting == 1
                await slave.report(slave.received)
        first, second = replies
        assert (first.code, second.code) == (ResponseCode.SUCCESS, ResponseCode.SUCCESS)
        assert (first.ext_fields["queueOffset"], second.ext_fields["queueOffset"]) == ("0", "1")
        assert first.remark is None and first.ext_fields["transactionId"] == "U1"
        assert master.ha.progress.waiting == 0


async def test_a_sync_master_answers_flush_slave_timeout_on_every_kind_of_send(
    tmp_path, namesrv, client, plugin_host
):
    """A single send (the fast path) and a batch (the general path), both stored; with
    SYNC_FLUSH too (the flush, then the slave, each a callback)."""
    batch = encode_batch([BatchItem(0, b"one", b""), BatchItem(0, b"two", b"")])
    requests = [send_request(), send_request(body=batch, batch=True)]
    requests[1].code = RequestCode.SEND_BATCH_MESSAGE
    replies: dict[int, tuple[RemotingCommand, float]] = {}

    async def send_one(master, number, request):
        started = anyio.current_time()
        reply = await client.invoke(master.address, request, timeout=10)
        replies[number] = (reply, anyio.current_time() - started)

    for flush in ("ASYNC_FLUSH", "SYNC_FLUSH"):
        config = master_config(
            tmp_path / flush, namesrv, "SYNC_MASTER", slave_timeout=300, flush_disk_type=flush
        )
        async with serving(config, plugin_host) as master:
            master.topics.update(TOPIC)
            async with FakeSlave.following(master, acking=False):
                replies.clear()
                async with anyio.create_task_group() as group:
                    for number, request in enumerate(requests):
                        group.start_soon(send_one, master, number, request)
            for number, (reply, waited) in replies.items():
                assert reply.code == ResponseCode.FLUSH_SLAVE_TIMEOUT, (flush, number)
                assert reply.remark is None and reply.ext_fields["msgId"], (flush, number)
                assert 0.25 <= waited < 3, (flush, number)
            assert replies[1][0].ext_fields["queueOffset"] in ("0", "1")
            assert master.store.max_offset("Orders", 0) == 3  # stored all the same
            assert master.ha.progress.waiting == 0


async def test_a_sync_masters_usual_send_waits_for_the_slave_without_a_task(
    tmp_path, namesrv, client, plugin_host
):
    async with serving(master_config(tmp_path, namesrv, "SYNC_MASTER"), plugin_host) as master:
        master.topics.update(TOPIC)
        ours, theirs = socket.socketpair()
        async with FakeSlave.following(master), await SocketStream.from_socket(theirs):
            connection = Connection(
                await SocketStream.from_socket(ours), master.server.processors, peer_address=PEER
            )
            request = send_request()
            waiting = send_fast.fast_send(master, connection.context, request)
            assert type(waiting) is LaterAnswer and waiting.request is request
            assert master.ha.progress.waiting == 1
            await until(lambda: master.ha.progress.waiting == 0)
            assert waiting.answered
            await connection.aclose()


async def test_a_slave_follows_its_master_again_after_the_master_restarts(
    tmp_path, namesrv, client, plugin_host
):
    config = master_config(tmp_path, namesrv)
    async with serving(slave_config(tmp_path, namesrv), plugin_host) as slave:
        slave.topics.update(TOPIC)
        async with serving(config, plugin_host) as master:
            master.topics.update(TOPIC)
            slave.ha.client.reconnect_delay = 0.1  # Java's 5 s would make this test slow
            slave.request_registration()  # learn the master's HA address now, not in 30 s
            for n in range(3):
                await send(client, master, f"before{n}".encode())
            await until(lambda: slave.store.max_offset("Orders", 0) == 3)
        await until(lambda: slave.ha.client.connected_to is None)  # the master is gone
        async with serving(config, plugin_host) as master:  # same ports, same store
            for n in range(4):
                await send(client, master, f"after{n}".encode())
            await until(lambda: slave.store.max_offset("Orders", 0) == 7)
            assert slave.store.max_commit_log_offset == master.store.max_commit_log_offset
            pulled = await client.invoke(slave.address, pull_request(offset=3), timeout=10)
    bodies = [record.body for record in iter_records(pulled.body)]
    assert bodies == [b"after0", b"after1", b"after2", b"after3"]


async def test_a_slave_reports_at_once_then_every_interval_and_drops_a_bad_stream(
    tmp_path, namesrv, plugin_host
):
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(SocketAttribute.local_port)
    config = slave_config(
        tmp_path, namesrv, ha_master_address=f"127.0.0.1:{port}", ha_send_heartbeat_interval=200
    )
    async with listener, serving(config, plugin_host) as slave:
        slave.ha.client.reconnect_delay = 0.1
        accept = listener.listeners[0].accept
        with anyio.fail_after(5):
            async with await accept() as first:
                # on connect, and again as the heartbeat with nothing appended (no timing
                # asserted: on a loaded machine the two may arrive close together)
                assert await first.receive(8) == encode_offset_report(0)
                assert await first.receive(8) == encode_offset_report(0)
                await first.send(encode_transfer_header(0, -1))  # no master sends that
                with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
                    while True:
                        await first.receive()
            async with await accept() as second:  # it came back, and reports again
                assert await second.receive(8) == encode_offset_report(0)


async def test_a_slave_that_reports_nothing_for_the_housekeeping_interval_is_closed(
    tmp_path, namesrv, plugin_host, caplog
):
    """haHousekeepingInterval: a master closes a slave silent that long (and no sooner,
    though it keeps sending to it)."""
    config = master_config(tmp_path, namesrv, ha_housekeeping_interval=1000)
    async with serving(config, plugin_host) as master:
        stream = await anyio.connect_tcp("127.0.0.1", master.config.ha_listen_port)
        async with stream:
            await stream.send(encode_offset_report(0))
            began = anyio.current_time()
            with anyio.fail_after(5):
                try:
                    while True:
                        await stream.receive()  # heartbeats, until the master closes
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    pass
            silent_for = anyio.current_time() - began
    assert 0.95 <= silent_for < 3
    assert "sent nothing for 1 s: closing" in caplog.text


async def test_an_idle_master_sends_a_slave_heartbeats_every_interval(
    tmp_path, namesrv, plugin_host
):
    """haSendHeartbeatInterval: with nothing appended, the writer still wakes (the HA
    port's tick) and sends an empty frame once that long has passed since its last."""
    config = master_config(tmp_path, namesrv, ha_send_heartbeat_interval=200)
    async with serving(config, plugin_host) as master:
        stream = await anyio.connect_tcp("127.0.0.1", master.config.ha_listen_port)
        async with stream:
            await stream.send(encode_offset_report(0))
            reader = TransferReader()
            frames = []
            with anyio.fail_after(5):
                while len(frames) < 4:
                    frames += [
                        (anyio.current_time(), t) for t in reader.feed(await stream.receive())
                    ]
    assert all(transfer.body == b"" for _, transfer in frames)
    gaps = [later - earlier for (earlier, _), (later, _) in pairwise(frames)]
    # measured where they arrive: one gap may shrink by a stall of this event loop
    assert all(0.05 <= gap < 1.0 for gap in gaps), gaps
    assert sum(gaps) / len(gaps) >= 0.15, gaps


async def test_a_slave_that_reports_within_the_housekeeping_interval_stays(
    tmp_path, namesrv, plugin_host
):
    config = master_config(tmp_path, namesrv, ha_housekeeping_interval=1000)
    async with serving(config, plugin_host) as master:
        stream = await anyio.connect_tcp("127.0.0.1", master.config.ha_listen_port)
        async with stream:
            for _ in range(8):  # 2.4 s in all, more than twice the interval
                await stream.send(encode_offset_report(0))
                await anyio.sleep(0.3)
            assert master.ha.progress.connections == 1
