"""Flush policies (pure decisions) and the Flusher's group commit, timeouts and failures."""

from __future__ import annotations

import os
import threading
import time

import anyio
import pytest

from rocketmq_core.background import NICE
from rocketmq_core.store.api import PutResult, PutStatus, StoreConfig
from rocketmq_core.store.flush import PAGE_SIZE, AsyncFlush, SyncFlush
from rocketmq_core.store.flusher import Flusher
from rocketmq_core.store.rules import waits_for_store

pytestmark = pytest.mark.anyio

# --- AsyncFlush ----------------------------------------------------------------------------

ASYNC = AsyncFlush(interval=0.5, least_bytes=4 * PAGE_SIZE, thorough_interval=10.0)


def test_async_waits_an_interval_when_nothing_is_dirty():
    assert ASYNC.delay(0, 60.0, 0) == 0.5


def test_async_flushes_enough_dirty_pages_an_interval_after_the_last_flush():
    assert ASYNC.delay(4 * PAGE_SIZE, 0.5, 0) == 0.0
    assert ASYNC.delay(4 * PAGE_SIZE, 0.2, 0) == pytest.approx(0.3)
    # fewer: looked at again an interval later
    assert ASYNC.delay(4 * PAGE_SIZE - 1, 0.5, 0) == 0.5


def test_async_flushes_any_dirty_bytes_after_the_thorough_interval():
    assert ASYNC.delay(1, 10.0, 0) == 0.0
    assert ASYNC.delay(1, 9.8, 0) == pytest.approx(0.2)


def test_async_ignores_waiters():
    assert ASYNC.delay(1, 0.0, 5) == 0.5
    assert not ASYNC.waits
    assert ASYNC.name == "async"


def test_async_from_config():
    config = StoreConfig(
        root_dir="/nowhere", flush_interval=0.2, flush_least_pages=2, flush_thorough_interval=3
    )
    assert AsyncFlush.from_config(config) == AsyncFlush(0.2, 2 * PAGE_SIZE, 3)


# --- SyncFlush -----------------------------------------------------------------------------

SYNC = SyncFlush(timeout=5.0, idle_interval=1.0)


def test_sync_flushes_now_for_any_waiter():
    assert SYNC.delay(0, 0.0, 1) == 0.0
    assert SYNC.delay(100, 0.0, 3) == 0.0


def test_sync_waits_idle_interval_when_nothing_is_dirty():
    assert SYNC.delay(0, 30.0, 0) == 1.0


def test_sync_flushes_dirty_bytes_without_waiters_after_the_idle_interval():
    assert SYNC.delay(10, 0.25, 0) == pytest.approx(0.75)
    assert SYNC.delay(10, 1.0, 0) == 0.0
    assert SYNC.delay(10, 7.0, 0) == 0.0


def test_sync_from_config():
    policy = SyncFlush.from_config(StoreConfig(root_dir="/nowhere", sync_flush_timeout=2.5))
    assert (policy.name, policy.waits, policy.timeout) == ("sync", True, 2.5)


# --- the Flusher ---------------------------------------------------------------------------


class FakeLog:
    """A log whose write position the test moves and whose sync the test controls."""

    def __init__(self) -> None:
        self.written = 0
        self.calls: list[int] = []
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.gate.set()
        self.failing = False
        self.threads: list[tuple[str, int]] = []  # (name, nice) of each sync's thread

    def sync(self, upto: int) -> None:  # runs in a worker thread
        self.calls.append(upto)
        self.threads.append((threading.current_thread().name, os.getpriority(os.PRIO_PROCESS, 0)))
        self.entered.set()
        if not self.gate.wait(10):
            raise AssertionError("the test never opened the gate")
        if self.failing:
            raise OSError(5, "Input/output error")

    def flusher(self, policy) -> Flusher:
        return Flusher(policy, written=lambda: self.written, sync=self.sync)


async def wait_until(condition, timeout: float = 5.0) -> None:
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.002)


async def test_waiting_puts_share_flushes():
    log = FakeLog()
    log.gate.clear()
    flusher = log.flusher(SyncFlush(timeout=5.0, idle_interval=60.0))
    results: dict[int, bool] = {}
    arrived = 0

    async def put(end: int) -> None:
        nonlocal arrived
        arrived += 1
        results[end] = await flusher.wait_durable(end)

    async with anyio.create_task_group() as task_group:
        await task_group.start(flusher.run)
        log.written = 500
        for number in range(1, 51):
            task_group.start_soon(put, number * 10)
        await wait_until(log.entered.is_set)
        # these fifty arrive while the first flush runs: they all share the next one
        log.written = 1000
        for number in range(51, 101):
            task_group.start_soon(put, number * 10)
        await wait_until(lambda: arrived == 100)
        log.gate.set()
        await wait_until(lambda: len(results) == 100)
        task_group.cancel_scope.cancel()
    assert log.calls == [500, 1000]
    assert results == {number * 10: True for number in range(1, 101)}
    assert (flusher.flushed, flusher.flushes, flusher.failure) == (1000, 2, None)


