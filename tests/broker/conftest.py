"""A broker on a temp store, a name server and a remoting client, for the tests over TCP;
the send runs' counter (send_frames)."""

from __future__ import annotations

import pytest

from rocketmq_core.broker.app import Broker
from rocketmq_core.broker.processors import send_fast
from rocketmq_core.namesrv.server import NameServer
from rocketmq_core.protocol.codec import FrameDecoder
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


class CountingRuns:
    """send_fast's compiled helper, counting the frames its serve_sends answered."""

    def __init__(self) -> None:
        self.helper = send_fast.compiled
        self.served = 0

    def __getattr__(self, name):
        return getattr(self.helper, name)

    def serve_sends(self, run, source, position):
        result = self.helper.serve_sends(run, source, position)
        if result[1] is not None:
            self.served += len(FrameDecoder().feed(result[1]))
        return result


@pytest.fixture
def runs(monkeypatch) -> CountingRuns:
    if send_fast.compiled is None:
        pytest.fail("rocketmq_core.broker.processors._send_fast is not built")
    counting = CountingRuns()
    monkeypatch.setattr(send_fast, "compiled", counting)
    return counting
