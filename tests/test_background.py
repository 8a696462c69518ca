"""Background work: a thread of the lowest CPU priority, the work's result or error, and
cancelled callers as anyio.to_thread has them."""

from __future__ import annotations

import os
import threading

import anyio
import pytest

from rocketmq_core import background
from rocketmq_core.background import run_in_background

pytestmark = pytest.mark.anyio


def where() -> tuple[str, int]:
    """The calling thread's name and nice value (Linux keeps one per thread)."""
    return threading.current_thread().name, os.getpriority(os.PRIO_PROCESS, 0)


async def test_work_runs_in_a_thread_of_the_lowest_priority():
    own_nice = os.getpriority(os.PRIO_PROCESS, 0)
    name, nice = await run_in_background(where)
    assert name.startswith("rocketmq-background")
    assert nice == background.NICE == 19
    assert where() == (threading.current_thread().name, own_nice)  # the loop's is unchanged


async def test_the_work_gets_its_arguments_and_its_result_comes_back():
    assert await run_in_background(divmod, 17, 5) == (3, 2)


async def test_the_works_error_reaches_the_caller():
    def full_disk() -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        await run_in_background(full_disk)


async def test_a_cancelled_caller_waits_for_the_work_gets_its_result_then_is_cancelled():
    started, gate = threading.Event(), threading.Event()
    happened: list[str] = []

    def work() -> str:
        started.set()
        gate.wait(10)
        happened.append("work ended")
        return "its result"

    scope = anyio.CancelScope()

    async def caller() -> None:
        with scope:
            happened.append(await run_in_background(work))
            await anyio.sleep(0)  # the cancellation comes here
            happened.append("caller went on")
        happened.append("caller cancelled")

    async with anyio.create_task_group() as task_group:
        task_group.start_soon(caller)
        await anyio.to_thread.run_sync(started.wait, 10)
        scope.cancel()
        await anyio.sleep(0.05)
        assert happened == []  # what the work writes is never left half done
        gate.set()
    assert happened == ["work ended", "its result", "caller cancelled"]


async def test_a_caller_cancelled_before_the_call_starts_nothing():
    ran: list[bool] = []
    with anyio.CancelScope() as scope:
        scope.cancel()
        await run_in_background(ran.append, True)
    assert scope.cancelled_caught
    await anyio.sleep(0.05)
    assert ran == []