async def test_wait_durable_returns_at_once_for_flushed_bytes():
    log = FakeLog()
    flusher = log.flusher(SyncFlush(timeout=5.0))
    log.written = 300
    await flusher.flush()
    assert log.calls == [300]
    with anyio.fail_after(1):
        assert await flusher.wait_durable(300)
    assert log.calls == [300]


async def test_flush_with_nothing_new_does_not_sync():
    log = FakeLog()
    flusher = log.flusher(SyncFlush(timeout=5.0))
    await flusher.flush()
    log.written = 40
    await flusher.flush()
    await flusher.flush()
    assert log.calls == [40]
    assert (flusher.flushed, flusher.flushes) == (40, 1)


async def test_slow_sync_times_the_waiter_out():
    log = FakeLog()
    log.gate.clear()
    flusher = log.flusher(SyncFlush(timeout=0.05, idle_interval=60.0))
    async with anyio.create_task_group() as task_group:
        await task_group.start(flusher.run)
        log.written = 100
        with anyio.fail_after(5):
            assert not await flusher.wait_durable(100)
        assert log.calls == [100]
        assert flusher.flushed == 0
        # the slow sync completes after all: the bytes are durable from then on
        log.gate.set()
        await wait_until(lambda: flusher.flushed == 100)
        assert await flusher.wait_durable(100)
        task_group.cancel_scope.cancel()
    assert log.calls == [100]


async def test_deadlines_of_durable_puts_wake_nothing():
    # a sustained sync load: each put's deadline passes long after its flush, and must
    # not wake the flusher, nor every waiter, once per put
    log = FakeLog()
    clock_reads = 0

    def clock() -> float:
        nonlocal clock_reads
        clock_reads += 1
        return time.monotonic()

    # 0.5 s: a loaded CI machine ran a flush later than 0.05 s, and a timed-out wait is
    # not what this test is about
    policy = SyncFlush(timeout=0.5, idle_interval=60.0)
    flusher = Flusher(policy, written=lambda: log.written, sync=log.sync, clock=clock)
    async with anyio.create_task_group() as task_group:
        await task_group.start(flusher.run)
        for number in range(1, 101):
            log.written = number * 10
            with anyio.fail_after(5):
                assert await flusher.wait_durable(number * 10)
            await anyio.sleep(0.001)  # deadlines 1 ms apart: a timer for each would fire
        reads_before = clock_reads
        await anyio.sleep(0.65)  # every deadline passes
        assert clock_reads - reads_before <= 10
        task_group.cancel_scope.cancel()


def put_result(flush_to: int) -> PutResult:
    return PutResult.written([max(flush_to - 10, 0)], 0, 0, b"\x7f\0\0\1\0\0\0\0", flush_to)


async def test_callbacks_share_flushes_and_are_told_in_order():
    """when_settled: no task waits; the flush that covers a put tells its callback, in
    arrival order, and puts that arrive while a flush runs share the next one."""
    log = FakeLog()
    log.gate.clear()
    flusher = log.flusher(SyncFlush(timeout=5.0, idle_interval=60.0))
    told: list[tuple[int, PutStatus]] = []

    def settled(result: PutResult) -> None:
        told.append((result.flush_to, result.status))

    async with anyio.create_task_group() as task_group:
        await task_group.start(flusher.run)
        log.written = 500
        assert not any([flusher.when_settled(put_result(n * 10), settled) for n in range(1, 51)])
        await wait_until(log.entered.is_set)
        log.written = 1000  # these fifty arrive while the first flush runs
        assert not any([flusher.when_settled(put_result(n * 10), settled) for n in range(51, 101)])
        assert told == []
        log.gate.set()
        await wait_until(lambda: len(told) == 100)
        task_group.cancel_scope.cancel()
    assert log.calls == [500, 1000]
    assert told == [(n * 10, PutStatus.PUT_OK) for n in range(1, 101)]
    # durable already, or nothing to wait for: True, and the callback is not called
    assert flusher.when_settled(put_result(1000), settled)
    assert flusher.when_settled(put_result(-1), settled)
    assert len(told) == 100


