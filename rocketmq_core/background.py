"""Blocking disk work that no request waits for, in threads of the lowest CPU priority.

An asynchronous flush writes back half a second of the CommitLog: on a broker whose
event loop shares its core, that fdatasync keeps the core for up to a few milliseconds.
At the default priority the scheduler lets it run its slice while the loop, woken by a
request, waits: the tail latency of the sends behind it. At nice 19 the loop's wake-ups
preempt it, and it still gets its share of a busy core (docs/perf.md, "Background
work").

Only for work no put waits on: a SYNC_FLUSH group commit or a SYNC_MASTER's wait stays
in anyio's worker threads, at the process's own priority. The price is on a core
shared with other busy work of normal priority: a lock the loop may wait for (a mapped
file's, held by a background thread for one madvise call) is then released late.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import anyio
import anyio.lowlevel
import sniffio

log = logging.getLogger("rocketmq.background")

NICE = 19  # the lowest priority of SCHED_OTHER: a weight of 15 against the loop's 1024
# a store's CommitLog flush, its queues' and index's flush, its next file and a deleted
# one: each runs one at a time, and a slow one does not hold back the others
WORKERS = 4

T = TypeVar("T")

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


async def run_in_background(func: Callable[..., T], *args: object) -> T:
    """``func(*args)`` in a low-priority thread; its result, or its exception.

    As with ``anyio.to_thread.run_sync``: a caller cancelled before the call starts
    nothing; one cancelled meanwhile waits until ``func`` returned (what it writes must
    not be left half done), gets its result, and is cancelled at its next await."""
    await anyio.lowlevel.checkpoint_if_cancelled()
    done = anyio.Event()
    wake = _wake_up_caller(done)

    def job() -> T:
        try:
            return func(*args)
        finally:
            # RuntimeError: the event loop has ended, and nobody waits any more
            with contextlib.suppress(RuntimeError):
                wake()

    future = _background_executor().submit(job)
    with anyio.CancelScope(shield=True):
        await done.wait()
    return future.result()


def _wake_up_caller(done: anyio.Event) -> Callable[[], object]:
    """What sets ``done`` from another thread without waiting for the event loop (a loop
    that stopped without closing would otherwise hold the thread for ever)."""
    if sniffio.current_async_library() == "trio":
        import trio

        return functools.partial(trio.lowlevel.current_trio_token().run_sync_soon, done.set)
    return functools.partial(asyncio.get_running_loop().call_soon_threadsafe, done.set)


def _background_executor() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(
                WORKERS, thread_name_prefix="rocketmq-background", initializer=_lower_priority
            )
        return _executor


def _lower_priority() -> None:
    # per thread on Linux (the nice value is a thread's, whatever POSIX says; elsewhere it
    # would be the whole process's); a thread cannot raise its priority back without
    # CAP_SYS_NICE, hence threads of their own
    if not sys.platform.startswith("linux"):
        return
    try:
        os.setpriority(os.PRIO_PROCESS, 0, NICE)
    except (AttributeError, OSError) as exc:  # not a POSIX system, or not allowed
        log.debug("background work at normal priority: %s", exc)


def _forget_executor_in_child() -> None:
    # a forked child has none of its parent's threads: it starts an executor of its own
    global _executor, _executor_lock
    _executor = None
    _executor_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_executor_in_child)
