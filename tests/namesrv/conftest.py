from __future__ import annotations

import pytest

from rocketmq_core.namesrv.server import NameServer
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.testing.namesrv import namesrv_config


@pytest.fixture
async def namesrv(tmp_path, plugin_host):
    async with NameServer.serving(namesrv_config(tmp_path), host=plugin_host) as server:
        yield server


@pytest.fixture
async def client(plugin_host):
    async with RemotingClient(plugin_host.registry.transports.get("tcp")) as remoting:
        yield remoting


class Caller:
    """Requests to one name server, as a broker or an admin tool sends them."""

    def __init__(self, client: RemotingClient, address: str) -> None:
        self.client = client
        self.address = address

    async def __call__(
        self, code: int, fields=None, body: bytes = b"", *, version: int | None = None
    ) -> RemotingCommand:
        ext = fields.to_ext_fields() if hasattr(fields, "to_ext_fields") else fields
        request = RemotingCommand.request(code, ext, body)
        if version is not None:
            request.version = version
        return await self.client.invoke(self.address, request, timeout=5)

    async def send(self, request: RemotingCommand) -> RemotingCommand:
        return await self.client.invoke(self.address, request, timeout=5)


@pytest.fixture
def call(client, namesrv):
    return Caller(client, namesrv.address)
