"""TransportConformance: the contract every transport plugin must keep.

A transport plugin subclasses it and adds only a ``transport`` fixture::

    class TestTcpConformance(TransportConformance):
        @pytest.fixture
        def transport(self):
            return TcpTransport()

Every test runs a real RemotingServer over the transport, on both anyio backends.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from ..errors import ConfigError, ConnectionClosedError, RemotingConnectError
from ..protocol.codec import MAX_FRAME_LENGTH, FrameDecoder, encode_command
from ..protocol.codes import FLAG_RESPONSE, ResponseCode
from ..protocol.command import RemotingCommand
from ..remoting.client import RemotingClient
from ..remoting.processor import ProcessorTable
from ..remoting.server import RemotingServer
from ..remoting.transport import Transport, parse_address
from .golden import all_frames

ECHO = 1  # answers with the request's body and extFields
SLOW = 2  # sleeps for the float in extFields["seconds"], then answers
RECORD = 3  # remembers the request, answers


class ConformanceProcessors:
    """The processors the suite serves, with what they saw."""

    def __init__(self) -> None:
        self.recorded: list[RemotingCommand] = []
        self.slow_started = 0
        self.slow_cancelled = 0
        self.slow_running = 0

    def table(self) -> ProcessorTable:
        table = ProcessorTable()
        table.register(ECHO, self.echo)
        table.register(SLOW, self.slow)
        table.register(RECORD, self.record)
        table.set_default(self.echo)
        return table

    def echo(self, ctx, request: RemotingCommand) -> RemotingCommand:
        return request.response(
            remark=f"echo {request.code}", ext_fields=dict(request.ext_fields), body=request.body
        )

    async def slow(self, ctx, request: RemotingCommand) -> RemotingCommand:
        self.slow_started += 1
        self.slow_running += 1
        try:
            await anyio.sleep(float(request.ext_fields.get("seconds", "0.2")))
        except anyio.get_cancelled_exc_class():
            self.slow_cancelled += 1
            raise
        finally:
            self.slow_running -= 1
        return request.response(remark="slow done")

    def record(self, ctx, request: RemotingCommand) -> RemotingCommand:
        self.recorded.append(request)
        return request.response(remark="recorded")


@asynccontextmanager
async def serving(
    transport: Transport, processors: ProcessorTable, **server_options: Any
) -> AsyncIterator[tuple[RemotingServer, str]]:
    """A RemotingServer on 127.0.0.1 and a free port for the block; yields it and its address."""
    server = RemotingServer(transport, processors, **server_options)
    async with anyio.create_task_group() as task_group:
        address = await task_group.start(server.serve, "127.0.0.1", 0)
        try:
            yield server, address
        finally:
            task_group.cancel_scope.cancel()


async def read_commands(stream, count: int, timeout: float = 5.0) -> list[RemotingCommand]:
    """Read exactly ``count`` commands from a raw stream."""
    decoder = FrameDecoder()
    commands: list[RemotingCommand] = []
    with anyio.fail_after(timeout):
        while len(commands) < count:
            commands += decoder.feed(await stream.receive())
    return commands


async def closed_by_peer(stream, timeout: float = 5.0) -> bool:
    """True when the peer closes the stream (responses before the close are skipped)."""
    with anyio.fail_after(timeout):
        try:
            while True:
                await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
            return True


@pytest.mark.anyio
class TransportConformance:
    @pytest.fixture(params=["asyncio", "trio"])
    def anyio_backend(self, request):
        return request.param

    @pytest.fixture
    def transport(self) -> Transport:
        raise NotImplementedError("a conformance subclass provides the transport fixture")

    @pytest.fixture
    def processors(self) -> ConformanceProcessors:
        return ConformanceProcessors()

    async def connect_raw(self, transport: Transport, address: str):
        host, port = parse_address(address)
        return await transport.connect(host, port)

    async def test_golden_frames_round_trip(self, transport, processors):
        requests = [g for g in all_frames() if not g.flag & FLAG_RESPONSE]
        async with serving(transport, processors.table()) as (_server, address):
            stream = await self.connect_raw(transport, address)
            async with stream:
                await stream.send(b"".join(golden.frame for golden in requests))
                responses = await read_commands(stream, len(requests))
        # C++ "oneway" requests arrive with flag 0 and are answered (REMOTING.md §11.6)
        by_opaque = {response.opaque: response for response in responses}
        for golden in requests:
            response = by_opaque[golden.opaque]
            assert response.is_response
            assert response.code == ResponseCode.SUCCESS
            assert response.remark == f"echo {golden.code}"
            # the answer mirrors the request's header encoding
            assert response.serialize_type == golden.frame[4]

    async def test_address_in_use_is_a_config_error_naming_it(self, transport, processors):
        async with serving(transport, processors.table()) as (_server, address):
            host, port = parse_address(address)

            async def ignore(stream):
                await stream.aclose()

            with pytest.raises(ConfigError, match=f"cannot listen on {re.escape(address)}"):
                await transport.listen(host, port, ignore)

    async def test_largest_frame_body(self, transport, processors):
        request = RemotingCommand.request(ECHO, {"k": "v"}, b"")
        header_size = len(encode_command(request))
        body = bytes(range(256)) * ((MAX_FRAME_LENGTH - header_size) // 256)
        # leave room for the opaque digits and the response's remark
        body += b"\x07" * (MAX_FRAME_LENGTH - header_size - len(body) - 64)
        request.body = body
        async with serving(transport, processors.table()) as (_server, address):
            async with RemotingClient(transport) as client:
                # what is checked is the size, not the speed: a slow transport (pure-Python
                # QUIC takes ~20 s for 16 MiB each way) on a busy machine still passes
                response = await client.invoke(address, request, timeout=180)
        assert response.code == ResponseCode.SUCCESS
        assert response.body == body

    async def test_hundred_concurrent_clients(self, transport, processors):
        results: dict[int, bytes] = {}
        async with serving(transport, processors.table()) as (server, address):
            peak = 0

            async def one_client(number: int) -> None:
                nonlocal peak
                # a hundred handshakes at once queue up on the server (QUIC's are ~20-50 ms
                # of pure Python each): the test is about serving them all, not how fast
                async with RemotingClient(transport, connect_timeout=30) as client:
                    await client.connection(address)
                    await opened.wait()
                    peak = max(peak, len(server.connections))
                    body = f"client {number}".encode()
                    response = await client.invoke(
                        address, RemotingCommand.request(ECHO, None, body), timeout=30
                    )
                    results[number] = response.body

            opened = anyio.Event()
            async with anyio.create_task_group() as task_group:
                for number in range(100):
                    task_group.start_soon(one_client, number)
                with anyio.fail_after(30):
                    while len(server.connections) < 100:
                        await anyio.sleep(0.01)
                opened.set()
        assert peak == 100
        assert results == {number: f"client {number}".encode() for number in range(100)}

    async def test_abrupt_close_leaks_no_task(self, transport, processors):
        async with serving(transport, processors.table()) as (server, address):
            stream = await self.connect_raw(transport, address)
            slow = RemotingCommand.request(SLOW, {"seconds": "30"})
            slow.opaque = 1
            await stream.send(encode_command(slow))
            with anyio.fail_after(5):
                while processors.slow_running == 0:
                    await anyio.sleep(0.01)
            await anyio.aclose_forcefully(stream)
            with anyio.fail_after(5):
                while server.connections or processors.slow_running:
                    await anyio.sleep(0.01)
        assert processors.slow_cancelled == 1

    async def test_graceful_drain(self, transport, processors):
        async with serving(transport, processors.table()) as (server, address):
            async with RemotingClient(transport) as client:
                answers = []

                async def slow_request() -> None:
                    request = RemotingCommand.request(SLOW, {"seconds": "0.3"})
                    answers.append(await client.invoke(address, request, timeout=5))

                async with anyio.create_task_group() as task_group:
                    task_group.start_soon(slow_request)
                    with anyio.fail_after(5):
                        while processors.slow_running == 0:
                            await anyio.sleep(0.01)
                    await server.stop(grace=5)
                assert [answer.remark for answer in answers] == ["slow done"]
                assert not server.connections
                # the drained connection is gone and the listener no longer accepts
                with pytest.raises((ConnectionClosedError, RemotingConnectError)):
                    await client.invoke(address, RemotingCommand.request(ECHO), timeout=2)
                with pytest.raises(RemotingConnectError):
                    await client.invoke(address, RemotingCommand.request(ECHO), timeout=2)

    async def test_oneway_gets_no_response(self, transport, processors):
        async with serving(transport, processors.table()) as (_server, address):
            stream = await self.connect_raw(transport, address)
            async with stream:
                oneway = RemotingCommand.request(RECORD, {"n": "1"}, oneway=True)
                oneway.opaque = 10
                normal = RemotingCommand.request(ECHO)
                normal.opaque = 11
                await stream.send(encode_command(oneway) + encode_command(normal))
                (response,) = await read_commands(stream, 1)
                assert response.opaque == 11
                with anyio.move_on_after(0.2):
                    extra = await read_commands(stream, 1, timeout=1)
                    pytest.fail(f"a oneway request was answered: {extra}")
        assert [request.ext_fields["n"] for request in processors.recorded] == ["1"]

    @pytest.mark.parametrize(
        "bad_bytes, answered",
        [
            pytest.param(None, True, id="oversized"),
            pytest.param(b"\x00\x00\x00\x10\x07\x00\x00\x02{}garbage-bytes", False, id="bad-type"),
            pytest.param(b"\x00\x00\x00\x0c\x00\x00\x00\x08not-json", False, id="bad-json"),
            pytest.param(b"\x00\x00\x00\x06\x00\x00\x00\x09{}", False, id="bad-header-length"),
        ],
    )
    async def test_bad_frame_closes_only_that_connection(
        self, transport, processors, bad_bytes, answered
    ):
        if bad_bytes is None:  # a header that names its request, then a length over 16 MiB
            request = RemotingCommand.request(ECHO)
            request.opaque = 77
            frame = encode_command(request)
            bad_bytes = (MAX_FRAME_LENGTH + 1).to_bytes(4, "big") + frame[4:]
        async with serving(transport, processors.table()) as (server, address):
            async with RemotingClient(transport) as client:
                assert (await client.invoke(address, RemotingCommand.request(ECHO))).code == 0
                stream = await self.connect_raw(transport, address)
                async with stream:
                    await stream.send(bad_bytes)
                    if answered:
                        (refusal,) = await read_commands(stream, 1)
                        assert refusal.opaque == 77
                        assert refusal.code == ResponseCode.MESSAGE_ILLEGAL
                        assert "exceeds the limit" in refusal.remark
                    assert await closed_by_peer(stream)
                # the other connection carries on
                response = await client.invoke(address, RemotingCommand.request(ECHO, None, b"ok"))
                assert response.body == b"ok"
                assert len(server.connections) == 1
