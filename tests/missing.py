"""What a test does when something it needs is not installed: under CI (``CI`` set) it
fails, because the project's own files install everything the tests need; elsewhere
it skips and says why."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import pytest


def missing(reason: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; the project's files install it, so under CI it must be there")
    print(reason, file=sys.stderr)
    pytest.skip(reason)
