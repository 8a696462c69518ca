"""StoreConformance: every section of the store contract in one class to subclass, and the
stateful comparison with the MemoryStore model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ...store.api import MessageStore, StoreConfig
from .durability import DurabilityContract
from .lookups import LookupContract
from .reads import ReadContract
from .writes import WriteContract


@pytest.mark.anyio
class StoreConformance(ReadContract, WriteContract, LookupContract, DurabilityContract):
    """Subclass it, give a ``store_factory`` fixture; see the package docstring."""

    def test_behaves_like_the_memory_model(
        self, store_factory, plugin_host, tmp_path, anyio_backend
    ):
        from ...store.loader import create_store

        # imported here, not with the kit: tests that never run this one need no hypothesis
        from .model import compare_with_model

        def memory_factory(directory: Path, **overrides: Any) -> MessageStore:
            config = StoreConfig(root_dir=str(directory), **overrides)
            return create_store("memory", config, plugin_host)

        backend, options = (
            (anyio_backend, {}) if isinstance(anyio_backend, str) else tuple(anyio_backend)
        )
        compare_with_model(
            backend,
            options,
            store_factory,
            memory_factory,
            tmp_path,
            self.config_defaults,
            self.persistent,
            self.model_settings,
        )
