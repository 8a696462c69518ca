"""The broker's registration with its name servers follows its topic table."""

from __future__ import annotations

import anyio
import pytest

from rocketmq_core.broker.app import Broker
from rocketmq_core.namesrv.server import NameServer
from rocketmq_core.plugins import load_plugins
from rocketmq_core.protocol.bodies import TopicConfig
from rocketmq_core.testing.broker import broker_config
from rocketmq_core.testing.namesrv import namesrv_config

pytestmark = pytest.mark.anyio


async def test_every_topic_change_reaches_the_name_server_without_waiting_30_s(
    tmp_path, plugin_host
):
    async with (
        NameServer.serving(namesrv_config(tmp_path / "ns"), host=plugin_host) as namesrv,
        Broker.serving(
            broker_config(tmp_path / "store", namesrv.address), host=plugin_host
        ) as broker,
    ):
        for topic in ("First", "Second", "Third"):
            broker.topics.update(TopicConfig(topic, 2, 2))
            with anyio.fail_after(5):
                while namesrv.routes.route(topic) is None:
                    await anyio.sleep(0.01)


async def test_a_failing_broker_service_stops_the_broker_gracefully_and_surfaces_its_error(
    tmp_path,
):
    class FailingService:
        async def run(self, *, task_status):
            task_status.started()
            await anyio.sleep(0.05)
            raise RuntimeError("the service failed")

    host = load_plugins(blocked=())  # its own: the shared one must not get this service
    host.registry.broker_services.add("failing", lambda broker: FailingService(), "test")
    with anyio.fail_after(20), pytest.raises(ExceptionGroup) as caught:
        async with Broker.serving(broker_config(tmp_path), host=host) as broker:
            with anyio.fail_after(5):
                await broker._stopped.wait()  # stopped by the failure, not by us
    assert caught.group_contains(RuntimeError, match="the service failed")
    # the graceful path ran: the store closed cleanly (no abort file) and the tables persisted
    assert not broker.ready
    assert not (tmp_path / "abort").exists()
    assert (tmp_path / "config" / "topics.json").exists()
