"""Running a server from the command line: the event loop, signals, logging."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio


def run(main: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    """Run ``main(*args)`` on asyncio, with uvloop when it is installed (~3x faster)."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return anyio.run(main, *args, backend="asyncio")
    return anyio.run(main, *args, backend="asyncio", backend_options={"use_uvloop": True})


async def wait_for_stop_signal() -> signal.Signals:
    """Return the first SIGINT or SIGTERM received."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for received in signals:
            return signal.Signals(received)
    raise RuntimeError("the signal receiver closed")  # pragma: no cover


def configure_logging(level: int = logging.INFO) -> None:
    """One line per event on stderr: time, level, logger, message."""
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)-5s %(name)s: %(message)s",
    )
