"""remoting.local_call: a request handed to this process's processors, no socket. It
comes back as a connection would answer it: inline, awaited, answered later from a
callback, refused, failed, unknown, busy."""

from __future__ import annotations

import anyio
import pytest

from rocketmq_core.errors import RequestRefused
from rocketmq_core.protocol.codes import ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.connection import BUSY_REMARK
from rocketmq_core.remoting.local_call import answer_locally, call_locally
from rocketmq_core.remoting.processor import ProcessorTable

pytestmark = pytest.mark.anyio

PEER, LOCAL = "10.0.0.9:40000", "127.0.0.1:10911"


def request(code: int, remark: str = "") -> RemotingCommand:
    return RemotingCommand(code, remark=remark)


async def test_each_kind_of_answer_comes_back_as_the_response():
    table = ProcessorTable()
    seen = []

    def inline(ctx, req):
        seen.append((ctx.peer_address, ctx.local_address, ctx.connection.takes_encoded_answers))
        return req.response(remark="inline")

    async def deferred(req):
        await anyio.sleep(0)
        return req.response(remark="deferred")

    def later(ctx, req):  # answered by a callback after the processor returned
        answer = ctx.connection.answer_later(req)

        async def answer_soon():
            await anyio.sleep(0.01)
            answer.answer(req.response(remark="later"))

        task_group.start_soon(answer_soon)
        return answer

    table.register(1, inline)
    table.register(2, lambda ctx, req: deferred(req))
    table.register(3, later)
    async with anyio.create_task_group() as task_group:
        remarks = [
            (await call_locally(table, request(code), PEER, LOCAL)).remark for code in (1, 2, 3)
        ]
    assert remarks == ["inline", "deferred", "later"]
    assert seen == [(PEER, LOCAL, False)]  # response commands, never finished frames


async def test_an_answer_given_at_once_needs_no_awaiting():
    """answer_locally hands back an inline answer (and a refusal) as it is, and only a
    later one as an awaitable: a caller waits with a timeout only for those."""
    table = ProcessorTable()
    table.register(1, lambda ctx, req: req.response(remark="inline"))

    async def deferred(req):
        await anyio.sleep(0)
        return req.response(remark="deferred")

    table.register(2, lambda ctx, req: deferred(req))

    def refused(ctx, req):
        raise RequestRefused(ResponseCode.NO_PERMISSION, "no")

    table.register(3, refused)
    inline = answer_locally(table, request(1), PEER, LOCAL)
    assert isinstance(inline, RemotingCommand) and inline.remark == "inline"
    refusal = answer_locally(table, request(3), PEER, LOCAL)
    assert isinstance(refusal, RemotingCommand) and refusal.code == ResponseCode.NO_PERMISSION
    later = answer_locally(table, request(2), PEER, LOCAL)
    assert not isinstance(later, RemotingCommand)
    assert (await later).remark == "deferred"


async def test_refusals_failures_and_unknown_codes_are_answered_as_over_a_connection():
    table = ProcessorTable()

    def refused(ctx, req):
        raise RequestRefused(ResponseCode.NO_PERMISSION, "not yours")

    def failed(ctx, req):
        raise ValueError("broken")

    async def failed_later():
        raise KeyError("gone")

    def withdrawn(ctx, req):  # took a later answer, then raised: the error answers
        ctx.connection.answer_later(req)
        raise RequestRefused(ResponseCode.MESSAGE_ILLEGAL, "bad")

    table.register(1, refused)
    table.register(2, failed)
    table.register(3, lambda ctx, req: failed_later())
    table.register(4, withdrawn)
    table.register(5, lambda ctx, req: None)  # a oneway's nothing
    answers = [await call_locally(table, request(code), PEER, LOCAL) for code in range(1, 7)]
    assert [(a.code, a.remark) for a in answers[:2]] == [
        (ResponseCode.NO_PERMISSION, "not yours"),
        (ResponseCode.SYSTEM_ERROR, "ValueError: broken"),
    ]
    assert (answers[2].code, answers[3].code) == (
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.MESSAGE_ILLEGAL,
    )
    assert (
        answers[4].code == ResponseCode.SYSTEM_ERROR and "no response command" in answers[4].remark
    )
    assert answers[5].code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_a_route_at_its_limit_is_busy_and_a_deferred_call_counts_in_it():
    table = ProcessorTable()
    release = anyio.Event()

    async def slow(req):
        await release.wait()
        return req.response()

    table.register(1, lambda ctx, req: slow(req), limit=1, backlog=0)
    route = table.lookup(1)
    assert route is not None
    answers = []
    async with anyio.create_task_group() as task_group:

        async def call():
            answers.append(await call_locally(table, request(1), PEER, LOCAL))

        task_group.start_soon(call)
        await anyio.wait_all_tasks_blocked()
        assert route.active == 1
        busy = await call_locally(table, request(1), PEER, LOCAL)
        assert (busy.code, busy.remark) == (ResponseCode.SYSTEM_BUSY, BUSY_REMARK)
        release.set()
    assert [answer.code for answer in answers] == [ResponseCode.SUCCESS]
    assert route.active == 0


async def test_a_caller_that_stops_waiting_does_not_cut_a_processors_work_short():
    table = ProcessorTable()
    finished = []

    async def put(req):
        await anyio.sleep(0.05)
        finished.append(req.remark)  # the store's work, done after the caller left
        return req.response()

    table.register(1, lambda ctx, req: put(req))
    table.register(2, lambda ctx, req: ctx.connection.answer_later(req))  # never answered
    with anyio.move_on_after(0.01):
        await call_locally(table, request(1, "kept"), PEER, LOCAL)
    with anyio.move_on_after(0.01) as gave_up:
        await call_locally(table, request(2), PEER, LOCAL)
    assert finished == ["kept"]
    assert gave_up.cancelled_caught
