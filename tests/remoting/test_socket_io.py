"""The connection's receive and send: direct on asyncio's sockets (with and without
uvloop), anyio's own calls for any other stream; the same behaviour either way."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from socket import SO_RCVBUF, SO_SNDBUF, SOL_SOCKET

import anyio
import pytest
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.stapled import StapledByteStream

from rocketmq_core.remoting.socket_io import (
    MAX_QUEUED_CHUNKS,
    AsyncioSocketIO,
    StreamIO,
    socket_io,
)

pytestmark = pytest.mark.anyio

ASYNCIO_LOOPS = [
    pytest.param(("asyncio", {}), id="asyncio"),
    pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
]


@asynccontextmanager
async def socket_pair() -> AsyncIterator[tuple[SocketStream, SocketStream]]:
    """A connected (ours, peer) pair of TCP streams on this machine."""
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(SocketAttribute.local_port)
        accepted: list[SocketStream] = []
        async with anyio.create_task_group() as group:
            group.start_soon(_accept_one, listener, accepted)
            ours = await anyio.connect_tcp("127.0.0.1", port)
        async with ours, accepted[0] as peer:
            yield ours, peer


async def _accept_one(listener, accepted: list) -> None:
    accepted.append(await listener.listeners[0].accept())


@pytest.mark.parametrize("anyio_backend", [*ASYNCIO_LOOPS, "trio"])
async def test_asyncio_sockets_take_the_direct_path_and_other_streams_keep_anyios(
    anyio_backend,
):
    async with socket_pair() as (ours, _peer):
        direct = socket_io(ours)
        expected = StreamIO if anyio_backend == "trio" else AsyncioSocketIO
        assert type(direct) is expected
    sender, receiver = anyio.create_memory_object_stream[bytes](1)
    with sender, receiver:
        assert type(socket_io(StapledByteStream(sender, receiver))) is StreamIO  # type: ignore[arg-type]


@pytest.mark.parametrize("anyio_backend", ASYNCIO_LOOPS)
async def test_what_the_peer_sent_before_it_closed_is_read_then_the_end(anyio_backend):
    async with socket_pair() as (ours, peer):
        io = socket_io(ours)
        await peer.send(b"first")
        assert await io.receive(1024) == b"first"
        await peer.send(b"last")
        await peer.aclose()
        await anyio.sleep(0.1)  # the end arrives while nothing reads
        assert await io.receive(1024) == b"last"
        with pytest.raises(anyio.EndOfStream):
            await io.receive(1024)


@pytest.mark.parametrize("anyio_backend", ASYNCIO_LOOPS)
async def test_a_chunk_longer_than_asked_for_comes_in_parts(anyio_backend):
    async with socket_pair() as (ours, peer):
        io = socket_io(ours)
        await peer.send(b"abcdefghij")
        await anyio.sleep(0.1)
        parts = [await io.receive(4) for _ in range(3)]
        assert parts == [b"abcd", b"efgh", b"ij"]


@pytest.mark.parametrize("anyio_backend", ASYNCIO_LOOPS)
async def test_a_stream_closed_here_neither_receives_nor_sends(anyio_backend):
    async with socket_pair() as (ours, _peer):
        io = socket_io(ours)
        await ours.aclose()
        with pytest.raises(anyio.ClosedResourceError):
            await io.receive(1024)
        with pytest.raises(anyio.ClosedResourceError):
            await io.send(b"late")


@pytest.mark.parametrize("anyio_backend", ASYNCIO_LOOPS)
async def test_a_paused_stream_reads_nothing_until_the_next_receive(anyio_backend):
    async with socket_pair() as (ours, peer):
        io = socket_io(ours)
        assert isinstance(io, AsyncioSocketIO)
        await peer.send(b"one")
        assert await io.receive(1024) == b"one"
        io.pause_reading()
        await peer.send(b"two")
        await anyio.sleep(0.1)
        assert not ours._protocol.read_queue  # type: ignore[attr-defined]  # in the kernel
        assert await io.receive(1024) == b"two"


@pytest.mark.parametrize("anyio_backend", ASYNCIO_LOOPS)
async def test_data_already_there_is_returned_after_a_turn_for_the_others(anyio_backend):
    async with socket_pair() as (ours, peer):
        io = socket_io(ours)
        await peer.send(b"x")
        assert await io.receive(1024) == b"x"  # reading from here on
        await peer.send(b"y")
        await anyio.sleep(0.1)  # queued by the protocol
        turns = []

        async def other() -> None:
            turns.append("other")

        async with anyio.create_task_group() as group:
            group.start_soon(other)
            assert await io.receive(1024) == b"y"
            assert turns == ["other"]


@pytest.mark.parametrize("anyio_backend", ASYNCIO_LOOPS)
async def test_a_send_waits_while_the_peer_reads_nothing(anyio_backend):
    size = 32 << 20
    async with socket_pair() as (ours, peer):
        # small kernel buffers (this machine's grow to tens of MiB): the transport's own
        # buffer has to hold most of it until the peer reads
        ours.extra(SocketAttribute.raw_socket).setsockopt(SOL_SOCKET, SO_SNDBUF, 1 << 16)
        peer.extra(SocketAttribute.raw_socket).setsockopt(SOL_SOCKET, SO_RCVBUF, 1 << 16)
        peer._transport.pause_reading()  # type: ignore[attr-defined]  # reads in receive() only
        io = socket_io(ours)
        sent = anyio.Event()

        async def send() -> None:
            await io.send(b"z" * size)
            sent.set()

        async with anyio.create_task_group() as group:
            group.start_soon(send)
            await anyio.sleep(0.3)
            assert not sent.is_set()
            received = 0
            while received < size:
                received += len(await peer.receive(1 << 20))
            with anyio.fail_after(5):
                await sent.wait()
        assert received == size


@pytest.mark.parametrize("anyio_backend", ASYNCIO_LOOPS)
async def test_what_a_fast_peer_sends_waits_in_the_kernel_not_here(anyio_backend):
    size = 64 << 20
    async with socket_pair() as (ours, peer):
        io = socket_io(ours)
        waiting_here = 0  # the most the protocol held between two receives
        async with anyio.create_task_group() as group:
            group.start_soon(peer.send, b"q" * size)
            received = 0
            while received < size:
                received += len(await io.receive(1 << 18))
                await anyio.sleep(0.001)  # slower than the peer sends
                waiting = sum(map(len, ours._protocol.read_queue))  # type: ignore[attr-defined]
                waiting_here = max(waiting_here, waiting)
        assert received == size
        # at most what one wakeup of the loop reads in, as with anyio's own receive
        # (uvloop's libuv reads up to 32 x 256 KiB at once; asyncio 256 KiB)
        assert waiting_here <= 9 << 20


@pytest.mark.parametrize("anyio_backend", ASYNCIO_LOOPS)
async def test_a_reader_busy_elsewhere_holds_a_few_chunks_here_at_most(anyio_backend):
    """A connection waiting to send to a peer that reads nothing calls no receive while
    that peer may keep sending: the protocol stops taking data in after a few chunks."""
    size = 64 << 20
    async with socket_pair() as (ours, peer):
        io = socket_io(ours)
        await peer.send(b"request")
        first = await io.receive(1024)  # a small request: reading from here on...
        async with anyio.create_task_group() as group:
            group.start_soon(peer.send, b"r" * size)
            await anyio.sleep(0.5)  # ...while busy with something else
            queue = ours._protocol.read_queue  # type: ignore[attr-defined]
            assert len(queue) <= MAX_QUEUED_CHUNKS
            assert sum(map(len, queue)) <= MAX_QUEUED_CHUNKS * (256 << 10)
            assert first == b"request"
            received = 0
            while received < size:
                received += len(await io.receive(1 << 20))
        assert received == size
