"""One error hierarchy: every exception the core and the plugins define is a RocketMQError,
so a caller catches one base; 'the peer refused' and 'refuse this request' are two classes."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from importlib import metadata

import pytest

from rocketmq_core.client.message import Message
from rocketmq_core.client.producer import Producer
from rocketmq_core.errors import RequestRefused, ResponseError, RocketMQError
from rocketmq_core.plugins import ENTRY_POINT_GROUP
from rocketmq_core.protocol.codes import ResponseCode
from rocketmq_core.store.api import MessageToStore, StoreClosedError, StoreConfig
from rocketmq_core.store.loader import create_store


def installed_packages() -> list[str]:
    """The core and the top-level package of every installed plugin."""
    plugins = {ep.value.partition(".")[0] for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    return ["rocketmq_core", *sorted(plugins)]


def defined_exceptions() -> dict[str, type[BaseException]]:
    """Every public exception class, by where it is defined, in every module of them."""
    found = {}
    for package_name in installed_packages():
        package = importlib.import_module(package_name)
        modules = [package_name]
        modules += [
            info.name for info in pkgutil.walk_packages(package.__path__, package_name + ".")
        ]
        for module_name in modules:
            if module_name.endswith("__main__"):
                continue  # running it is the CLI itself
            module = importlib.import_module(module_name)
            for name, value in vars(module).items():
                if (
                    inspect.isclass(value)
                    and issubclass(value, BaseException)
                    and value.__module__ == module_name
                    and not name.startswith("_")
                ):
                    found[f"{module_name}.{name}"] = value
    return found


def test_every_exception_of_the_core_and_the_plugins_is_a_rocketmq_error():
    exceptions = defined_exceptions()
    # the walk reaches the core, the SDK, the stores and the plugins
    for known in (
        "rocketmq_core.errors.ResponseError",
        "rocketmq_core.client.producer.MQClientError",
        "rocketmq_core.store.api.StoreClosedError",
        "rocketmq_store_mmap.mapped_file.DiskFullError",
        "rocketmq_store_rocksdb.database.WriteFailed",
    ):
        assert known in exceptions
    outside = sorted(
        name for name, kind in exceptions.items() if not issubclass(kind, RocketMQError)
    )
    assert outside == []


def test_the_builtin_bases_callers_rely_on_are_kept():
    exceptions = defined_exceptions()
    assert issubclass(StoreClosedError, RuntimeError)
    assert issubclass(exceptions["rocketmq_store_mmap.mapped_file.DiskFullError"], OSError)
    assert issubclass(exceptions["rocketmq_core.protocol.message.RecordError"], ValueError)


def test_a_refusal_received_and_a_refusal_to_send_are_different_classes():
    assert not issubclass(RequestRefused, ResponseError)
    assert not issubclass(ResponseError, RequestRefused)
    refused = RequestRefused(ResponseCode.NO_PERMISSION, "the topic is read-only")
    assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION, "the topic is read-only")
    assert str(refused) == "NO_PERMISSION: the topic is read-only"


@pytest.mark.anyio
@pytest.mark.rocketmq(max_message_size=1024)
async def test_an_sdk_caller_catching_rocketmq_error_catches_a_refused_send(rocketmq_cluster):
    rocketmq_cluster.create_topic("Small")
    # the producer's own limit is 4 MiB: the broker's send processor refuses it (a
    # RequestRefused there), and the producer raises what it received (a ResponseError)
    async with Producer("PG", rocketmq_cluster.namesrv_address, compress_over=1 << 30) as producer:
        try:
            await producer.send(Message("Small", b"x" * 2048))
        except RocketMQError as caught:
            error = caught
        else:
            pytest.fail("a 2 KiB message went into a broker whose maxMessageSize is 1 KiB")
    assert isinstance(error, ResponseError)
    assert error.code == ResponseCode.MESSAGE_ILLEGAL
    assert "maxMessageSize" in str(error)


@pytest.mark.anyio
@pytest.mark.parametrize("store_name", ["memory", "mmap", "rocksdb"])
async def test_an_sdk_caller_catching_rocketmq_error_catches_a_closed_store(
    store_name, tmp_path, plugin_host
):
    store = create_store(store_name, StoreConfig(root_dir=str(tmp_path)), plugin_host)
    await store.open()
    assert store.append(MessageToStore("Orders", 0, b"kept")).ok
    await store.close()
    try:
        store.append(MessageToStore("Orders", 0, b"too late"))
    except RocketMQError as caught:
        error = caught
    else:
        pytest.fail(f"the closed {store_name} store took a message")
    assert isinstance(error, StoreClosedError)
    assert isinstance(error, RuntimeError)  # callers that caught RuntimeError still do
