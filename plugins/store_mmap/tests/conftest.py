"""A small volume a test can fill: a tmpfs mounted for the test (root only); where it
cannot be mounted, the test skips locally and fails under CI (tests/missing.py)."""

from __future__ import annotations

import pytest

from tests.processes import tmpfs

VOLUME_MB = 8


@pytest.fixture
def volume(tmp_path):
    with tmpfs(tmp_path / "volume", VOLUME_MB) as point:
        yield point
