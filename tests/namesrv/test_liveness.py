"""Brokers leave the routes when they go silent or their connection closes."""

from __future__ import annotations

import anyio
import pytest

from rocketmq_core.namesrv.server import NameServer
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.testing.namesrv import namesrv_config, register_broker_request

pytestmark = pytest.mark.anyio

A, B = "127.0.0.1:10911", "127.0.0.3:10911"


async def route_code(client, namesrv, topic) -> int:
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return (await client.invoke(namesrv.address, request, timeout=5)).code


async def wait_for_route_code(client, namesrv, topic, code, within: float = 5.0) -> None:
    with anyio.fail_after(within):
        while await route_code(client, namesrv, topic) != code:
            await anyio.sleep(0.02)


@pytest.fixture
async def fast_namesrv(tmp_path, plugin_host):
    config = namesrv_config(
        tmp_path, scan_not_active_broker_interval=50, broker_channel_expired_time=400
    )
    async with NameServer.serving(config, host=plugin_host) as server:
        yield server


async def test_silent_broker_expires_and_its_connection_is_closed(fast_namesrv, plugin_host):
    transport = plugin_host.registry.transports.get("tcp")
    closed = anyio.Event()
    async with RemotingClient(transport) as broker, RemotingClient(transport) as reader:
        broker.on_connection_closed(lambda addr, conn: closed.set())
        await broker.invoke(
            fast_namesrv.address, register_broker_request(broker_addr=A, topics={"T": 4})
        )
        assert await route_code(reader, fast_namesrv, "T") == ResponseCode.SUCCESS
        await wait_for_route_code(reader, fast_namesrv, "T", ResponseCode.TOPIC_NOT_EXIST)
        with anyio.fail_after(5):
            await closed.wait()
        assert fast_namesrv.routes.live == {}


async def test_heartbeats_keep_a_broker_alive(fast_namesrv, plugin_host):
    transport = plugin_host.registry.transports.get("tcp")
    async with RemotingClient(transport) as broker:
        await broker.invoke(
            fast_namesrv.address, register_broker_request(broker_addr=A, topics={"T": 4})
        )
        fields = {"clusterName": "DefaultCluster", "brokerAddr": A, "brokerName": "broker-a"}
        for _ in range(12):  # 1.2 s, three times the expiry
            heartbeat = RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, fields)
            reply = await broker.invoke(fast_namesrv.address, heartbeat, timeout=5)
            assert reply.code == ResponseCode.SUCCESS
            await anyio.sleep(0.1)
        assert await route_code(broker, fast_namesrv, "T") == ResponseCode.SUCCESS


async def test_closed_connection_removes_its_broker_at_once(namesrv, plugin_host):
    # default timers (120 s): only the close can remove the broker within the test
    transport = plugin_host.registry.transports.get("tcp")
    async with RemotingClient(transport) as staying:
        await staying.invoke(
            namesrv.address,
            register_broker_request(broker_addr=B, broker_name="b", topics={"T": 4}),
        )
        async with RemotingClient(transport) as leaving:
            await leaving.invoke(
                namesrv.address,
                register_broker_request(broker_addr=A, topics={"T": 4, "ONLY_A": 1}),
            )
            assert await route_code(staying, namesrv, "ONLY_A") == ResponseCode.SUCCESS
        await wait_for_route_code(staying, namesrv, "ONLY_A", ResponseCode.TOPIC_NOT_EXIST)
        assert list(namesrv.routes.topic_queues["T"]) == ["b"]
