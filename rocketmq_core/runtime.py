"""Running a server from the command line: the event loop, signals, logging."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar

import anyio

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
# freed memory glibc keeps at the top of its heap instead of giving it back to the kernel
KEEP_FREED = 16 << 20
# blocks this large or larger are mapped on their own: the most glibc's own adaptive
# threshold reaches on 64-bit, which a fixed setting turns off (a 4 MiB message body
# freed and made again must not be mapped and zeroed afresh each time)
MAPPED_FROM = 32 << 20


def keep_freed_memory() -> None:
    """Let glibc reuse freed blocks instead of handing them back to the kernel.

    A server reads its sockets 256 KiB at a time into new bytes objects. By default
    glibc maps such a block on its own until one is freed, then trims the heap once
    twice the largest freed block lies free at its top: the next reads then fault in
    freshly zeroed pages (~6% of a broker's CPU under batched sends). Settings of the
    environment (MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_, GLIBC_TUNABLES'
    glibc.malloc.*) win; elsewhere than glibc, nothing changes."""
    if (
        os.environ.get("MALLOC_TRIM_THRESHOLD_")
        or os.environ.get("MALLOC_MMAP_THRESHOLD_")
        or "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", "")
    ):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, MAPPED_FROM)
    mallopt(_M_TRIM_THRESHOLD, KEEP_FREED)


# set by a command that starts servers as its children (``rocketmq cluster up``): the
# parent's pid; such a server stops gracefully once that parent is gone, even by SIGKILL
STOP_WITH_PARENT = "ROCKETMQ_STOP_WITH_PARENT"
PARENT_CHECK_INTERVAL = 0.5  # seconds between two looks at the parent


_followed_parent: int | None = None  # STOP_WITH_PARENT's pid, taken out of the environment


def follow_parent() -> None:
    """Take STOP_WITH_PARENT out of the environment (what this process starts must not
    follow a parent that is not theirs), keeping its pid for ``wait_for_stop_signal``."""
    global _followed_parent
    value = os.environ.pop(STOP_WITH_PARENT, "")
    if value.isdigit():
        _followed_parent = int(value)


def run(main: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    """Run ``main(*args)`` on asyncio, with uvloop when it is installed (~3x faster)."""
    keep_freed_memory()
    follow_parent()
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return anyio.run(main, *args, backend="asyncio")
    return anyio.run(main, *args, backend="asyncio", backend_options={"use_uvloop": True})


async def wait_for_stop_signal(announce: Callable[[], None] = lambda: None) -> signal.Signals:
    """Return the first SIGINT or SIGTERM received. ``announce()`` runs once they are
    caught: log the ready line there, since a supervisor may signal as soon as it reads it.
    Started with STOP_WITH_PARENT, also SIGTERM once that parent is gone: a process it
    started must not run on orphaned when it is killed (polled: the kernel's parent-death
    signal comes again for every thread of a dying parent, and the second would cut the
    graceful stop short)."""
    parent = _followed_parent
    received: list[signal.Signals] = []
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        announce()
        async with anyio.create_task_group() as waiting:

            async def first_signal() -> None:
                async for number in signals:
                    received.append(signal.Signals(number))
                    waiting.cancel_scope.cancel()

            async def parent_gone(pid: int) -> None:
                while os.getppid() == pid:
                    await anyio.sleep(PARENT_CHECK_INTERVAL)
                logging.getLogger("rocketmq").warning(
                    "the process that started this one (pid %s) is gone: stopping", pid
                )
                received.append(signal.SIGTERM)
                waiting.cancel_scope.cancel()

            waiting.start_soon(first_signal)
            if parent is not None:
                waiting.start_soon(parent_gone, parent)
    if not received:
        raise RuntimeError("the signal receiver closed")  # pragma: no cover
    return received[0]


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
