"""Remoting behaviour over real TCP connections, on asyncio and trio."""

from __future__ import annotations

import re

import anyio
import pytest

from rocketmq_core.errors import (
    ConfigError,
    ConnectionClosedError,
    HeaderError,
    RemotingTimeoutError,
)
from rocketmq_core.protocol.codec import (
    MAX_FRAME_LENGTH,
    FrameDecoder,
    encode_command,
    encode_into,
)
from rocketmq_core.protocol.codes import FLAG_RESPONSE, RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting import connection as connection_module
from rocketmq_core.remoting import socket_io as socket_io_module
from rocketmq_core.remoting.budgets import MemoryReturner, ServerLimits
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.remoting.connection import FRAMES_PER_TURN, LaterAnswer
from rocketmq_core.remoting.processor import ProcessorTable
from rocketmq_core.remoting.socket_io import AsyncioSocketIO, socket_io
from rocketmq_core.remoting.transport import Endpoint, parse_address, parse_endpoint
from rocketmq_core.testing.transport import closed_by_peer, read_commands, serving

pytestmark = pytest.mark.anyio


@pytest.fixture
def tcp(plugin_host):
    return plugin_host.registry.transports.get("tcp")


def request(code: int, body: bytes = b"", **fields: str) -> RemotingCommand:
    return RemotingCommand.request(code, fields or None, body)


async def test_inline_async_and_deferred_processors(tcp):
    async def later(value: str) -> RemotingCommand:
        await anyio.sleep(0.01)
        return RemotingCommand(0, remark=value)

    table = ProcessorTable()
    table.register(1, lambda ctx, req: req.response(remark="inline"))
    table.register(2, lambda ctx, req: later("deferred"))

    async def coroutine_processor(ctx, req):
        await anyio.sleep(0.01)
        return req.response(remark=f"async from {ctx.peer_address == ctx.connection.peer_address}")

    table.register(3, coroutine_processor)
    async with serving(tcp, table) as (_server, address), RemotingClient(tcp) as client:
        remarks = [(await client.invoke(address, request(code))).remark for code in (1, 2, 3)]
    assert remarks == ["inline", "deferred", "async from True"]


async def test_a_deferred_processor_may_answer_with_a_finished_frame(tcp):
    """A coroutine's answer may be a finished response frame (bytes), as an inline
    processor's may be where the connection takes encoded answers (a SYNC_FLUSH send on
    a store without a durability callback answers so)."""

    async def framed(ctx, req: RemotingCommand) -> bytes:
        await anyio.sleep(0.01)
        assert ctx.connection.takes_encoded_answers
        return encode_command(req.response(remark="framed"))

    table = ProcessorTable()
    table.register(1, framed)
    async with serving(tcp, table) as (_server, address), RemotingClient(tcp) as client:
        with anyio.fail_after(5):
            answers = [await client.invoke(address, request(1)) for _ in range(2)]
    assert [answer.remark for answer in answers] == ["framed", "framed"]


async def test_unknown_code_and_default_processor(tcp):
    table = ProcessorTable()
    async with serving(tcp, table) as (_server, address), RemotingClient(tcp) as client:
        response = await client.invoke(address, request(999))
        assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert response.remark == " request type 999 not supported"
        table.set_default(lambda ctx, req: req.response(remark=f"default {req.code}"))
        assert (await client.invoke(address, request(999))).remark == "default 999"


async def test_processor_errors_become_responses_and_the_connection_survives(tcp):
    def broken(ctx, req):
        raise ValueError("no such queue 9")

    def bad_header(ctx, req):
        raise HeaderError(
            "the custom field <topic> is null", response_code=ResponseCode.INVALID_PARAMETER
        )

    async def broken_later(ctx, req):
        await anyio.sleep(0)
        raise KeyError("gone")

    table = ProcessorTable()
    table.register(1, broken)
    table.register(2, bad_header)
    table.register(3, broken_later)
    table.register(4, lambda ctx, req: req.response(remark="fine"))
    async with serving(tcp, table) as (server, address), RemotingClient(tcp) as client:
        first = await client.invoke(address, request(1))
        assert (first.code, first.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "ValueError: no such queue 9",
        )
        second = await client.invoke(address, request(2))
        assert (second.code, second.remark) == (
            ResponseCode.INVALID_PARAMETER,
            "the custom field <topic> is null",
        )
        third = await client.invoke(address, request(3))
        assert third.code == ResponseCode.SYSTEM_ERROR and "KeyError" in third.remark
        assert (await client.invoke(address, request(4))).remark == "fine"
        assert len(server.connections) == 1


