"""Receive and send for a connection's byte stream, with less work per call on asyncio.

anyio's socket stream on asyncio pauses the transport after every ``receive`` and
resumes it before the next (two epoll changes per request when a client sends one at a
time), and every ``send`` ends with a cancel-shielded checkpoint (a cancel scope and one
more turn of the event loop). For a peer that sends one request at a time that is most
of what a request costs: the broker's CPU per request fell by a third when they went
(docs/perf.md). ``socket_io`` gives the connection an object that talks to that stream's
transport and protocol directly:

* ``receive`` keeps the transport reading between calls while requests come one at a
  time: after a long chunk (``STREAMING_CHUNK``), or when more waits in the protocol
  than it returns (the peer sends faster than it is read), it pauses the transport until
  the next call, and the protocol pauses it itself once ``MAX_QUEUED_CHUNKS`` wait
  unread (the connection busy elsewhere), so what waits in this process stays bounded
  and the kernel's buffers hold the rest, as with anyio's own ``receive``; the
  connection pauses it too (``pause_reading``) while it reads nothing on purpose (a peer
  that leaves its answers unread, a connection that is ending). When data was there
  already it yields once, so that a busy peer does not starve the rest of the event
  loop;
* ``send`` writes at once and waits only while the transport's buffer is over its limit;
* ``serve_received``, when the connection sets it, takes the bytes as they arrive (the
  protocol's ``data_received``) while ``receive`` waits: a broker serves sends there and
  writes their answers with ``write_now``, and no task wakes for a lone request (a
  fifth of its CPU). What it does not take is queued for ``receive`` as before.
  ROCKETMQ_SERVE_ON_ARRIVAL=0 leaves every byte to ``receive`` (to compare).

Any other stream (trio, TLS, QUIC, a test's memory stream) keeps anyio's calls, and so
does every stream with ROCKETMQ_DIRECT_SOCKET_IO=0 (to compare)."""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from anyio import BrokenResourceError, ClosedResourceError, EndOfStream
from anyio.abc import ByteStream

DIRECT = os.environ.get("ROCKETMQ_DIRECT_SOCKET_IO", "1") != "0"
SERVE_ON_ARRIVAL = os.environ.get("ROCKETMQ_SERVE_ON_ARRIVAL", "1") != "0"
# a chunk at least this long comes from a peer that streams (a batch, a pipeline, a big
# frame): the transport pauses until the next receive, as anyio's does after every one
STREAMING_CHUNK = 32 * 1024
# chunks (of up to 256 KiB) the protocol may hold unread before the transport pauses
MAX_QUEUED_CHUNKS = 8


class SocketIO(Protocol):
    async def receive(self, max_bytes: int) -> bytes: ...

    async def send(self, data: bytes) -> None: ...

    def pause_reading(self) -> None:
        """Read nothing from the peer until the next ``receive``."""


class StreamIO:
    """anyio's own calls: for every stream without a direct path."""

    def __init__(self, stream: ByteStream) -> None:
        self.receive = stream.receive
        self.send = stream.send

    def pause_reading(self) -> None:
        pass  # anyio reads only inside receive()


