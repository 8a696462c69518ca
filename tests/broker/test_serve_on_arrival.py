"""Sends served as their bytes arrive (socket_io's ``serve_received``, the connection's
``_serve_received``): while the read loop waits for bytes, the protocol's
``data_received`` hands them to the broker's send runs and writes the answers, and
whatever those do not take goes to the read loop as before. The answers, their order and
what is stored are those of the read loop's own serving."""

from __future__ import annotations

import contextlib
import os

import anyio
import pytest
from anyio.abc import SocketAttribute

from rocketmq_core.broker.app import Broker
from rocketmq_core.protocol.bodies import TopicConfig
from rocketmq_core.protocol.codec import FrameDecoder, encode_command
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.constants import PERM_RW
from rocketmq_core.remoting import socket_io
from rocketmq_core.testing.broker import broker_config

from .test_send_fast_path import read_frame, send, served

pytestmark = pytest.mark.anyio


@pytest.fixture(
    params=[pytest.param(("asyncio", {}), id="asyncio"), pytest.param(
        ("asyncio", {"use_uvloop": True}), id="uvloop"
    )]
)  # fmt: skip
def anyio_backend(request):
    """The direct socket path is asyncio's (plain and uvloop); trio reads through anyio."""
    return request.param


@pytest.fixture(params=[True, False], ids=["on-arrival", "read-loop"])
def on_arrival(request, monkeypatch) -> bool:
    monkeypatch.setattr(socket_io, "DIRECT", True)  # whatever the environment says
    monkeypatch.setattr(socket_io, "SERVE_ON_ARRIVAL", request.param)
    return request.param


@contextlib.asynccontextmanager
async def serving(tmp_path, plugin_host, socket_buffer: int | None = None):
    """A broker with the topic Orders, and a peer on a socket pair its Connection serves
    (with ``socket_buffer``: the broker's send buffer and the peer's receive buffer that
    small); yields (peer, connection, broker)."""
    async with Broker.serving(broker_config(tmp_path), host=plugin_host) as broker:
        broker.topics.update(TopicConfig("Orders", 4, 4, PERM_RW))
        async with served(broker, socket_buffer) as (peer, connection):
            yield peer, connection, broker


async def two_sends_answered(peer) -> RemotingCommand:
    """Two sends, each answered before the next; the third, not sent."""
    buffered = bytearray()
    for number in range(1, 3):
        request = send(body=b"%d" % number)
        request.opaque = number
        await peer.send(encode_command(request))
        await answers(peer, buffered, 1)
    late = send(body=b"late")
    late.opaque = 3
    return late


def numbered(requests: list[RemotingCommand]) -> bytes:
    for opaque, request in enumerate(requests, 1):
        request.opaque = opaque
    return b"".join(encode_command(request) for request in requests)


async def answers(peer, buffered: bytearray, count: int) -> list[RemotingCommand]:
    with anyio.fail_after(10):
        return [FrameDecoder().feed(await read_frame(peer, buffered))[0] for _ in range(count)]


def stored(broker) -> int:
    return sum(broker.store.max_offset("Orders", queue) for queue in range(4))


async def test_sends_one_at_a_time_are_answered_as_they_arrive(
    tmp_path, plugin_host, on_arrival, runs
):
    async with serving(tmp_path, plugin_host) as (peer, connection, broker):
        buffered = bytearray()
        codes = []
        for number in range(1, 9):
            request = send(body=b"%d" % number)
            request.opaque = number
            await peer.send(encode_command(request))
            (answer,) = await answers(peer, buffered, 1)
            codes.append((answer.opaque, answer.code))
        assert codes == [(number, ResponseCode.SUCCESS) for number in range(1, 9)]
        assert stored(broker) == 8
        # the queue's first put is the general path's; the other seven are runs
        assert runs.served == 7
        assert (
            (connection.served_on_arrival >= 7)
            if on_arrival
            else (connection.served_on_arrival == 0)
        )


async def test_sends_and_another_request_in_one_read_are_answered_in_order(
    tmp_path, plugin_host, on_arrival, runs
):
    """Sends served on arrival up to a request they do not take; that one and all after
    it go to the read loop, which answers them after the served ones."""
    async with serving(tmp_path, plugin_host) as (peer, connection, broker):
        buffered = bytearray()
        first = send(body=b"first")  # the queue's first put: the general path's
        first.opaque = 100
        await peer.send(encode_command(first))
        await answers(peer, buffered, 1)
        served_before = connection.served_on_arrival
        offsets = RemotingCommand(RequestCode.GET_MAX_OFFSET, ext_fields={
            "topic": "Orders", "queueId": "0"
        })  # fmt: skip
        requests = [send(body=b"1"), send(body=b"2"), offsets, send(body=b"3")]
        await peer.send(numbered(requests))
        got = await answers(peer, buffered, 4)
        assert [answer.opaque for answer in got] == [1, 2, 3, 4]
        assert [answer.code for answer in got] == [ResponseCode.SUCCESS] * 4
        # the offsets request was answered after the two sends before it were stored
        assert got[2].ext_fields["offset"] == "3"
        assert stored(broker) == 4
        assert connection.served_on_arrival == served_before + (1 if on_arrival else 0)
        assert runs.served == 2  # the send after the other request is decoded