async def test_limit_and_backlog_answer_system_busy(tcp):
    release = anyio.Event()

    async def held(ctx, req):
        await release.wait()
        return req.response(remark="done")

    table = ProcessorTable()
    table.register(1, held, limit=1, backlog=1)
    async with serving(tcp, table) as (_server, address), RemotingClient(tcp) as client:
        answers = []

        async def call() -> None:
            answers.append(await client.invoke(address, request(1), timeout=5))

        async with anyio.create_task_group() as task_group:
            for _ in range(3):
                task_group.start_soon(call)
            with anyio.fail_after(5):
                while not answers:
                    await anyio.sleep(0.01)
            release.set()
    busy = [a for a in answers if a.code == ResponseCode.SYSTEM_BUSY]
    assert len(busy) == 1
    assert busy[0].remark == "[OVERLOAD]system busy, start flow control for a while"
    assert sorted(a.remark for a in answers if a.code == 0) == ["done", "done"]


async def test_timeout_then_late_response_is_dropped(tcp):
    async def slow(ctx, req):
        await anyio.sleep(float(req.ext_fields["s"]))
        return req.response(remark=req.ext_fields["s"])

    table = ProcessorTable()
    table.register(RequestCode.PULL_MESSAGE, slow)
    async with serving(tcp, table) as (_server, address), RemotingClient(tcp) as client:
        with pytest.raises(
            RemotingTimeoutError, match=f"PULL_MESSAGE from {address} within 0.05 s"
        ):
            await client.invoke(address, request(RequestCode.PULL_MESSAGE, s="0.3"), timeout=0.05)
        # the late answer to the first request must not be taken for this one
        response = await client.invoke(
            address, request(RequestCode.PULL_MESSAGE, s="0.4"), timeout=5
        )
        assert response.remark == "0.4"


async def test_server_calls_the_client_back_on_its_connection(tcp):
    async def ask_back(ctx, req):
        check = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, {"msgId": "M1"})
        answer = await ctx.connection.invoke(check, timeout=5)
        return req.response(remark=f"client said {answer.remark}")

    server_table = ProcessorTable()
    server_table.register(RequestCode.END_TRANSACTION, ask_back)
    client_table = ProcessorTable()
    client_table.register(
        RequestCode.CHECK_TRANSACTION_STATE,
        lambda ctx, req: req.response(remark=f"commit {req.ext_fields['msgId']}"),
    )
    async with serving(tcp, server_table) as (_server, address):
        async with RemotingClient(tcp, processors=client_table) as client:
            response = await client.invoke(address, request(RequestCode.END_TRANSACTION))
    assert response.remark == "client said commit M1"


async def test_waiting_invocations_fail_when_the_connection_closes(tcp):
    async def hang_up(ctx, req):
        await ctx.connection.aclose()

    table = ProcessorTable()
    table.register(1, hang_up)
    closed = []
    async with serving(tcp, table) as (server, address), RemotingClient(tcp) as client:
        server.on_connection_closed(closed.append)
        client.on_connection_closed(lambda addr, conn: closed.append(addr))
        with pytest.raises(ConnectionClosedError, match="closed"):
            await client.invoke(address, request(1), timeout=5)
        with anyio.fail_after(5):
            while len(closed) < 2:
                await anyio.sleep(0.01)
        assert address in closed
        # the next invocation opens a new connection
        table.register(1, lambda ctx, req: req.response(remark="again"))
        assert (await client.invoke(address, request(1))).remark == "again"


