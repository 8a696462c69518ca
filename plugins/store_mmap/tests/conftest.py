"""A small volume a test can fill: a tmpfs mounted for the test (root only); where it
cannot be mounted, the test skips locally and fails under CI (tests/missing.py)."""

from __future__ import annotations

import subprocess

import pytest

from tests.missing import missing

VOLUME_MB = 8


@pytest.fixture
def volume(tmp_path):
    point = tmp_path / "volume"
    point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={VOLUME_MB}m", "tmpfs", str(point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        missing(f"cannot mount a {VOLUME_MB} MB tmpfs (needs root): {mounted.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)
