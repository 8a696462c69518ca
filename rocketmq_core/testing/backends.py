"""The anyio backends of a test whose event loop is not what it tests.

Every async test runs on asyncio and trio. A few slow ones drive bytes or a store along a
path that is the same on both loops, while the rest of their suite covers both: the
default run gives them one backend, ``tox -e soak`` (ROCKETMQ_ALL_BACKENDS=1) both.
"""

from __future__ import annotations

import os

BACKENDS = ("asyncio", "trio")


def backends_for(default: str) -> list[str]:
    """``[default]``, or every backend when ROCKETMQ_ALL_BACKENDS is set."""
    if default not in BACKENDS:
        raise ValueError(f"unknown anyio backend {default!r}; one of {', '.join(BACKENDS)}")
    return list(BACKENDS) if os.environ.get("ROCKETMQ_ALL_BACKENDS") else [default]