async def test_a_closed_connection_queues_nothing_and_its_charges_are_refunded_once(tcp):
    # invoke's wait for a writable connection can time out just as the connection closes;
    # what it then queues must not be charged to the server's budget for good
    table = ProcessorTable()
    table.register(1, lambda ctx, req: req.response(remark="ok"))
    async with serving(tcp, table) as (server, address), RemotingClient(tcp) as client:
        await client.invoke(address, request(1))
        (connection,) = server.connections
        connection.abort()
        with pytest.raises(ConnectionClosedError, match="closed"):
            connection._queue(request(RequestCode.CHECK_TRANSACTION_STATE, b"x" * 1000))
        connection.abort()  # a second close refunds nothing more
        with anyio.fail_after(5):
            while server.connections:
                await anyio.sleep(0.01)
        assert (server.budget.unsent, server.budget.incomplete) == (0, 0)


async def test_the_sweeper_asks_a_connection_to_close_once(tcp):
    async def slow_to_end(ctx, req):
        with anyio.CancelScope(shield=True):  # the close waits for it
            await anyio.sleep(1.0)

    table = ProcessorTable()
    table.register(1, slow_to_end)
    limits = ServerLimits(idle_seconds=0.2)
    async with (
        serving(tcp, table, limits=limits) as (server, address),
        RemotingClient(tcp) as client,
    ):
        with pytest.raises((ConnectionClosedError, RemotingTimeoutError)):
            await client.invoke(address, request(1), timeout=5)
        with anyio.fail_after(5):
            while server.connections:
                await anyio.sleep(0.01)
        assert server.expired["idle"] == 1


async def test_free_memory_is_returned_at_most_once_per_interval():
    returner = MemoryReturner(interval=0.5)
    started = anyio.current_time()
    async with anyio.create_task_group() as task_group:
        for _ in range(5):
            returner.request(task_group)  # folded into one
        await anyio.sleep(0.1)
        for _ in range(5):
            returner.request(task_group)  # one more, when the interval has passed
    assert returner.returns == 2
    assert anyio.current_time() - started >= 0.5


async def test_invoke_with_callback(tcp):
    async def slow(ctx, req):
        await anyio.sleep(1)

    table = ProcessorTable()
    table.register(1, lambda ctx, req: req.response(remark="called back"))
    table.register(2, slow)
    results = []
    async with serving(tcp, table) as (_server, address), RemotingClient(tcp) as client:
        done = anyio.Event()

        async def on_result(response, error):
            results.append((response.remark if response else None, type(error).__name__))
            if len(results) == 2:
                done.set()

        client.invoke_callback(address, request(1), on_result)
        client.invoke_callback(address, request(2), on_result, timeout=0.05)
        with anyio.fail_after(5):
            await done.wait()
    assert sorted(results, key=str) == [("called back", "NoneType"), (None, "RemotingTimeoutError")]


async def test_rpc_hooks_on_both_sides(tcp):
    class Signer:
        def before_request(self, ctx, req):
            req.ext_fields["Signature"] = f"signed-{req.code}"

        def after_response(self, ctx, req, resp):
            resp.ext_fields["seen_by_client_hook"] = "yes"

    class Guard:
        def before_request(self, ctx, req):
            if req.ext_fields.get("Signature") != f"signed-{req.code}":
                return req.response(ResponseCode.NO_PERMISSION, "bad signature")
            return None

        def after_response(self, ctx, req, resp):
            resp.ext_fields["traced"] = "1"

    table = ProcessorTable()
    table.register(1, lambda ctx, req: req.response(remark=req.ext_fields["Signature"]))
    async with serving(tcp, table, hooks=[Guard()]) as (_server, address):
        async with RemotingClient(tcp, hooks=[Signer()]) as client:
            response = await client.invoke(address, request(1))
            assert response.remark == "signed-1"
            assert response.ext_fields == {"traced": "1", "seen_by_client_hook": "yes"}
        async with RemotingClient(tcp) as unsigned:
            refused = await unsigned.invoke(address, request(1))
            assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION, "bad signature")


