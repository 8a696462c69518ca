"""One timer per connection expires its requests at their deadlines (asyncio only)."""

from __future__ import annotations

import asyncio

import pytest

from rocketmq_core.remoting.deadlines import SWEEP_GAP, Deadlines

pytestmark = pytest.mark.parametrize("anyio_backend", ["asyncio"])


class _Requests:
    """A connection's pending table, and when each of its waiters expired."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.started = self.loop.time()
        self.waiters: dict[int, asyncio.Future] = {}
        self.expired: list[tuple[int, float]] = []
        self.deadlines = Deadlines(self.loop, self.waiters, self.expire)

    def expire(self, waiter: asyncio.Future) -> None:
        key = next(key for key, pending in self.waiters.items() if pending is waiter)
        self.expired.append((key, self.loop.time() - self.started))
        waiter.set_result(None)

    def add(self, key: int, timeout: float) -> asyncio.Future:
        waiter = self.waiters[key] = self.loop.create_future()
        self.deadlines.add(key, timeout)
        return waiter

    def answer(self, key: int) -> None:
        self.waiters.pop(key).set_result("response")
        self.deadlines.discard(key)


async def test_each_request_expires_at_its_deadline_whatever_the_order_of_timeouts(
    anyio_backend,
):
    requests = _Requests()
    for key, timeout in [(1, 0.30), (2, 0.05), (3, 0.15), (4, 0.05)]:
        requests.add(key, timeout)
    await asyncio.sleep(0.4)
    assert [key for key, _ in requests.expired] == [2, 4, 3, 1]
    for (_, at), due in zip(requests.expired, [0.05, 0.05, 0.15, 0.30], strict=True):
        assert due - 0.002 <= at <= due + SWEEP_GAP + 0.05  # never early; late by a sweep
    assert len(requests.deadlines) == 0


async def test_answered_requests_never_expire_and_leave_no_deadline(anyio_backend):
    requests = _Requests()
    for key in range(1000):
        # what is left of a send's timeout: a little less each time
        requests.add(key, 0.1 - key * 1e-6)
        requests.answer(key)
    requests.add(1000, 0.1)
    assert len(requests.deadlines) == 1
    await asyncio.sleep(0.2)
    assert [key for key, _ in requests.expired] == [1000]
    assert len(requests.deadlines) == 0


async def test_a_short_timeout_after_a_long_one_is_not_held_up_by_it(anyio_backend):
    requests = _Requests()
    requests.add(1, 30.0)  # a long-polling pull
    requests.add(2, 0.05)  # a send on the same connection
    await asyncio.sleep(0.15)
    assert [key for key, _ in requests.expired] == [2]
    requests.deadlines.close()


async def test_closed_deadlines_expire_nothing(anyio_backend):
    requests = _Requests()
    requests.add(1, 0.05)
    requests.deadlines.close()
    await asyncio.sleep(0.1)
    assert requests.expired == [] and len(requests.deadlines) == 0


async def test_a_request_made_after_a_sweep_gets_a_timer_again(anyio_backend):
    requests = _Requests()
    requests.add(1, 0.02)
    await asyncio.sleep(0.06)
    requests.add(2, 0.02)
    await asyncio.sleep(0.06)
    assert [key for key, _ in requests.expired] == [1, 2]
