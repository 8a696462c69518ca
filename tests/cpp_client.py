"""The official C++ client (PyPI ``rocketmq==0.4.4``) for interop tests.

It is installed by the test extra. Under CI a missing or unloadable client is a
failure; elsewhere the tests skip and say why.
"""

from __future__ import annotations

import platform
import sys

from tests.missing import missing


def load_cpp_client():
    """``rocketmq.client`` from the wheel, or ``missing`` (fail under CI) explaining why."""
    try:
        import rocketmq.client as client
    except (ImportError, OSError) as exc:
        reason = f"the C++ client (rocketmq==0.4.4, in the test extra) cannot load: {exc}"
        if sys.platform != "linux" or platform.machine() != "x86_64":
            reason += " (the wheel exists only for Linux x86_64)"
        missing(reason)
    return client
