"""A broker on a temp store, a name server and a remoting client, for the tests over TCP."""

from __future__ import annotations

import pytest

from rocketmq_core.broker.app import Broker
from rocketmq_core.namesrv.server import NameServer
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.testing.broker import broker_config
from rocketmq_core.testing.namesrv import namesrv_config


@pytest.fixture
async def broker(tmp_path, plugin_host):
    async with Broker.serving(broker_config(tmp_path), host=plugin_host) as running:
        yield running


@pytest.fixture
async def client(plugin_host):
    async with RemotingClient(plugin_host.registry.transports.get("tcp")) as remoting:
        yield remoting


@pytest.fixture
async def namesrv(tmp_path, plugin_host):
    async with NameServer.serving(namesrv_config(tmp_path / "ns"), host=plugin_host) as running:
        yield running
