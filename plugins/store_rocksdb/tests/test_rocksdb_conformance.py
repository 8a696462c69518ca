"""The rocksdb store keeps the whole store contract, crash and reopen included."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketmq_core.store.api import StoreConfig
from rocketmq_core.store.loader import create_store
from rocketmq_core.testing.store import StoreConformance


class TestRocksDBStoreConformance(StoreConformance):
    persistent = True
    torn_tail_loss = 1  # one WriteBatch per put: a torn log end costs the last put

    @pytest.fixture
    def store_factory(self, plugin_host):
        def factory(directory, **overrides):
            config = StoreConfig(root_dir=str(directory), **overrides)
            return create_store("rocksdb", config, plugin_host)

        return factory

    def tear_tail(self, directory: Path) -> bool:
        """Garble the end of the newest write-ahead log, as a kill mid-write leaves it."""
        logs = sorted((directory / "db").glob("*.log"))
        if not logs:
            return False
        data = bytearray(logs[-1].read_bytes())
        if len(data) < 64:
            return False
        data[-40:-20] = b"\xa5" * 20
        logs[-1].write_bytes(bytes(data))
        (directory / "abort").touch()
        return True
