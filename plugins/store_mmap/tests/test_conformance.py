"""The mmap store keeps the whole store contract, crash and reopen included."""

from __future__ import annotations

import pytest

from rocketmq_core.store.api import StoreConfig
from rocketmq_core.store.loader import create_store
from rocketmq_core.testing.store import StoreConformance


class TestMmapStoreConformance(StoreConformance):
    persistent = True
    skips_unwanted_records = True

    @pytest.fixture
    def store_factory(self, plugin_host):
        def factory(directory, **overrides):
            config = StoreConfig(root_dir=str(directory), **overrides)
            return create_store("mmap", config, plugin_host)

        return factory

    def tear_tail(self, directory) -> bool:
        """Tear the newest record: its body bytes garbled, as a kill mid-write leaves it."""
        commitlog = sorted((directory / "commitlog").iterdir())[-1]
        data = bytearray(commitlog.read_bytes())
        end = len(data.rstrip(b"\x00"))
        if end < 64:
            return False
        data[end - 40 : end - 20] = b"\xa5" * 20
        commitlog.write_bytes(bytes(data))
        (directory / "abort").touch()
        return True


class TestMmapStorePythonPathConformance(TestMmapStoreConformance):
    """The same contract with the compiled append switched off: every put takes the
    Python path, the reference the kernel is checked against."""

    @pytest.fixture
    def store_factory(self, plugin_host):
        def factory(directory, **overrides):
            config = StoreConfig(root_dir=str(directory), **overrides)
            store = create_store("mmap", config, plugin_host)
            store.kernel = None
            return store

        return factory