async def test_a_callback_past_its_deadline_is_told_flush_disk_timeout():
    log = FakeLog()
    log.gate.clear()
    flusher = log.flusher(SyncFlush(timeout=0.05, idle_interval=60.0))
    told: list[PutResult] = []
    async with anyio.create_task_group() as task_group:
        await task_group.start(flusher.run)
        log.written = 100
        assert not flusher.when_settled(put_result(100), told.append)
        await wait_until(lambda: len(told) == 1)
        assert told[0].status is PutStatus.FLUSH_DISK_TIMEOUT
        assert "syncFlushTimeout" in told[0].remark
        log.gate.set()  # the slow sync completes after all: told once only
        await wait_until(lambda: flusher.flushed == 100)
        task_group.cancel_scope.cancel()
    assert len(told) == 1


async def test_a_failing_callback_does_not_stop_the_flusher_for_the_others():
    log = FakeLog()
    flusher = log.flusher(SyncFlush(timeout=5.0, idle_interval=60.0))
    told: list[int] = []

    def failing(result: PutResult) -> None:
        raise RuntimeError("a broken answer")

    async with anyio.create_task_group() as task_group:
        await task_group.start(flusher.run)
        log.written = 20
        flusher.when_settled(put_result(10), failing)
        flusher.when_settled(put_result(20), lambda result: told.append(result.flush_to))
        await wait_until(lambda: told == [20])
        log.written = 30
        flusher.when_settled(put_result(30), lambda result: told.append(result.flush_to))
        await wait_until(lambda: told == [20, 30])
        task_group.cancel_scope.cancel()


class NotYet:
    """A policy that flushes nothing for a minute: a put still waits when the test stops."""

    timeout = 60.0
    name = "not yet"
    waits = True

    def delay(self, dirty_bytes: int, since_last_flush: float, waiters: int) -> float:
        return 60.0


async def test_callbacks_left_when_the_flusher_stops_are_told():
    """A store closing while puts wait: their callbacks hear FLUSH_DISK_TIMEOUT (their
    connections drain instead of waiting out their grace for an answer)."""
    log = FakeLog()
    flusher = log.flusher(NotYet())
    told: list[PutResult] = []
    async with anyio.create_task_group() as task_group:
        await task_group.start(flusher.run)
        log.written = 100
        assert not flusher.when_settled(put_result(100), told.append)
        await anyio.sleep(0.05)
        assert told == []
        task_group.cancel_scope.cancel()
    assert log.calls == []
    assert [result.status for result in told] == [PutStatus.FLUSH_DISK_TIMEOUT]
    assert "stopped" in told[0].remark


async def test_failing_sync_times_waiters_out_and_a_later_sync_succeeds():
    log = FakeLog()
    log.failing = True
    flusher = log.flusher(SyncFlush(timeout=0.25, idle_interval=60.0))
    async with anyio.create_task_group() as task_group:
        await task_group.start(flusher.run)
        log.written = 64
        with anyio.fail_after(5):
            assert not await flusher.wait_durable(64)
        # the waiter's 0.25 s may end before the first sync has even run on a busy machine
        await wait_until(lambda: flusher.failure is not None)
        assert isinstance(flusher.failure, OSError)
        assert (flusher.flushed, flusher.flushes) == (0, 0)
        failed_calls = len(log.calls)
        assert failed_calls >= 1
        log.failing = False
        with anyio.fail_after(5):
            assert await flusher.wait_durable(64)
        task_group.cancel_scope.cancel()
    assert log.calls == [64] * (failed_calls + 1)
    assert (flusher.flushed, flusher.flushes, flusher.failure) == (64, 1, None)


async def test_async_policy_flushes_in_the_background_once_enough_is_dirty():
    log = FakeLog()
    flusher = log.flusher(AsyncFlush(interval=0.005, least_bytes=100, thorough_interval=60.0))
    async with anyio.create_task_group() as task_group:
        await task_group.start(flusher.run)
        log.written = 99
        await anyio.sleep(0.05)  # ten intervals: below least_bytes nothing is flushed
        assert log.calls == []
        log.written = 150
        await wait_until(lambda: flusher.flushed == 150)
        task_group.cancel_scope.cancel()
    assert log.calls == [150]


