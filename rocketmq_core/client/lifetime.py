"""The start and stop of a client built from parts (its ClientInstance, its group
membership, its tasks): entered in order, left in reverse, all or none."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any, Self


async def start_parts(start: Callable[[AsyncExitStack], Awaitable[None]]) -> AsyncExitStack:
    """Run ``start(lifetime)``, which enters parts on ``lifetime``; return it once all did.

    If a part fails to start, the parts entered before it are left again and the error
    propagates as it is: they are not told of it, so that a task group among them does
    not wrap a ConsumerError in an ExceptionGroup (an error of its own tasks still is).
    """
    lifetime = AsyncExitStack()
    try:
        await start(lifetime)
    except BaseException:
        await lifetime.aclose()
        raise
    return lifetime


class PartsLifetime:
    """An async context manager whose ``_start`` enters the parts on an AsyncExitStack.

    On exit they are all left, last entered first. The task groups among them are left
    by the task that entered them: enter and leave in one task (``async with``; the
    blocking facade runs both in one portal task).
    """

    _lifetime: AsyncExitStack | None = None  # set while started: what the exit leaves

    async def _start(self, lifetime: AsyncExitStack) -> None:
        """Enter the parts with ``lifetime.enter_async_context`` and push how to undo the
        rest with its callbacks, in the order they are made."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        self._lifetime = await start_parts(self._start)
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        lifetime, self._lifetime = self._lifetime, None
        if lifetime is not None:
            await lifetime.aclose()
