"""One QUIC connection carrying one bidirectional stream, seen as an anyio ByteStream.

aioquic's QuicConnection is sans-IO: it is told what arrived and when, and says what to
send and when it next wants to be woken (``get_timer``). A channel feeds it, turns its
events into stream data, and sends what it produces. Who reads the UDP socket differs:
a listener reads one socket for every connection and hands datagrams over
(``ServerChannel``); a client's channel reads its own socket from whichever of its
callers needs progress (``ClientChannel``), so no task runs behind the caller's back.

A RocketMQ remoting connection is one stream: the client opens stream 0, both sides
write frames on it, and closing it closes the QUIC connection.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from aioquic.quic import events
from aioquic.quic.connection import QuicConnection, QuicConnectionState
from aioquic.quic.packet import QuicErrorCode
from anyio.abc import ByteStream, SocketAttribute

log = logging.getLogger("rocketmq.transport.quic")

# send() waits while this much written data is not acknowledged yet
SEND_HIGH_WATER = 1024 * 1024
# aclose() waits this long for the peer to acknowledge what was written
CLOSE_LINGER = 2.0

Address = tuple[Any, ...]
SendDatagram = Callable[[bytes, Address], Awaitable[None]]


class DatagramOutbox:
    """Datagrams waiting for a UDP socket, sent by one task at a time.

    anyio refuses two concurrent sends on one socket; whichever task finds the outbox
    idle sends everything queued, including what others add meanwhile.
    """

    def __init__(self, send: SendDatagram) -> None:
        self._send = send
        self._queue: deque[tuple[bytes, Address]] = deque()
        self._sending = False

    async def send(self, datagrams: list[tuple[bytes, Address]]) -> None:
        self._queue.extend(datagrams)
        if self._sending:
            return
        self._sending = True
        try:
            # shielded: a cancelled caller must not strand other connections' datagrams
            with anyio.CancelScope(shield=True):
                while self._queue:
                    data, address = self._queue.popleft()
                    try:
                        await self._send(data, address)
                    except (OSError, anyio.BrokenResourceError) as exc:
                        # one unreachable peer must not block the others: QUIC resends
                        log.debug("datagram to %s dropped: %s", address, exc)
                    except anyio.ClosedResourceError:
                        self._queue.clear()
        finally:
            self._sending = False


class QuicChannel(ByteStream):
    """The stream of one QUIC connection; subclasses say how the socket is read."""

    def __init__(
        self,
        quic: QuicConnection,
        outbox: DatagramOutbox,
        *,
        stream_id: int,
        local_address: Address,
        remote_address: Address,
    ) -> None:
        self.quic = quic
        self.stream_id = stream_id
        self._outbox = outbox
        self._local_address = local_address
        self._remote_address = remote_address
        self._received: deque[bytes] = deque()
        self._peer_finished = False  # the peer sent FIN: no more data after the buffer
        self._finished = False  # we sent FIN
        self._stream_opened = False  # the peer has used the stream (servers only write then)
        self.handshake_complete = False
        self.terminated: str | None = None  # why the connection ended, once it has
        self.terminated_cleanly = False
        self._closed = False
        self._progress = anyio.Event()  # set whenever the connection moved on

    # --- what the connection says --------------------------------------------------------

    def handle_events(self, *, always_wake: bool = True) -> None:
        """Take every pending event of the QUIC connection, then wake whoever waits
        (after a datagram always: its acknowledgements may have freed a writer)."""
        taken = False
        while (event := self.quic.next_event()) is not None:
            taken = True
            if isinstance(event, events.StreamDataReceived):
                if event.stream_id != self.stream_id:
                    self._refuse_stream(event.stream_id)
                    continue
                self._stream_opened = True
                if event.data:
                    self._received.append(event.data)
                if event.end_stream:
                    self._peer_finished = True
            elif isinstance(event, events.StreamReset):
                if event.stream_id == self.stream_id:
                    self._end(f"the peer reset the stream (error {event.error_code})")
            elif isinstance(event, events.StopSendingReceived):
                if event.stream_id == self.stream_id:
                    self._end(f"the peer stopped reading (error {event.error_code})")
            elif isinstance(event, events.HandshakeCompleted):
                self.handshake_complete = True
            elif isinstance(event, events.ConnectionTerminated):
                self._end_as(event)
            else:
                self.connection_event(event)
        closing = self.quic._close_event
        if (
            closing is not None
            and self.terminated is None
            and self.quic._state is QuicConnectionState.DRAINING
        ):
            # the peer closed: aioquic reports it only once its draining period (3 probe
            # timeouts: seconds on a loaded machine) is over, while what is written
            # meanwhile goes nowhere; requests in flight fail now instead of timing out
            self._end_as(closing)
            taken = True
        if taken or always_wake:
            self.notify()

    def connection_event(self, event: events.QuicEvent) -> None:
        """Events a subclass cares for (connection ids for a listener's routing)."""

    def _refuse_stream(self, stream_id: int) -> None:
        # remoting uses one stream; a second one is the peer's mistake, not ours to serve
        with contextlib.suppress(ValueError):
            self.quic.stop_stream(stream_id, QuicErrorCode.NO_ERROR)

    def _end_as(self, closed: events.ConnectionTerminated) -> None:
        clean = closed.error_code == QuicErrorCode.NO_ERROR
        reason = closed.reason_phrase or f"error {closed.error_code:#x}"
        self._end("closed by the peer" if clean else reason, clean=clean)

    def _end(self, reason: str, *, clean: bool = False) -> None:
        if self.terminated is None:
            self.terminated = reason
            self.terminated_cleanly = clean

    def notify(self) -> None:
        self._progress.set()
        self._progress = anyio.Event()

    async def transmit(self) -> None:
        """Send whatever the connection has to send now."""
        datagrams = self.quic.datagrams_to_send(now=anyio.current_time())
        # building packets can issue connection ids: a listener must route them now
        self.handle_events(always_wake=False)
        if datagrams:
            await self._outbox.send(datagrams)

    async def wait_progress(self) -> None:
        """Wait until the connection moved on (data, acknowledgements, its end)."""
        raise NotImplementedError

    # --- ByteStream ----------------------------------------------------------------------

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while not self._received:
            if self._closed:
                raise anyio.ClosedResourceError
            if self._peer_finished or self.terminated_cleanly:
                raise anyio.EndOfStream
            if self.terminated is not None:
                raise anyio.BrokenResourceError(self.terminated)
            await self.wait_progress()
        chunk = self._received.popleft()
        if len(chunk) > max_bytes:
            self._received.appendleft(chunk[max_bytes:])
            chunk = chunk[:max_bytes]
        return chunk

    async def send(self, item: bytes) -> None:
        self._check_writable()
        while not (self._stream_opened or self.quic._is_client):
            # a server writes on stream 0 once the client opened it
            await self.wait_progress()
            self._check_writable()
        try:
            self.quic.send_stream_data(self.stream_id, item)
        except (RuntimeError, ValueError) as exc:  # the stream ended under us
            raise anyio.BrokenResourceError(str(exc)) from exc
        await self.transmit()
        while self._unacknowledged() > SEND_HIGH_WATER:
            self._check_writable()
            await self.wait_progress()

    async def send_eof(self) -> None:
        self._check_writable()
        self._finished = True
        try:
            self.quic.send_stream_data(self.stream_id, b"", end_stream=True)
        except (RuntimeError, ValueError) as exc:
            raise anyio.BrokenResourceError(str(exc)) from exc
        await self.transmit()

    def _check_writable(self) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        if self.terminated is not None:
            raise anyio.BrokenResourceError(self.terminated)
        if self._finished:
            raise anyio.ClosedResourceError("the stream was ended with send_eof()")

    def _unacknowledged(self) -> int:
        # aioquic keeps written data until the peer acknowledges it; that backlog is
        # what the writer must not outrun (it has no public accessor)
        stream = self.quic._streams.get(self.stream_id)
        return len(stream.sender._buffer) if stream is not None else 0

    def _all_acknowledged(self) -> bool:
        stream = self.quic._streams.get(self.stream_id)
        return stream is None or stream.sender.is_finished or not stream.sender._buffer

    async def aclose(self) -> None:
        """Linger (briefly) until the peer has what was written, then close the connection.

        Cancelled, it closes at once, like TCP's abortive close."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.terminated is None and (self._stream_opened or self.quic._is_client):
                with anyio.move_on_after(CLOSE_LINGER):
                    while self.terminated is None and not self._all_acknowledged():
                        await self.wait_progress()
        finally:
            with anyio.CancelScope(shield=True):
                await self._close_connection()

    async def _close_connection(self) -> None:
        if self.quic._state not in (
            QuicConnectionState.CLOSING,
            QuicConnectionState.DRAINING,
            QuicConnectionState.TERMINATED,
        ):
            self.quic.close(error_code=QuicErrorCode.NO_ERROR)
            try:
                with anyio.move_on_after(1):
                    await self.transmit()
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the peer is unreachable: nothing to tell it
        self._end("closed", clean=True)
        self.notify()

    @property
    def extra_attributes(self) -> dict[Any, Callable[[], Any]]:
        return {
            SocketAttribute.local_address: lambda: self._local_address,
            SocketAttribute.remote_address: lambda: self._remote_address,
        }


class ServerChannel(QuicChannel):
    """A connection accepted by a listener, which reads the socket and feeds it."""

    def __init__(self, *args: Any, on_connection_id: Callable[..., None], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._on_connection_id = on_connection_id
        self._timer_changed = anyio.Event()

    def connection_event(self, event: events.QuicEvent) -> None:
        if isinstance(event, events.ConnectionIdIssued):
            self._on_connection_id(event.connection_id, self)
        elif isinstance(event, events.ConnectionIdRetired):
            self._on_connection_id(event.connection_id, None)

    async def datagram_received(self, data: bytes, address: Address) -> None:
        self.quic.receive_datagram(data, address, now=anyio.current_time())
        self.handle_events()
        await self.transmit()

    async def transmit(self) -> None:
        await super().transmit()
        self._timer_changed.set()  # sending arms the loss-detection timer

    async def wait_progress(self) -> None:
        await self._progress.wait()

    async def run_timer(self) -> None:
        """Serve the connection's timer (loss detection, idle timeout) until it ends."""
        while self.quic._state is not QuicConnectionState.TERMINATED:
            deadline = self.quic.get_timer()
            self._timer_changed = anyio.Event()
            with anyio.move_on_at(deadline if deadline is not None else math.inf):
                await self._timer_changed.wait()
                continue
            self.quic.handle_timer(now=anyio.current_time())
            self.handle_events()
            await self.transmit()


class ClientChannel(QuicChannel):
    """A connection a client opened; it reads its own connected UDP socket."""

    def __init__(
        self,
        *args: Any,
        receive: Callable[[], Awaitable[bytes]],
        close_socket: Callable[[], Awaitable[None]],
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self._receive = receive
        self._close_socket = close_socket
        self._pumping = False
        self._pump_scope: anyio.CancelScope | None = None

    async def _close_connection(self) -> None:
        try:
            await super()._close_connection()
        finally:
            await self._close_socket()

    async def wait_progress(self) -> None:
        if self._pumping:  # another caller reads the socket; it wakes us
            await self._progress.wait()
            return
        self._pumping = True
        try:
            await self._pump()
        finally:
            self._pumping = False
            self.notify()  # a waiter may need to take over reading

    async def transmit(self) -> None:
        await super().transmit()
        if self._pump_scope is not None:  # sending armed a timer the reader must serve
            deadline = self.quic.get_timer()
            self._pump_scope.deadline = deadline if deadline is not None else math.inf

    async def _pump(self) -> None:
        deadline = self.quic.get_timer()
        datagram = None
        with anyio.CancelScope(deadline=deadline if deadline is not None else math.inf) as scope:
            self._pump_scope = scope
            try:
                datagram = await self._receive()
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                # an ICMP "port unreachable" (nobody listens there), or closed meanwhile
                self._end(f"{exc}" or "the socket was closed")
                return
            finally:
                self._pump_scope = None
        now = anyio.current_time()
        if datagram is not None:
            self.quic.receive_datagram(datagram, self._remote_address, now=now)
        else:
            deadline = self.quic.get_timer()
            if deadline is not None and now >= deadline:
                self.quic.handle_timer(now=now)
        self.handle_events()
        await self.transmit()
