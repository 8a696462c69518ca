"""A connection's invocations time out at their deadlines, on asyncio and trio, over real
TCP: one timer per connection, never early, late by a sweep at most."""

from __future__ import annotations

import anyio
import pytest

from rocketmq_core.errors import ConnectionClosedError, RemotingTimeoutError
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.remoting.connection import SWEEP_GAP
from rocketmq_core.remoting.processor import ProcessorTable
from rocketmq_core.testing.transport import serving

pytestmark = pytest.mark.anyio

HANG = 1  # never answered
ECHO = 2
LATER = 3  # answered after extFields["s"] seconds
# how late a timeout may be on a shared, busy machine (the sweep's own lateness is SWEEP_GAP)
SCHEDULING_SLACK = 0.25


@pytest.fixture
def tcp(plugin_host):
    return plugin_host.registry.transports.get("tcp")


@pytest.fixture
def table():
    async def later(ctx, req):
        await anyio.sleep(float(req.ext_fields["s"]))
        return req.response(remark=req.ext_fields["s"])

    table = ProcessorTable()
    table.register(HANG, lambda ctx, req: anyio.sleep_forever())
    table.register(ECHO, lambda ctx, req: req.response(remark="echo"))
    table.register(LATER, later)
    return table


def request(code: int, **fields: str) -> RemotingCommand:
    return RemotingCommand.request(code, fields or None)


async def timed_out_after(client: RemotingClient, address: str, timeout: float) -> float:
    started = anyio.current_time()
    with (
        anyio.fail_after(timeout + 2),
        pytest.raises(RemotingTimeoutError, match=f"within {timeout:g} s"),
    ):
        await client.invoke(address, request(HANG), timeout=timeout)
    return anyio.current_time() - started


async def test_each_request_times_out_at_its_deadline_whatever_the_order_of_timeouts(tcp, table):
    timeouts = [0.30, 0.05, 0.15, 0.05]
    waited: dict[int, float] = {}

    async def invoke(index: int, timeout: float) -> None:
        waited[index] = await timed_out_after(client, address, timeout)

    async with serving(tcp, table) as (_server, address), RemotingClient(tcp) as client:
        connection = await client.connection(address)
        async with anyio.create_task_group() as task_group:
            for index, timeout in enumerate(timeouts):
                task_group.start_soon(invoke, index, timeout)
        assert connection.waiting_requests == 0
    for index, timeout in enumerate(timeouts):
        assert timeout - 0.002 <= waited[index] <= timeout + SWEEP_GAP + SCHEDULING_SLACK
    assert sorted(waited, key=waited.__getitem__)[2:] == [2, 0]


async def test_a_short_timeout_after_a_long_one_is_not_held_up_by_it(tcp, table):
    async with serving(tcp, table) as (_server, address), RemotingClient(tcp) as client:
        connection = await client.connection(address)
        async with anyio.create_task_group() as task_group:
            # a long-polling pull, then a send on the same connection
            task_group.start_soon(client.invoke, address, request(HANG), 30.0)
            while connection.waiting_requests < 1:
                await anyio.sleep(0.001)
            await anyio.sleep(0.01)  # the timer is set for the pull
            assert await timed_out_after(client, address, 0.05) < 0.05 + SWEEP_GAP + 0.25
            task_group.cancel_scope.cancel()


async def test_answered_requests_never_time_out_and_leave_nothing_waiting(tcp, table):
    async with serving(tcp, table) as (_server, address), RemotingClient(tcp) as client:
        connection = await client.connection(address)
        for index in range(200):
            # what is left of a send's timeout: a little less each time
            response = await client.invoke(address, request(ECHO), timeout=0.1 - index * 1e-5)
            assert response.remark == "echo"
        assert connection.waiting_requests == 0
        await anyio.sleep(0.15)  # past every deadline of the answered requests
        assert await timed_out_after(client, address, 0.05) >= 0.05 - 0.002
        assert (await client.invoke(address, request(ECHO), timeout=1)).remark == "echo"
        assert connection.unknown_responses == 0


async def test_a_response_after_the_timeout_is_counted_unknown_and_answers_nothing_else(tcp, table):
    async with serving(tcp, table) as (_server, address), RemotingClient(tcp) as client:
        connection = await client.connection(address)
        with pytest.raises(RemotingTimeoutError):
            await client.invoke(address, request(LATER, s="0.1"), timeout=0.02)
        assert connection.waiting_requests == 0
        response = await client.invoke(address, request(LATER, s="0.2"), timeout=5)
        assert response.remark == "0.2"
        assert connection.unknown_responses == 1


async def test_a_cancelled_invocation_stops_waiting_and_its_late_response_is_dropped(tcp, table):
    async with serving(tcp, table) as (_server, address), RemotingClient(tcp) as client:
        connection = await client.connection(address)
        with anyio.move_on_after(0.02) as scope:
            await client.invoke(address, request(LATER, s="0.1"), timeout=5)
        assert scope.cancelled_caught
        assert connection.waiting_requests == 0
        response = await client.invoke(address, request(LATER, s="0.2"), timeout=5)
        assert response.remark == "0.2"
        assert connection.unknown_responses == 1


async def test_a_closing_connection_fails_every_waiting_invocation(tcp, table):
    failures: list[BaseException] = []

    async def invoke(timeout: float) -> None:
        try:
            await client.invoke(address, request(HANG), timeout=timeout)
        except ConnectionClosedError as exc:
            failures.append(exc)

    async with serving(tcp, table) as (_server, address), RemotingClient(tcp) as client:
        connection = await client.connection(address)
        async with anyio.create_task_group() as task_group:
            for timeout in (5.0, 10.0, 30.0):
                task_group.start_soon(invoke, timeout)
            with anyio.fail_after(5):
                while connection.waiting_requests < 3:
                    await anyio.sleep(0.01)
            await connection.aclose()
    assert [str(exc) for exc in failures] == [f"connection to {address} closed"] * 3
    assert connection.waiting_requests == 0
