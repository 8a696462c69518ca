"""A broker whose start fails part way leaves what it had started: the port, the store,
the name-server registration and every task."""

from __future__ import annotations

import anyio
import pytest

from rocketmq_core.broker.app import Broker
from rocketmq_core.broker.config import BrokerConfig
from rocketmq_core.hookspecs import hookimpl
from rocketmq_core.namesrv.server import NameServer
from rocketmq_core.plugins import load_plugins
from rocketmq_core.testing.broker import broker_config
from rocketmq_core.testing.namesrv import namesrv_config
from rocketmq_core.testing.ports import free_port

pytestmark = pytest.mark.anyio


def task_ids() -> set[int]:
    return {task.id for task in anyio.get_running_tasks()}


async def assert_restartable(directory, old: BrokerConfig, plugin_host) -> None:
    """The store closed cleanly (its lock released, no abort file) and the ports are free:
    a broker starts again on the store and on every port the failed one bound. (A port it
    never bound is a fresh one: listenPort + 1 or - 2 may belong to anyone.)"""
    assert not (directory / "abort").exists()
    port = old.listen_port
    fresh = free_port(neighbours=(1,))  # two distinct ports, for those it did not bind
    config = broker_config(
        directory,
        listen_port=port,
        ha_listen_port=old.ha_listen_port or fresh,
        fast_listen_port=old.fast_listen_port or fresh + 1,
    )
    with anyio.fail_after(20):
        async with Broker.serving(config, host=plugin_host) as again:
            assert again.address.endswith(f":{port}")


async def test_a_service_that_fails_to_start_leaves_the_store_and_the_port(tmp_path, plugin_host):
    class RefusingService:
        async def run(self, *, task_status):
            raise RuntimeError("the service cannot start")

    host = load_plugins(blocked=())  # its own: the shared one must not get this service
    host.registry.broker_services.add("refusing", lambda broker: RefusingService(), "test")
    before = task_ids()
    broker = Broker(broker_config(tmp_path), host=host)
    with anyio.fail_after(20), pytest.raises(BaseExceptionGroup) as caught:
        async with anyio.create_task_group() as task_group:
            await task_group.start(broker.run)
            pytest.fail("the broker started without its service")
    assert caught.group_contains(RuntimeError, match="the service cannot start")
    # started before the service: the listener (port bound) and the store (opened)
    port = broker.config.listen_port
    assert port != 0 and broker.store is not None
    assert task_ids() <= before
    await assert_restartable(tmp_path, broker.config, plugin_host)


class FailingStartedHook:
    """A plugin whose broker-started hook fails: after the name-server client started and
    the broker registered, the last part of the start."""

    @hookimpl
    def rocketmq_broker_started(self, broker, address):
        raise RuntimeError("the plugin cannot follow the broker")


async def test_a_failing_started_hook_unregisters_and_leaves_everything(tmp_path, plugin_host):
    host = load_plugins(blocked=())
    host.manager.register(FailingStartedHook(), name="test.failing_started")
    before = task_ids()
    async with NameServer.serving(namesrv_config(tmp_path / "ns"), host=plugin_host) as namesrv:
        broker = Broker(broker_config(tmp_path / "store", namesrv.address), host=host)
        registered: list[str] = []
        namesrv.routes.on_change(lambda: registered.extend(namesrv.routes.live))
        with anyio.fail_after(20), pytest.raises(BaseExceptionGroup) as caught:
            async with anyio.create_task_group() as task_group:
                await task_group.start(broker.run)
                pytest.fail("the broker started despite its plugin")
        assert caught.group_contains(RuntimeError, match="cannot follow the broker")
        assert broker.address in registered  # it had registered...
        assert broker.address not in namesrv.routes.live  # ...and unregistered on the way out
        assert not broker.ready
    assert task_ids() <= before
    await assert_restartable(tmp_path / "store", broker.config, plugin_host)
