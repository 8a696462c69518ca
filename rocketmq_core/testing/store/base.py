"""The knobs and fixtures every conformance section shares (see the package docstring)."""

from __future__ import annotations

import shutil
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from ...store.api import (
    MessageStore,
)
from .helpers import (
    SMALL_FILES,
    STORE_HOST,
    StoreFactory,
    opened_store,
)


class ConformanceBase:
    """The knobs a store plugin may turn, the fixtures, and ``open_store``; each section
    of the suite derives from it."""

    persistent: bool = True  # False: reopening gives an empty store (and the tests assert it)
    torn_tail_loss: int = 3  # newest messages a torn tail may cost
    skips_unwanted_records: bool = False  # True: a dispatcher's ``wants`` is honoured
    config_defaults: dict[str, Any] = {"store_host": STORE_HOST, **SMALL_FILES}
    # hypothesis settings of the stateful comparison with the model; None: MODEL_SETTINGS
    model_settings: Any = None

    @pytest.fixture(params=["asyncio", "trio"])
    def anyio_backend(self, request):
        return request.param

    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        """factory(directory: Path, **config_overrides) -> an unopened MessageStore."""
        raise NotImplementedError("a conformance subclass provides the store_factory fixture")

    def crash_copy(self, source: Path, target: Path) -> None:
        """What a crash leaves of the store open on ``source``, made at ``target``."""
        if source.exists():
            shutil.copytree(source, target)
        else:  # a store that wrote no file leaves none
            target.mkdir(parents=True)

    def tear_tail(self, directory: Path) -> bool:
        """Damage the newest end of the log under ``directory``; False: not supported."""
        return False

    def open_store(
        self, factory: StoreFactory, directory: Path, **overrides: Any
    ) -> AbstractAsyncContextManager[MessageStore]:
        """``opened_store`` with ``config_defaults`` under the test's own overrides."""
        return opened_store(factory, directory, **{**self.config_defaults, **overrides})