async def test_hooks_run_on_one_direction_only_a_servers_on_requests_in_a_clients_on_requests_out(
    tcp,
):
    seen: list[tuple[str, int]] = []

    class Recorder:
        def __init__(self, side):
            self.side = side

        def before_request(self, ctx, req):
            seen.append((self.side, req.code))

        def after_response(self, ctx, req, resp):
            pass

    async def ask_back(ctx, req):
        check = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, {})
        await ctx.connection.invoke(check, timeout=5)
        return req.response()

    server_table = ProcessorTable()
    server_table.register(RequestCode.END_TRANSACTION, ask_back)
    client_table = ProcessorTable()
    client_table.register(RequestCode.CHECK_TRANSACTION_STATE, lambda ctx, req: req.response())
    async with serving(tcp, server_table, hooks=[Recorder("server")]) as (_server, address):
        async with RemotingClient(
            tcp, processors=client_table, hooks=[Recorder("client")]
        ) as client:
            await client.invoke(address, request(RequestCode.END_TRANSACTION))
    # the server's request to the client passed neither the server's hook (an ACL guard
    # would refuse it) nor the client's (a signer would sign the server's request)
    assert seen == [
        ("client", RequestCode.END_TRANSACTION),
        ("server", RequestCode.END_TRANSACTION),
    ]


