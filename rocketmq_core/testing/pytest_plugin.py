"""pytest plugin of rocketmq-core (entry point ``pytest11``): shared fixtures.

Fixtures:
- ``golden_frames``: every golden frame (captured C++ client requests and reference frames).
- ``plugin_host``: the installed plugins, loaded as the CLI loads them.
"""

from __future__ import annotations

import pytest

from .golden import GoldenFrame, all_frames


@pytest.fixture(scope="session")
def golden_frames() -> list[GoldenFrame]:
    return all_frames()


@pytest.fixture(scope="session")
def plugin_host():
    from ..plugins import load_plugins

    return load_plugins(blocked=())