class AsyncioSocketIO:
    """The transport and protocol under anyio's asyncio socket stream, used directly."""

    def __init__(self, stream: Any, transport: Any, protocol: Any) -> None:
        self._stream = stream
        self._transport = transport
        self._protocol = protocol
        queue: deque[bytes] = protocol.read_queue
        self._queue = queue
        taken_in = protocol.data_received
        # (data) -> bytes taken: serves requests as they arrive, while ``receive`` waits
        self.serve_received: Callable[[bytes], int] | None = None
        self._waiting = False  # in ``receive``, for bytes to arrive

        def data_received(data: bytes) -> None:
            serve = self.serve_received
            if serve is not None and self._waiting and not queue:
                taken = serve(data)
                if taken == len(data):
                    return
                if taken:
                    data = data[taken:]
            taken_in(data)
            if len(queue) >= MAX_QUEUED_CHUNKS:  # nobody reads: the kernel holds the rest
                transport.pause_reading()

        # the cap holds whatever the connection is busy with (a send waiting for a peer
        # that reads nothing, a refusal, a drain); set_protocol makes uvloop, which keeps
        # the protocol's bound method, take the new one
        protocol.data_received = data_received
        transport.set_protocol(protocol)

    async def receive(self, max_bytes: int) -> bytes:
        protocol, queue, transport = self._protocol, self._queue, self._transport
        if queue:
            await asyncio.sleep(0)  # a turn for the others: this peer keeps us busy
        elif not (protocol.read_event.is_set() or protocol.is_at_eof):
            if transport.is_closing():
                raise self._ended()
            if not transport.is_reading():
                transport.resume_reading()
            self._waiting = True
            try:
                await protocol.read_event.wait()
            finally:
                self._waiting = False
        if not queue:
            raise self._ended()
        chunk = queue.popleft()
        if len(chunk) > max_bytes:
            queue.appendleft(chunk[max_bytes:])
            chunk = chunk[:max_bytes]
        if queue:
            self.pause_reading()  # behind the peer: the kernel holds the rest meanwhile
        else:
            protocol.read_event.clear()
            if len(chunk) >= STREAMING_CHUNK:
                self.pause_reading()  # a stream, not a request: read on at the next call
        return chunk

    def pause_reading(self) -> None:
        transport = self._transport
        if transport.is_reading() and not transport.is_closing():
            transport.pause_reading()

    async def send(self, data: bytes) -> None:
        if not self._protocol.write_event.is_set():  # over the buffer's limit: wait for room
            await self._protocol.write_event.wait()
        self.write_now(data)
        if not self._protocol.write_event.is_set():  # anyio's limit is 0: until the kernel took it
            await self.wait_written()

    @property
    def writable(self) -> bool:
        """Whether ``write_now`` may write: the transport takes more now."""
        return bool(self._protocol.write_event.is_set())

    def write_now(self, data: bytes) -> None:
        """``send`` from synchronous code, while ``writable``: the transport takes it, and
        what the kernel did not take yet waits in its buffer (``wait_written``)."""
        self._check_open()
        try:
            self._transport.write(data)
        except RuntimeError as exc:  # written to a transport that is closing
            raise BrokenResourceError from exc

    async def wait_written(self) -> None:
        """Until the kernel took what ``write_now`` left in the transport's buffer."""
        protocol = self._protocol
        if not protocol.write_event.is_set():
            await protocol.write_event.wait()
        self._check_open()

    def _check_open(self) -> None:
        error = self._closed_or_broken()
        if error is not None:
            raise error

    def _closed_or_broken(self) -> Exception | None:
        if self._stream._closed:
            return ClosedResourceError()
        if self._protocol.exception is not None:
            error = BrokenResourceError()
            error.__cause__ = self._protocol.exception
            return error
        return None

    def _ended(self) -> Exception:
        """Why nothing more can be read: closed here, broken, or the peer's end."""
        return self._closed_or_broken() or EndOfStream()


def socket_io(stream: ByteStream) -> SocketIO:
    """The direct path for anyio's asyncio socket stream (as anyio 4 builds it: a
    transport, and a protocol with ``read_queue``, ``read_event``, ``write_event``,
    ``exception`` and ``is_at_eof``); anyio's calls for any other stream."""
    transport = getattr(stream, "_transport", None)
    protocol = getattr(stream, "_protocol", None)
    if (
        DIRECT
        and type(stream).__module__ == "anyio._backends._asyncio"
        and all(  # asyncio's or uvloop's (which is no asyncio.Transport subclass)
            callable(getattr(transport, name, None))
            for name in (
                "write",
                "pause_reading",
                "resume_reading",
                "is_reading",
                "is_closing",
                "set_protocol",
            )
        )
        and isinstance(getattr(protocol, "read_queue", None), deque)
        and all(
            hasattr(protocol, name)
            for name in ("read_event", "write_event", "exception", "is_at_eof", "data_received")
        )
        and isinstance(getattr(stream, "_closed", None), bool)
    ):
        return AsyncioSocketIO(stream, transport, protocol)
    return StreamIO(stream)
