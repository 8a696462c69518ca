"""Clients start all or nothing: a part that fails to start (or a start cut short) leaves
the parts started before it, so no task, connection or instance user is left behind."""

from __future__ import annotations

import gc
import logging
import socket

import anyio
import pytest

from rocketmq_core.client.config import ClientConfig
from rocketmq_core.client.instance import ClientInstance
from rocketmq_core.client.message import Message
from rocketmq_core.client.producer import Producer
from rocketmq_core.client.pull_consumer import LitePullConsumer
from rocketmq_core.client.push import PushConsumer
from rocketmq_core.client.rebalance import QueueConsumer
from rocketmq_core.client.transaction import LocalTransactionState, TransactionProducer
from rocketmq_core.errors import RemotingError
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.remoting.transport import format_address

from .conftest import eventually

pytestmark = pytest.mark.anyio


def refusing_address() -> str:
    """A local port nothing listens on: connections to it are refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return format_address("127.0.0.1", probe.getsockname()[1])


class SilentPeer:
    """A real TCP listener that reads what it is sent and never answers; counts the
    connections its peers closed."""

    def __init__(self) -> None:
        self.accepted = 0
        self.closed = 0

    async def serve(self, *, task_status=anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        task_status.started(format_address("127.0.0.1", port))
        await listener.serve(self._swallow)

    async def _swallow(self, stream) -> None:
        self.accepted += 1
        async with stream:
            try:
                while await stream.receive():
                    pass
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                self.closed += 1


def task_ids() -> set[int]:
    return {task.id for task in anyio.get_running_tasks()}


async def assert_no_task_left(before: set[int]) -> None:
    await eventually(lambda: task_ids() <= before, timeout=5)


def assert_not_started(instance: ClientInstance) -> None:
    with pytest.raises(RemotingError, match="not started"):
        instance.task_group  # noqa: B018


def no_destroyed_tasks(caplog) -> None:
    gc.collect()
    destroyed = [r for r in caplog.records if "Task was destroyed" in r.getMessage()]
    assert not destroyed, destroyed


def consumer_of(kind: str, group: str, **options) -> QueueConsumer:
    if kind == "push":
        consumer: QueueConsumer = PushConsumer(group, listener=lambda messages: None, **options)
    else:
        consumer = LitePullConsumer(group, **options)
    consumer.subscribe("Orders")
    return consumer


@pytest.mark.parametrize("kind", ["push", "lite_pull"])
async def test_a_consumer_that_cannot_reach_a_name_server_leaves_nothing_running(kind, caplog):
    caplog.set_level(logging.ERROR, logger="asyncio")
    before = task_ids()
    consumer = consumer_of(kind, f"CG-{kind}", namesrv_addr=refusing_address())
    with anyio.fail_after(20), pytest.raises(RemotingError, match="no name server answered"):
        async with consumer:
            pytest.fail("the consumer started without a name server")
    # entered before the failure: the instance (connections, route and heartbeat tasks),
    # the group membership, the consumer's task group; all left again
    assert not consumer.started
    assert consumer.group not in consumer.instance.consumers
    assert_not_started(consumer.instance)
    await assert_no_task_left(before)
    no_destroyed_tasks(caplog)


async def test_a_consumer_refused_by_a_shared_instance_leaves_it_serving(rocketmq_cluster, name):
    rocketmq_cluster.create_topic("Orders", queues=2)
    config = ClientConfig(namesrv_addr=rocketmq_cluster.namesrv_address)
    group = name("CG")
    async with ClientInstance(config) as instance:
        first = consumer_of("lite_pull", group, instance=instance, consume_from="first")
        async with first:
            second = consumer_of("push", group, instance=instance)
            with pytest.raises(Exception, match="already has a consumer"):
                async with second:
                    pytest.fail("two consumers of one group shared an instance")
            assert instance.consumers[group] is first
            # the instance the failed start had entered is still up, and so is the first
            async with Producer(name("PG"), instance=instance) as producer:
                await producer.send(Message("Orders", b"after the refusal"))
            with anyio.fail_after(10):
                async for message in first:
                    assert message.body == b"after the refusal"
                    break
        assert instance.task_group is not None  # still entered by this block
    assert_not_started(instance)


async def test_a_producer_cancelled_while_starting_closes_what_it_opened(caplog):
    caplog.set_level(logging.ERROR, logger="asyncio")
    before = task_ids()
    peer = SilentPeer()
    async with anyio.create_task_group() as servers:
        address = await servers.start(peer.serve)
        producer = TransactionProducer(
            "PG-cut-short",
            address,
            executor=lambda message, arg: LocalTransactionState.COMMIT,
            checker=lambda message: LocalTransactionState.COMMIT,
        )
        # it asks the silent name server for a route at start: 3 s, cut short at 0.3
        with anyio.fail_after(10), anyio.move_on_after(0.3) as deadline:
            async with producer:
                pytest.fail("the producer started without a route answer")
        assert deadline.cancelled_caught
        assert peer.accepted == 1
        await eventually(lambda: peer.closed == 1, timeout=5)  # its connection was closed
        assert producer.group not in producer.instance.producers
        assert_not_started(producer.instance)
        servers.cancel_scope.cancel()
    await assert_no_task_left(before)
    no_destroyed_tasks(caplog)


async def test_an_error_in_the_block_propagates_as_it_is_once_all_is_closed(rocketmq_cluster):
    rocketmq_cluster.create_topic("Orders", queues=2)
    producer = Producer("PG-raising", rocketmq_cluster.namesrv_address)
    with pytest.raises(KeyError, match="the caller's own error"):
        async with producer:
            await producer.send(Message("Orders", b"x"))
            raise KeyError("the caller's own error")
    assert_not_started(producer.instance)


async def test_a_cancelled_remoting_client_closes_its_connections(plugin_host):
    before = task_ids()
    peer = SilentPeer()
    async with anyio.create_task_group() as servers:
        address = await servers.start(peer.serve)
        client = RemotingClient(plugin_host.registry.transports.get("tcp"))
        with anyio.fail_after(10), anyio.move_on_after(0.2) as deadline:
            async with client:
                await client.connection(address)
                await anyio.sleep_forever()
        assert deadline.cancelled_caught
        await eventually(lambda: peer.closed == 1, timeout=5)
        with pytest.raises(RemotingError, match="outside 'async with'"):
            await client.connection(address)
        servers.cancel_scope.cancel()
    await assert_no_task_left(before)