async def test_a_send_split_across_reads_is_answered_once(tmp_path, plugin_host, on_arrival):
    async with serving(tmp_path, plugin_host) as (peer, connection, broker):
        buffered = bytearray()
        frame = numbered([send(body=b"x" * 3000)])
        for number in range(2):  # the queue's first put, then a run's
            await peer.send(frame[:100])
            await anyio.sleep(0.05)  # the first part alone reaches the broker
            await peer.send(frame[100:])
            (answer,) = await answers(peer, buffered, 1)
            assert (answer.opaque, answer.code) == (1, ResponseCode.SUCCESS)
            assert stored(broker) == number + 1
        with anyio.move_on_after(0.1):  # nothing more: each was answered once
            await peer.receive()
            pytest.fail("an answer too many")
        assert connection.served_on_arrival == 0  # a part is never served on its own
        lone = numbered([send(body=b"whole")])
        await peer.send(lone)
        (answer,) = await answers(peer, buffered, 1)
        assert answer.code == ResponseCode.SUCCESS
        assert connection.served_on_arrival == (1 if on_arrival else 0)


async def test_a_drain_waits_for_answers_a_slow_peer_has_not_read_yet(
    tmp_path, plugin_host, on_arrival
):
    """Answers the kernel could not take yet count as being sent (written on arrival or
    by a task): a drain waits for them, and every stored send is answered."""
    sends = 300
    async with serving(tmp_path, plugin_host, socket_buffer=4096) as (peer, connection, broker):
        first = send(body=b"first")  # the queue's first put: the general path's
        first.opaque = 0
        await peer.send(encode_command(first))
        # read once: from now on the peer's stream reads nothing unless asked (anyio)
        await answers(peer, bytearray(), 1)
        for number in range(1, sends + 1):  # the answers left unread
            request = send(body=b"%d" % number)
            request.opaque = number
            await peer.send(encode_command(request))
            with anyio.fail_after(10):
                while stored(broker) < number + 1:
                    await anyio.sleep(0.001)
            if not connection._io.writable:  # the kernel took part of its answers only
                break
        else:
            pytest.fail("the answers never filled the kernel's buffers")
        assert connection.unsent_bytes > 0
        connection.drain()
        await anyio.sleep(0.2)
        assert not connection.closed  # the answers wait for the peer: so does the drain
        got, buffered = [], bytearray()
        # until the drained connection closes (a reset: it leaves requests unread)
        with (
            anyio.fail_after(10),
            contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError),
        ):
            while True:
                got.append(FrameDecoder().feed(await read_frame(peer, buffered))[0])
        answered = stored(broker) - 1  # those read before the broker held back
        assert [answer.opaque for answer in got] == list(range(1, answered + 1))
        assert {answer.code for answer in got} == {ResponseCode.SUCCESS}
        assert broker.server.budget.unsent == 0  # what waited was given back once sent


async def test_bytes_arriving_once_a_drain_began_are_not_served(tmp_path, plugin_host, on_arrival):
    """A drain stops reading: a request that comes after it began is not taken, whether
    its bytes reach the protocol or the read loop."""
    async with serving(tmp_path, plugin_host) as (peer, connection, broker):
        late = await two_sends_answered(peer)
        # into the kernel's buffer with no turn of the event loop: then the drain
        os.write(peer.extra(SocketAttribute.raw_socket).fileno(), encode_command(late))
        connection.drain()
        with anyio.fail_after(10):
            while not connection.closed:
                await anyio.sleep(0.01)
        assert stored(broker) == 2


async def test_a_drain_stops_serving_bytes_that_reach_the_protocol_before_the_read_loop(
    tmp_path, plugin_host, on_arrival
):
    """Bytes the protocol gets after a drain began, while the read loop has not yet seen
    its cancellation (it still waits for bytes): not served."""
    async with serving(tmp_path, plugin_host) as (peer, connection, broker):
        late = await two_sends_answered(peer)
        connection.drain()
        connection._io._protocol.data_received(encode_command(late))  # no turn between
        with anyio.fail_after(10):
            while not connection.closed:
                await anyio.sleep(0.01)
        assert stored(broker) == 2
