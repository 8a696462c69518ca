"""The disk guard's watch over the store's volume."""

from __future__ import annotations

import logging

import anyio
import pytest

from rocketmq_core.store.api import StoreConfig
from rocketmq_core.store.retention import DiskGuard

pytestmark = pytest.mark.anyio


async def test_a_missing_store_directory_is_reported_at_a_bounded_rate(tmp_path, caplog):
    missing = tmp_path / "gone"
    guard = DiskGuard(StoreConfig(root_dir=str(missing)), missing)
    caplog.set_level(logging.WARNING, "rocketmq.store")
    with anyio.move_on_after(0.5):
        await guard.watch(interval=0.01)  # some 50 checks, every one failing
    lines = [r for r in caplog.records if "cannot check the free space" in r.getMessage()]
    assert len(lines) <= 1
    assert guard.refusing is None  # the last verdict is kept
