"""The official C++ client against our name server and broker, end to end."""

from __future__ import annotations

import threading

import anyio
import pytest

from rocketmq_core.broker.app import Broker
from rocketmq_core.namesrv.server import NameServer
from rocketmq_core.testing.broker import broker_config
from rocketmq_core.testing.namesrv import namesrv_config
from tests.cpp_client import load_cpp_client

pytestmark = pytest.mark.parametrize("anyio_backend", ["asyncio"])


def produce(client, namesrv: str, topic: str, count: int) -> list:
    producer = client.Producer("PID-interop")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    try:
        results = []
        for number in range(count):
            message = client.Message(topic)
            message.set_keys(f"key-{number}")
            message.set_tags("TagA" if number % 2 else "TagB")
            message.set_property("seq", str(number))
            message.set_body(f"body-{number}")
            results.append(producer.send_sync(message))
        return results
    finally:
        producer.shutdown()


def consume(client, namesrv: str, topic: str, expected: int, expression: str = "*") -> list:
    received: list = []
    done = threading.Event()
    consumer = client.PushConsumer("CID-interop")
    consumer.set_namesrv_addr(namesrv)

    def on_message(message):
        received.append(
            (message.topic, message.tags, message.keys, message.body, message.get_property("seq"))
        )
        if len(received) >= expected:
            done.set()  # returning normally acknowledges the message

    consumer.subscribe(topic, on_message, expression)
    consumer.start()
    try:
        done.wait(40)
    finally:
        consumer.shutdown()
    return received


@pytest.mark.anyio
async def test_cpp_producer_and_push_consumer_round_trip(tmp_path, plugin_host):
    client = load_cpp_client()
    async with NameServer.serving(namesrv_config(tmp_path / "ns"), host=plugin_host) as namesrv:
        config = broker_config(tmp_path / "store", namesrv.address)
        async with Broker.serving(config, host=plugin_host) as broker:
            results = await anyio.to_thread.run_sync(produce, client, namesrv.address, "Orders", 20)
            assert [r.status for r in results] == [client.SendStatus.OK] * 20
            assert broker.store.max_offset("Orders", 0) >= 0
            received = await anyio.to_thread.run_sync(
                consume, client, namesrv.address, "Orders", 20
            )
    bodies = sorted(body for _topic, _tags, _keys, body, _seq in received)
    assert bodies == sorted(f"body-{n}".encode() for n in range(20))
    first = next(r for r in received if r[3] == b"body-3")
    # the wheel returns tags, keys and properties as bytes
    assert first == ("Orders", b"TagA", b"key-3", b"body-3", b"3")