async def test_a_burst_is_answered_in_writes_of_a_turn_each_the_first_before_the_last_is_handled(
    tcp, monkeypatch
):
    burst = 3 * FRAMES_PER_TURN + 4
    handled = 0
    sends = []  # (responses in the write, requests handled when it was made)

    def counted_io(stream):
        """The connection's writes, counted (on asyncio they bypass stream.send)."""
        io = socket_io(stream)
        original = io.send

        async def send(data):
            sends.append((data.count(b'"flag":1'), handled))
            await original(data)

        io.send = send
        return io

    monkeypatch.setattr(connection_module, "socket_io", counted_io)

    def echo(ctx, req):
        nonlocal handled
        handled += 1
        return req.response(body=req.body)

    table = ProcessorTable()
    table.register(1, echo)
    async with serving(tcp, table) as (_server, address):
        stream = await tcp.connect(*parse_address(address))
        async with stream:
            frames = []
            for opaque in range(burst):
                command = request(1, b"x" * 20)
                command.opaque = opaque
                frames.append(encode_command(command))
            await stream.send(b"".join(frames))
            responses = await read_commands(stream, burst)
    assert [r.opaque for r in responses] == list(range(burst))
    assert sum(count for count, _ in sends) == burst
    # answers leave a turn's worth at a time, never all at the end of the burst...
    assert all(count <= FRAMES_PER_TURN for count, _ in sends)
    assert sends[0][1] < burst
    # ...and a turn's answers leave together, in one write (more if TCP split the burst)
    assert len(sends) <= 2 * (burst // FRAMES_PER_TURN + 1)


@pytest.mark.parametrize(
    "anyio_backend",
    [
        pytest.param(("asyncio", {}), id="asyncio"),
        pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
        "trio",
    ],
)
async def test_a_burst_of_requests_leaves_a_turn_at_a_time_as_it_is_encoded(
    tcp, monkeypatch, anyio_backend
):
    """The tasks one read of answers wakes each send again: on asyncio's sockets a turn's
    worth of their requests is written once encoded, and the broker works on it while the
    rest is encoded; on other streams the writer sends the burst after its last."""
    burst = 2 * FRAMES_PER_TURN + 8
    encoded = 0  # requests of the burst encoded so far
    writes = []  # (requests in the write, requests encoded when it was made)

    def counted_encode(command, out, *args):
        nonlocal encoded
        encoded += not command.flag & FLAG_RESPONSE
        return encode_into(command, out, *args)

    def counted_io(stream):
        """The connection's writes of requests (on asyncio all of them go through
        ``write_now``, a writer's ``send`` too)."""
        io = socket_io(stream)
        name = "write_now" if isinstance(io, AsyncioSocketIO) else "send"
        original = getattr(io, name)

        def write(data):
            decoder = FrameDecoder()
            requests = [c for c in decoder.feed(data) if not c.flag & FLAG_RESPONSE]
            assert not decoder.buffered  # whole frames only
            if requests:
                writes.append((len(requests), encoded))
            return original(data)

        setattr(io, name, write)
        return io

    monkeypatch.setattr(socket_io_module, "DIRECT", True)  # whatever the environment says
    monkeypatch.setattr(connection_module, "socket_io", counted_io)
    monkeypatch.setattr(connection_module, "encode_into", counted_encode)
    table = ProcessorTable()
    table.register(1, lambda ctx, req: req.response(body=req.body))
    async with serving(tcp, table) as (_server, address), RemotingClient(tcp) as client:
        await client.invoke(address, request(1))  # the connection is open
        encoded, writes[:] = 0, []
        answers = []

        async def send(number: int) -> None:
            response = await client.invoke(address, request(1, str(number).encode()))
            answers.append(int(response.body))

        async with anyio.create_task_group() as task_group:
            for number in range(burst):
                task_group.start_soon(send, number)
    assert sorted(answers) == list(range(burst))
    if anyio_backend == "trio":
        assert writes == [(burst, burst)]
    else:
        assert writes == [
            (FRAMES_PER_TURN, FRAMES_PER_TURN),
            (FRAMES_PER_TURN, 2 * FRAMES_PER_TURN),
            (burst - 2 * FRAMES_PER_TURN, burst),
        ]


async def test_oneway_invocation_and_cpp_style_flag_zero(tcp):
    seen = []

    def record(ctx, req):
        seen.append(req.is_oneway)
        return req.response(remark="answered")

    table = ProcessorTable()
    table.register(RequestCode.UPDATE_CONSUMER_OFFSET, record)
    async with serving(tcp, table) as (_server, address), RemotingClient(tcp) as client:
        await client.invoke_oneway(address, request(RequestCode.UPDATE_CONSUMER_OFFSET))
        # the C++ client's "oneway" arrives with flag 0 and is answered; it drops the answer
        answer = await client.invoke(address, request(RequestCode.UPDATE_CONSUMER_OFFSET))
    assert seen == [True, False]
    assert answer.remark == "answered"


async def test_an_unsendable_response_becomes_system_error_and_nothing_else_breaks(tcp):
    class BrokenHook:
        def before_request(self, ctx, req):
            return None

        def after_response(self, ctx, req, resp):
            if req.code == 2:
                raise RuntimeError("hook bug")

    table = ProcessorTable()
    table.register(1, lambda ctx, req: req.response(body="a str body"))
    table.register(2, lambda ctx, req: req.response(remark="fine"))
    table.register(3, lambda ctx, req: req.response(remark="still serving"))
    async with serving(tcp, table, hooks=[BrokenHook()]) as (server, address):
        async with RemotingClient(tcp) as client:
            first = await client.invoke(address, request(1))
            assert first.code == ResponseCode.SYSTEM_ERROR
            assert "not sendable" in first.remark
            second = await client.invoke(address, request(2))
            assert (second.code, second.remark) == (
                ResponseCode.SYSTEM_ERROR,
                "response not sendable: RuntimeError",
            )
            assert (await client.invoke(address, request(3))).remark == "still serving"
            assert len(server.connections) == 1


async def test_a_failing_callback_does_not_break_the_client(tcp):
    table = ProcessorTable()
    table.register(1, lambda ctx, req: req.response(remark="ok"))
    calls = []

    def failing(response, error):
        calls.append(response.remark)
        raise ValueError("callback bug")

    async with serving(tcp, table) as (_server, address), RemotingClient(tcp) as client:
        client.invoke_callback(address, request(1), failing)
        with anyio.fail_after(5):
            while not calls:
                await anyio.sleep(0.01)
        assert (await client.invoke(address, request(1))).remark == "ok"
    assert calls == ["ok"]


@pytest.mark.parametrize(
    "address, endpoint",
    [
        ("127.0.0.1:9876", Endpoint(None, "127.0.0.1", 9876)),
        ("quic://127.0.0.1:9876", Endpoint("quic", "127.0.0.1", 9876)),
        ("QUIC://broker-a:10911", Endpoint("quic", "broker-a", 10911)),
        ("tcp://[::1]:10911", Endpoint("tcp", "::1", 10911)),
    ],
)
def test_an_address_names_its_transport_or_none(address, endpoint):
    assert parse_endpoint(address) == endpoint
    assert str(endpoint) == address.replace("QUIC", "quic")


@pytest.mark.parametrize(
    "address, message",
    [
        ("quic://127.0.0.1", "expected quic://host:port, like quic://127.0.0.1:9876"),
        ("quic:/127.0.0.1:9876", "expected host:port"),
        ("://127.0.0.1:9876", "expected transport://host:port"),
        ("quic://:9876", "expected quic://host:port"),
    ],
)
def test_a_bad_address_is_a_config_error_naming_it(address, message):
    with pytest.raises(ConfigError, match=re.escape(f"bad address {address!r}: {message}")):
        parse_endpoint(address)


async def test_a_client_closed_while_connecting_fails_that_request_with_connection_closed(tcp):
    connecting, release = anyio.Event(), anyio.Event()

    class SlowTransport:
        name = "tcp"

        async def listen(self, host, port, handler, *, tls=None, task_status):
            await tcp.listen(host, port, handler, tls=tls, task_status=task_status)

        async def connect(self, host, port, *, tls=None):
            connecting.set()
            await release.wait()
            return await tcp.connect(host, port, tls=tls)

    table = ProcessorTable()
    table.register(1, lambda ctx, req: req.response())
    outcome: list[BaseException] = []
    async with serving(tcp, table) as (_server, address), anyio.create_task_group() as group:
        async with RemotingClient(SlowTransport()) as client:

            async def invoke() -> None:
                try:
                    await client.invoke(address, request(1), timeout=5)
                except Exception as exc:
                    outcome.append(exc)

            group.start_soon(invoke)
            await connecting.wait()
        release.set()  # the connection is made after the client closed
    assert len(outcome) == 1 and isinstance(outcome[0], ConnectionClosedError), outcome
    assert "closed while connecting" in str(outcome[0])


async def test_a_later_answer_withdrawn_by_a_failing_processor_is_not_waited_for(tcp):
    def fails_after_asking(ctx, req):  # as a SYNC_MASTER send whose wait cannot register
        later = ctx.connection.answer_later(req)
        try:
            raise RuntimeError("the wait could not be registered")
        except RuntimeError:
            later.withdraw()
            raise

    table = ProcessorTable()
    table.register(1, fails_after_asking)
    async with serving(tcp, table) as (server, address), RemotingClient(tcp) as client:
        answer = await client.invoke(address, request(1), timeout=5)
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert "could not be registered" in answer.remark
        (connection,) = server.connections
        connection.drain()  # nothing in flight: it closes at once
        with anyio.fail_after(2):
            while server.connections:
                await anyio.sleep(0.01)


async def test_a_later_answer_leaves_when_answered_and_a_drain_waits_for_it(tcp):
    held: list[LaterAnswer] = []

    def answer_later(ctx, req):  # as a SYNC_MASTER send waiting for a slave's ack
        later = ctx.connection.answer_later(req)
        held.append(later)
        return later

    async def until_held(count):
        with anyio.fail_after(5):
            while len(held) < count:
                await anyio.sleep(0.005)

    table = ProcessorTable()
    table.register(1, answer_later)
    table.register(2, lambda ctx, req: req.response(remark="inline"))
    answers: dict[str, RemotingCommand] = {}
    async with serving(tcp, table) as (server, address), RemotingClient(tcp) as client:

        async def ask(key):
            answers[key] = await client.invoke(address, request(1, key.encode()), timeout=5)

        async with anyio.create_task_group() as group:
            group.start_soon(ask, "command")
            group.start_soon(ask, "frame")
            await until_held(2)
            # the connection goes on meanwhile: a later request is answered first
            assert (await client.invoke(address, request(2))).remark == "inline"
            assert not answers
            first, second = sorted(held, key=lambda later: later.request.body)  # command, frame
            first.answer(first.request.response(ResponseCode.FLUSH_SLAVE_TIMEOUT))
            first.answer(first.request.response(remark="twice"))  # only the first counts
            frame = second.request.response(remark="a finished frame")
            frame.opaque, frame.flag = second.request.opaque, FLAG_RESPONSE
            second.answer(encode_command(frame))
        assert answers["command"].code == ResponseCode.FLUSH_SLAVE_TIMEOUT
        assert answers["command"].remark is None
        assert answers["frame"].remark == "a finished frame"

        async with anyio.create_task_group() as group:
            group.start_soon(ask, "drained")
            await until_held(3)
            (connection,) = server.connections
            connection.drain()
            await anyio.sleep(0.1)
            assert not connection.closed  # it waits for the answer still to come
            held[2].answer(held[2].request.response(remark="answered, then closed"))
        assert answers["drained"].remark == "answered, then closed"
        with anyio.fail_after(5):
            while server.connections:
                await anyio.sleep(0.01)
        held[2].answer(held[2].request.response(remark="late"))  # closed: nothing happens

    async with serving(tcp, table) as (server, address), RemotingClient(tcp) as client:

        async def ask_in_vain():
            with pytest.raises(ConnectionClosedError):
                await client.invoke(address, request(1), timeout=5)

        async with anyio.create_task_group() as group:
            group.start_soon(ask_in_vain)
            await until_held(4)
            (connection,) = server.connections
            connection.abort()
            held[3].answer(held[3].request.response(remark="too late"))  # dropped, no error


@pytest.mark.parametrize(
    "bad",
    [
        # a header the decoder refuses, its opaque unknown: nothing to answer, then closed
        (b"\x00\x00\x00\x0a\x00\x00\x00\x06{bad }", None),
        # a frame longer than the limit, its header naming opaque 9: refused, then closed
        (
            (MAX_FRAME_LENGTH + 1).to_bytes(4, "big")
            + len(b'{"code":1,"opaque":9}').to_bytes(4, "big")
            + b'{"code":1,"opaque":9}',
            9,
        ),
    ],
    ids=["bad-header", "too-long"],
)
async def test_requests_before_a_malformed_frame_are_answered_then_it_is_refused(tcp, bad):
    """The malformed frame arrives with good ones in one write, and the client then waits:
    the good ones are answered and the bad one refused without more bytes coming."""
    frame, refused_opaque = bad
    table = ProcessorTable()
    table.register(1, lambda ctx, req: req.response(remark="answered"))
    good = [request(1) for _ in range(2)]
    for opaque, command in enumerate(good, 1):
        command.opaque = opaque
    async with serving(tcp, table) as (_server, address):
        host, port = parse_address(address)
        async with await anyio.connect_tcp(host, port) as stream:
            await stream.send(b"".join(encode_command(command) for command in good) + frame)
            expected = 3 if refused_opaque is not None else 2
            answers = await read_commands(stream, expected)
            assert await closed_by_peer(stream)
    assert [(a.opaque, a.remark) for a in answers[:2]] == [(1, "answered"), (2, "answered")]
    if refused_opaque is not None:
        assert answers[2].opaque == refused_opaque
        assert answers[2].code == ResponseCode.MESSAGE_ILLEGAL


async def test_a_request_still_processed_is_answered_before_a_later_bad_frame_is_refused(tcp):
    """The bad frame arrives in a read of its own while an earlier request is still being
    processed: that request's answer leaves before the stream closes."""

    async def slow(ctx, req):
        await anyio.sleep(0.2)
        return req.response(remark="slow answer")

    table = ProcessorTable()
    table.register(2, slow)
    first = request(2)
    first.opaque = 7
    async with serving(tcp, table) as (_server, address):
        host, port = parse_address(address)
        async with await anyio.connect_tcp(host, port) as stream:
            await stream.send(encode_command(first))
            await anyio.sleep(0.05)  # read apart from the bad frame
            await stream.send(b"\x00\x00\x00\x0a\x00\x00\x00\x06{bad }")
            (answer,) = await read_commands(stream, 1)
            assert await closed_by_peer(stream)
    assert (answer.opaque, answer.remark) == (7, "slow answer")
