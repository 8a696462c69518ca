"""The official C++ client reads routes from our name server.

A broker is registered whose address is a recording listener in the test; the C++
producer can only reach that listener by parsing the route we serve.
"""

from __future__ import annotations

from contextlib import asynccontextmanager

import anyio
import pytest

from rocketmq_core.namesrv.server import NameServer
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.headers import SEND_V2_NAMES, SendMessageRequestHeader
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.remoting.processor import ProcessorTable
from rocketmq_core.testing.namesrv import namesrv_config, register_broker_request
from rocketmq_core.testing.transport import serving
from tests.cpp_client import load_cpp_client

from .cpp import start_producer

# The C++ client runs its own threads; one event-loop backend is enough to prove the
# route it parses (the processors are tested on both backends elsewhere).
pytestmark = pytest.mark.parametrize("anyio_backend", ["asyncio"])

SEND_CODES = {RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2}


class RecordingBroker:
    """Answers like a broker just enough for a producer; remembers every request."""

    def __init__(self) -> None:
        self.requests: list[RemotingCommand] = []
        self.sent = anyio.Event()

    def __call__(self, ctx, request: RemotingCommand) -> RemotingCommand:
        self.requests.append(request)
        if request.code not in SEND_CODES:
            return request.response()
        self.sent.set()
        return request.response(
            ext_fields={
                "msgId": "7F00000100002A9F0000000000000000",
                "queueId": "0",
                "queueOffset": "0",
            },
        )

    def sends(self) -> list[SendMessageRequestHeader]:
        return [
            SendMessageRequestHeader.from_ext_fields(
                r.ext_fields, SEND_V2_NAMES if r.code == RequestCode.SEND_MESSAGE_V2 else None
            )
            for r in self.requests
            if r.code in SEND_CODES
        ]


def produce_one(client, namesrv_addr: str, topic: str):
    producer = client.Producer("PID-interop")
    producer.set_namesrv_addr(namesrv_addr)
    start_producer(producer)
    try:
        message = client.Message(topic)
        message.set_tags("TagA")
        message.set_body("hello from C++")
        return producer.send_sync(message)
    finally:
        producer.shutdown()


@asynccontextmanager
async def routed_to_recorder(directory, plugin_host, topics: dict[str, int], perm: int = 6):
    """Our name server, with a broker registered whose address is a recording listener."""
    transport = plugin_host.registry.transports.get("tcp")
    broker = RecordingBroker()
    table = ProcessorTable()
    table.set_default(broker)
    async with (
        serving(transport, table) as (_server, broker_addr),
        NameServer.serving(namesrv_config(directory), host=plugin_host) as namesrv,
        RemotingClient(transport) as remoting,
    ):
        registered = await remoting.invoke(
            namesrv.address,
            register_broker_request(broker_addr=broker_addr, topics=topics, perm=perm),
        )
        assert registered.code == ResponseCode.SUCCESS
        yield namesrv, broker


@pytest.mark.anyio
async def test_cpp_producer_follows_our_route(tmp_path, plugin_host):
    client = load_cpp_client()
    async with routed_to_recorder(tmp_path, plugin_host, {"InteropTopic": 4}) as (ns, broker):
        result = await anyio.to_thread.run_sync(produce_one, client, ns.address, "InteropTopic")
    assert result.status == client.SendStatus.OK, result
    sends = broker.sends()
    assert [s.topic for s in sends] == ["InteropTopic"]
    assert sends[0].producer_group == "PID-interop"
    assert 0 <= sends[0].queue_id < 4


@pytest.mark.anyio
async def test_cpp_producer_auto_creates_through_the_tbw102_route(tmp_path, plugin_host):
    # an unknown topic is TOPIC_NOT_EXIST; the client then sends by TBW102's route
    client = load_cpp_client()
    async with routed_to_recorder(tmp_path, plugin_host, {"TBW102": 8}, perm=7) as (ns, broker):
        result = await anyio.to_thread.run_sync(produce_one, client, ns.address, "Fresh")
    assert result.status == client.SendStatus.OK, result
    (send,) = broker.sends()
    assert (send.topic, send.default_topic, send.default_topic_queue_nums) == ("Fresh", "TBW102", 4)
