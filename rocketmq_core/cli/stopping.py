"""Stopping a long-running command (consume, send) on SIGINT or SIGTERM without losing
what it did: the work is cancelled, the command then commits or reports, and exits with
the status a shell gives a process killed by that signal."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stop:
    """Which signal stopped the work, if one did."""

    def __init__(self) -> None:
        self.signal: signal.Signals | None = None
        self.scope = anyio.CancelScope()

    @property
    def status(self) -> int:
        """0 when no signal came; else 128 + its number (130 SIGINT, 143 SIGTERM)."""
        return 0 if self.signal is None else 128 + self.signal.value


@asynccontextmanager
async def stop_on_signal() -> AsyncIterator[Stop]:
    """Run the body until it ends or SIGINT/SIGTERM comes; then the body is cancelled and
    the block ends normally: ``stop.signal`` says which came. The handlers stay until the
    block ends, so a second signal cannot interrupt the body's shielded cleanup (a commit)."""
    stop = Stop()

    async def watch(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
            task_status.started()  # handlers installed: a signal no longer kills us
            async for received in signals:
                if stop.signal is None:  # the first stops the work; later ones are ignored
                    stop.signal = signal.Signals(received)
                    stop.scope.cancel()

    async with anyio.create_task_group() as watchers:
        await watchers.start(watch)
        with stop.scope:
            yield stop
        watchers.cancel_scope.cancel()
