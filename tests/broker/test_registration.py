"""The broker's registration with its name servers follows its topic table."""

from __future__ import annotations

import anyio
import pytest

from rocketmq_core.broker.app import Broker
from rocketmq_core.namesrv.server import NameServer
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
