"""Running a server from the command line: the event loop, signals, logging."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar

import anyio


def run(main: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    """Run ``main(*args)`` on asyncio, with uvloop when it is installed (~3x faster)."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return anyio.run(main, *args, backend="asyncio")
    return anyio.run(main, *args, backend="asyncio", backend_options={"use_uvloop": True})


async def wait_for_stop_signal(announce: Callable[[], None] = lambda: None) -> signal.Signals:
    """Return the first SIGINT or SIGTERM received. ``announce()`` runs once they are
    caught: log the ready line there, since a supervisor may signal as soon as it reads it."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        announce()
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


class Server(Protocol):
    async def run(self, *, task_status: Any) -> None: ...

    async def stop(self) -> None: ...


S = TypeVar("S", bound=Server)


@asynccontextmanager
async def serving(server: S) -> AsyncIterator[S]:
    """``server`` started in a task group of its own; stopped gracefully (shielded) at exit."""
    async with anyio.create_task_group() as task_group:
        await task_group.start(server.run)
        try:
            yield server
        finally:
            with anyio.CancelScope(shield=True):
                await server.stop()
