"""What a server lets its clients hold: connections, idle time, and memory.

``ServerLimits`` is the configuration (docs/operations.md, "Connection limits and memory
budgets"); ``MemoryBudget`` the server-wide tally its connections charge: bytes of
responses not yet sent and bytes of frames not yet complete.
"""

from __future__ import annotations

import ctypes
import gc
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

MiB = 1024 * 1024
# descriptors kept back from connections for store files, logs and the name-server link
RESERVED_FDS = 256


def default_max_connections() -> int:
    """Three quarters of the open-files limit (all but 256 when that is more), at least 16."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(16, soft - max(RESERVED_FDS, soft // 4))


@dataclass(frozen=True)
class ServerLimits:
    """Limits a RemotingServer enforces; 0 turns a time or connection limit off."""

    max_connections: int = 0  # 0: default_max_connections() at the server's start
    idle_seconds: float = 120.0  # no byte read or sent for this long: closed
    write_high_water: int = 4 * MiB  # unsent bytes at which reading from a client pauses
    write_low_water: int = 1 * MiB  # ... and resumes
    max_unsent_per_connection: int = 64 * MiB
    max_unsent_total: int = 256 * MiB
    incomplete_frame_seconds: float = 30.0  # a frame not complete after this long: closed
    max_incomplete_total: int = 128 * MiB  # bytes of unfinished frames, all clients together

    def resolved_max_connections(self) -> int:
        return self.max_connections or default_max_connections()


class MemoryBudget:
    """The server-wide byte tallies; connections add and subtract, never read each other."""

    __slots__ = ("incomplete", "limits", "reclaim", "unsent")

    def __init__(self, limits: ServerLimits) -> None:
        self.limits = limits
        self.unsent = 0  # responses queued or being written, every connection
        self.incomplete = 0  # bytes of frames still waiting for the rest
        # called with the asking connection when the unsent total is reached; True when
        # it closed a connection (the server: the one hoarding the most)
        self.reclaim: Callable[[Any], bool] = lambda _asking: False


def _load_glibc(name: str) -> Callable[..., int] | None:
    try:
        function: Callable[..., int] = getattr(ctypes.CDLL(None), name)  # the process's libc
        return function
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to tune
        return None


_malloc_trim = _load_glibc("malloc_trim")


def return_free_memory() -> None:
    """Hand the allocator's free pages back to the OS (glibc), after large buffers go.

    It walks every arena and may take tens of milliseconds: call it from a worker thread
    (glibc's malloc_trim locks what it walks, so that is safe).
    """
    if _malloc_trim is not None:
        _malloc_trim(0)


class MemoryReturner:
    """Collects garbage and returns free memory to the OS (in a worker thread), at most
    once per ``interval``: requests while one is due are folded into it, however many
    connections close."""

    __slots__ = ("_due", "_interval", "_last", "returns")

    def __init__(self, interval: float = 1.0) -> None:
        self._interval = interval
        self._last = -interval
        self._due = False
        self.returns = 0  # memory handed back so far

    def request(self, task_group: TaskGroup) -> None:
        if self._due:
            return
        self._due = True
        task_group.start_soon(self._return_when_due)

    async def _return_when_due(self) -> None:
        try:
            await anyio.sleep(max(0.0, self._last + self._interval - time.monotonic()))
        finally:
            self._due = False  # what is freed from now on needs another pass
        self._last = time.monotonic()
        # a closed connection's buffers (its stream's unread chunks above all) sit in
        # reference cycles: collected now, not at the next full collection
        gc.collect()
        await anyio.to_thread.run_sync(return_free_memory)
        self.returns += 1