async def test_async_policy_flushes_a_few_bytes_after_the_thorough_interval():
    log = FakeLog()
    now = [1000.0]
    flusher = Flusher(
        AsyncFlush(interval=0.005, least_bytes=100, thorough_interval=10.0),
        written=lambda: log.written,
        sync=log.sync,
        clock=lambda: now[0],
    )
    async with anyio.create_task_group() as task_group:
        await task_group.start(flusher.run)
        log.written = 5
        await anyio.sleep(0.03)
        assert log.calls == []
        now[0] += 10.0
        await wait_until(lambda: flusher.flushed == 5)
        task_group.cancel_scope.cancel()
    assert log.calls == [5]


@pytest.mark.parametrize(
    ("wait", "waits"),
    [(None, True), (b"true", True), (b"TRUE", True), (b"True", True), (b"false", False),
     (b"FALSE", False), (b"0", False), (b"", False), (b"yes", False)],
)  # fmt: skip
def test_a_send_waits_to_be_stored_as_java_reads_its_wait_property(wait, waits):
    """Java's isWaitStoreMsgOK: no WAIT, or Boolean.parseBoolean of it ("true" in any
    case); the flush and a SYNC_MASTER's slave are waited for so."""
    properties = b"TAGS\x01T" + (b"\x02WAIT\x01" + wait if wait is not None else b"")
    assert waits_for_store(properties) is waits


async def test_an_async_flush_yields_the_core_and_a_waited_for_one_does_not():
    """Nobody waits for an async flush: it runs at the lowest priority, so the event
    loop's requests preempt it; a group commit keeps the process's own."""
    log = FakeLog()
    log.written = 100
    await log.flusher(ASYNC).flush()
    [(name, nice)] = log.threads
    assert name.startswith("rocketmq-background") and nice == NICE

    log = FakeLog()
    log.written = 100
    await log.flusher(SYNC).flush()
    [(name, nice)] = log.threads
    assert not name.startswith("rocketmq-background")
    assert nice == os.getpriority(os.PRIO_PROCESS, 0)


async def test_no_flush_runs_while_the_flusher_is_paused():
    """A store that swaps what ``sync`` works on (RocksDB reopened for writing) pauses the
    flusher: a running flush ends first, and one asked for meanwhile waits."""
    log = FakeLog()
    log.gate.clear()
    log.written = 10
    flusher = log.flusher(ASYNC)
    seen: list[object] = []

    async def swap() -> None:
        async with flusher.paused():
            seen.append(list(log.calls))
            log.written = 20
            task_group.start_soon(flusher.flush)
            await anyio.sleep(0.05)
            seen.append(list(log.calls))  # the second flush waits for the pause to end

    async with anyio.create_task_group() as task_group:
        task_group.start_soon(flusher.flush)
        await anyio.to_thread.run_sync(log.entered.wait, 5)
        task_group.start_soon(swap)
        await anyio.sleep(0.05)
        assert seen == []  # the pause waits for the flush that runs
        log.gate.set()
    assert seen == [[10], [10]]
    assert log.calls == [10, 20] and flusher.flushed == 20


async def test_a_cut_while_a_flush_runs_leaves_the_bytes_past_it_to_the_next_flush():
    """A slave refusing a replicated record cuts its log back while a flush of bytes past
    the cut runs: the flush proves them durable no more (they are written again), so the
    next flush syncs what is written there again, and the puts waiting past the cut wait
    for it."""
    log = FakeLog()
    log.gate.clear()
    log.written = 100
    flusher = log.flusher(SyncFlush(timeout=5.0, idle_interval=60.0))
    told: list[tuple[int, PutStatus]] = []

    def settled(result: PutResult) -> None:
        told.append((result.flush_to, result.status))

    assert not flusher.when_settled(put_result(40), settled)
    assert not flusher.when_settled(put_result(90), settled)
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(flusher.flush)
        assert await anyio.to_thread.run_sync(log.entered.wait, 5)
        log.written = 60
        flusher.note_cut(60)
        log.gate.set()
    assert flusher.flushed == 60
    assert told == [(40, PutStatus.PUT_OK)]
    log.written = 100  # the master sent the cut bytes again
    await flusher.flush()
    assert told == [(40, PutStatus.PUT_OK), (90, PutStatus.PUT_OK)]
    assert log.calls == [100, 100] and flusher.flushed == 100


async def test_bytes_flushed_then_cut_off_are_flushed_again_once_written_again():
    log = FakeLog()
    flusher = log.flusher(ASYNC)
    log.written = 100
    await flusher.flush()
    log.written = 30
    flusher.note_cut(30)
    assert flusher.flushed == 30
    log.written = 80
    await flusher.flush()
    assert log.calls == [100, 80] and flusher.flushed == 80
