"""The fresh-install test's venv is built in the background from the moment the test is
collected (tests/test_fresh_install.py says why)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

_install = None


def pytest_collection_finish(session: pytest.Session) -> None:
    global _install
    if any(item.path.name == "test_fresh_install.py" for item in session.items):
        from tests.test_fresh_install import BackgroundInstall

        _install = BackgroundInstall(Path(tempfile.mkdtemp(prefix="rocketmq-fresh-install-")))


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _install is not None:
        _install.discard()


@pytest.fixture
def fresh_install():
    assert _install is not None, "started when tests/test_fresh_install.py is collected"
    return _install
