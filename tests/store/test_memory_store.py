"""The MemoryStore keeps the store contract (it forgets everything when reopened)."""

from __future__ import annotations

import pytest

from rocketmq_core.store.api import StoreConfig
from rocketmq_core.store.loader import create_store
from rocketmq_core.testing.store import StoreConformance


class TestMemoryStoreConformance(StoreConformance):
    persistent = False

    @pytest.fixture
    def store_factory(self, plugin_host):
        def factory(directory, **overrides):
            config = StoreConfig(root_dir=str(directory), **overrides)
            return create_store("memory", config, plugin_host)

        return factory
