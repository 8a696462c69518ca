"""The fresh-install test's venv is built in the background from the moment the test is
collected (tests/test_fresh_install.py says why)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

_install = None
# Under pytest-xdist every worker collects every test, so one worker builds the venv: the
# first, to which the root conftest.py's scheduler hands the test (another worker that gets
# it starts the install when the test asks).
INSTALLING_WORKER = "gw0"


def start_install() -> None:
    global _install
    from tests.test_fresh_install import BackgroundInstall

    _install = BackgroundInstall(Path(tempfile.mkdtemp(prefix="rocketmq-fresh-install-")))


def pytest_collection_finish(session: pytest.Session) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER", INSTALLING_WORKER) != INSTALLING_WORKER:
        return
    if any(item.path.name == "test_fresh_install.py" for item in session.items):
        start_install()


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _install is not None:
        _install.discard()


@pytest.fixture
def fresh_install():
    if _install is None:
        start_install()
    return _install
