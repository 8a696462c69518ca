"""One remoting connection, used the same way by servers and clients.

Requests flow both ways on a connection (a broker calls producers back), so both
sides run the same loop: read a chunk, decode every frame in it, complete the
pending invocations its responses answer, hand its requests to the processor
table, and queue the answers. A single writer task sends everything queued in one
``send``: the responses ready in one loop turn leave in one write. A long chunk
takes several turns of ``FRAMES_PER_TURN`` frames, so that its first answers are
on their way while the rest are worked out; likewise a burst of our own requests
leaves a turn's worth at a time as it is encoded (``_queue_request``). Which response
answers which of our invocations, and which have run out of time, is PendingRequests'
business (correlation.py); here are only the waiting and one timer per connection.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Generator, Iterable
from functools import partial
from inspect import isawaitable
from typing import Any

import anyio
import sniffio
from anyio.abc import ByteStream, SocketAttribute, TaskGroup, TaskStatus

from ..errors import (
    ConnectionClosedError,
    ProtocolError,
    RemoteProtocolError,
    RemotingTimeoutError,
    RequestRefused,
)
from ..protocol.codec import MAX_FRAME_LENGTH, FrameDecoder, decode_json_header, encode_into
from ..protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE, RequestCode, ResponseCode
from ..protocol.command import OpaqueSequence, RemotingCommand
from ..rate_limited_log import RateLimitedLog
from . import socket_io as socket_io_module
from .bad_requests import BadRequestLog
from .budgets import MemoryBudget
from .correlation import PendingRequests
from .processor import ProcessorRoute, ProcessorTable, RequestContext, RpcHook
from .socket_io import AsyncioSocketIO, socket_io
from .transport import format_address

log = logging.getLogger("rocketmq.remoting")
# bad frames and processor failures, logged at a bounded rate (one process, one budget)
BAD_REQUESTS = BadRequestLog(log)

RECEIVE_SIZE = 256 * 1024
# Our own requests wait while this much is queued for the peer.
WRITE_HIGH_WATER = 8 * 1024 * 1024
# A client's read loop never stops reading (two peers that both stopped would wait on
# each other forever); a peer that leaves this much unread is disconnected instead.
# A server's connections pause reading first, at their budget's write high water.
UNREAD_LIMIT = 64 * 1024 * 1024
BUSY_REMARK = "[OVERLOAD]system busy, start flow control for a while"
UNREAD_REMARK = (
    "[OVERLOAD]system busy: too many of this client's responses are still unread"
    " (over {limit} bytes); read them, then retry"
)
_unread_log = RateLimitedLog(log)
_incomplete_log = RateLimitedLog(log)
# A long chunk is handled this many frames per loop turn, the writer sending their
# answers in between: a peer with 64 in flight works on the first half while we
# handle the second, instead of both sides taking turns (measured: 10.5k -> 17-23k
# sends/s from the SDK on two cores; 16 and fewer cost more in writes than they gain).
FRAMES_PER_TURN = 32
# The same for the requests of a burst (the tasks one read of answers woke, each sending
# again): they reached the writer only once the whole burst was encoded, and the two
# sides took turns. Once a turn's worth is queued, the sender writes it itself, and the
# peer works on it while the rest is encoded (the SDK's send at 64 in flight: 26-31k ->
# 35-38k msg/s with 1 KiB bodies, 27-30k -> 39k with 100 bytes, on two cores; 256 in
# flight, whose answers come in several reads anyway, unchanged). A turn's worth is
# counted in parts of ``_out``, free to count: 32 frames with a body (two parts each),
# 64 without; or in bytes, so that a request of 32 KiB or more leaves at once.
EARLY_WRITE_PARTS = 2 * FRAMES_PER_TURN
EARLY_WRITE_BYTES = 32 * 1024
# seconds the requests before a malformed frame have to be answered before it is refused
# and the stream closed (a suspended pull is not waited for)
REFUSAL_WAIT = 1.0
# A request expires at most this late (s): one timer per connection sweeps the expired
# requests, never sooner than this after its last sweep (a timer per request cost a
# tenth of a send's time at 30k sends/s).
SWEEP_GAP = 0.01
# event-loop timers fire to the millisecond (uvloop rounds): a deadline this close is due
_TIMER_RESOLUTION = 0.001


class _EventWaiter:
    """What an invocation waits on where asyncio's future is not at hand (trio): an
    event and a slot, with the part of asyncio.Future's interface the connection uses."""

    __slots__ = ("_error", "_event", "_response")

    def __init__(self) -> None:
        self._event = anyio.Event()
        self._response: RemotingCommand | None = None
        self._error: BaseException | None = None

    def done(self) -> bool:
        return self._event.is_set()

    def set_result(self, response: RemotingCommand | None) -> None:
        self._response = response
        self._event.set()

    def set_exception(self, error: BaseException) -> None:
        self._error = error
        self._event.set()

    def __await__(self) -> Generator[Any, None, RemotingCommand | None]:
        yield from self._event.wait().__await__()
        if self._error is not None:
            raise self._error
        return self._response


class LaterAnswer:
    """A request its processor answers after returning: a processor returns this (from
    ``Connection.answer_later``) and calls ``answer`` once the response is known, from
    any callback on the connection's event loop. No task waits for it (a SYNC_MASTER send
    waiting for a slave's ack costs no task). A drain waits for it like for a task."""

    __slots__ = ("_connection", "answered", "observer", "request")

    def __init__(self, connection: Connection, request: RemotingCommand) -> None:
        self._connection = connection
        self.request = request
        self.answered = False
        # called with the response just before it is queued (the request timing)
        self.observer: Callable[[RemotingCommand | bytes], object] | None = None

    def answer(self, response: RemotingCommand | bytes) -> None:
        """Queue ``response`` (a command, or a finished frame where the connection
        ``takes_encoded_answers``); only the first call counts."""
        if self.answered:
            return
        self.answered = True
        if self.observer is not None:
            self.observer(response)
        self._connection._answer_later_done(self.request, response)

    def withdraw(self) -> None:
        """Nothing will answer through this after all (its processor raised before
        anything could call ``answer``; the error is the answer): no longer in flight."""
        if self.answered:
            return
        self.answered = True
        self._connection._no_longer_in_flight()


# what a broken stream raises on send (a TLS stream raises EndOfStream once the peer has
# closed the session)
_BROKEN_STREAM = (
    anyio.EndOfStream,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    OSError,
)


class Connection:
    """A framed, multiplexed remoting connection over any byte stream."""

    def __init__(
        self,
        stream: ByteStream,
        processors: ProcessorTable | None = None,
        *,
        hooks: Iterable[RpcHook] = (),
        invoke_hooks: Iterable[RpcHook] = (),
        opaques: OpaqueSequence | None = None,
        max_frame_length: int = MAX_FRAME_LENGTH,
        peer_address: str | None = None,
        budget: MemoryBudget | None = None,
        before_send: Callable[[RemotingCommand], object] | None = None,
    ) -> None:
        self._stream = stream
        self._io = socket_io(stream)  # receive and send, direct on asyncio's sockets
        # what a burst of our requests may be written to at once (_queue_request)
        self._direct_io = self._io if type(self._io) is AsyncioSocketIO else None
        self._processors = processors
        # a server's hooks run around the requests it receives (an ACL check), a client's
        # around those it sends: neither around the other direction (Java's server does not
        # run its hooks on a NOTIFY it sends to a client)
        self._hooks = tuple(hooks)
        self._invoke_hooks = tuple(invoke_hooks)
        # a hook without ``sees_responses = False`` must see each answer as a command
        self._answers_unseen = not any(getattr(h, "sees_responses", True) for h in self._hooks)
        # runs on each request of ours once its fields and body are final (signing)
        self._before_send = before_send
        self._opaques = opaques or OpaqueSequence()
        self._max_frame_length = max_frame_length
        # opaque -> what its invocation waits on: a bare future on asyncio (a fraction of
        # anyio's Event and cancel scope; the client's per-request cost bounds its rate)
        self._pending: PendingRequests[Any] = PendingRequests()
        loop = _running_asyncio_loop()
        self._new_waiter: Callable[[], Any] = (
            loop.create_future if loop is not None else _EventWaiter
        )
        self._clock: Callable[[], float] = loop.time if loop is not None else anyio.current_time
        self._timer_running = False  # started by the first invocation
        self._timer_moved = anyio.Event()  # set: a deadline earlier than the timer's came
        self._wake_timer_before = math.inf  # a deadline before this moves the timer
        self._out: list[bytes] = []
        self._out_bytes = 0  # queued, not yet taken by the writer
        self._sending_bytes = 0  # taken by the writer, not yet sent
        # a server's connections charge the server-wide budget and pause reading
        self._budget = budget
        self._max_unsent = budget.limits.max_unsent_per_connection if budget else UNREAD_LIMIT
        self._writable: anyio.Event | None = None  # set: unsent bytes are at low water
        self._incomplete = 0  # bytes of an unfinished frame charged to the budget
        self.incomplete_since: float | None = None  # when that frame last made progress
        self.last_active = time.monotonic()  # last read or completed write
        self.held_at_close = 0  # bytes it still held when it closed (to trim after)
        self.served_on_arrival = 0  # reads whose requests were answered as they came
        self.closing = False  # a close was asked for (a sweeper asks once)
        self._wakeup = anyio.Event()  # set: the writer has something to send
        self._flushed = anyio.Event()  # set: the writer has sent everything queued
        self._flushed.set()
        self._sending = False
        self._inflight = 0  # requests handed to tasks, not answered yet
        self._idle = anyio.Event()
        self._done = anyio.Event()
        self._closed = False
        self._draining = False
        self._receiving = False  # the read loop waits for bytes (a drain may cancel that)
        self._read_scope = anyio.CancelScope()
        self._task_group: TaskGroup | None = None
        self._close_callbacks: list[Callable[[Connection], Any]] = []
        self.peer_address = peer_address or _address(stream, SocketAttribute.remote_address)
        self.local_address = _address(stream, SocketAttribute.local_address)
        self.context = RequestContext(self, self.peer_address, self.local_address)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Connection {self.local_address} <-> {self.peer_address} {state}>"

    @property
    def closed(self) -> bool:
        return self._closed

    def on_close(self, callback: Callable[[Connection], Any]) -> None:
        """Call ``callback(connection)`` once the connection has closed."""
        if self._closed:
            callback(self)
        else:
            self._close_callbacks.append(callback)

    # --- running -------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[Connection] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve the connection until the peer leaves, ``aclose`` or a drain ends it."""
        try:
            async with anyio.create_task_group() as task_group:
                self._task_group = task_group
                task_group.start_soon(self._write_loop)
                task_status.started(self)
                with self._read_scope:
                    try:
                        await self._read_loop(task_group)
                    finally:
                        if isinstance(self._io, AsyncioSocketIO):
                            self._io.serve_received = None  # no reading: no serving
                self._io.pause_reading()  # nothing more is read: the kernel holds what comes
                if self._draining:
                    await self._wait_until_answered()
                task_group.cancel_scope.cancel()
        finally:
            self._closed = True
            self._release_budget()
            self._fail_pending(ConnectionClosedError(f"connection to {self.peer_address} closed"))
            self._flushed.set()
            with anyio.CancelScope(shield=True):
                await self._stream.aclose()
            self._done.set()
            for callback in self._close_callbacks:
                try:
                    callback(self)
                except Exception:
                    log.exception("close callback %r failed", callback)

    def _release_budget(self) -> None:
        held = self._out_bytes + self._sending_bytes + self._incomplete
        self.held_at_close = max(self.held_at_close, held)
        budget = self._budget
        if budget is not None:
            budget.unsent -= self._out_bytes + self._sending_bytes
            budget.incomplete -= self._incomplete
        self._out.clear()
        self._out_bytes = self._sending_bytes = self._incomplete = 0
        if self._writable is not None:
            self._writable.set()

    def abort(self) -> None:
        """Close now, from synchronous code: the bytes it holds leave the budget at once."""
        self._closed = True
        self._release_budget()
        self._read_scope.cancel()
        if self._task_group is not None:
            self._task_group.cancel_scope.cancel()

    @property
    def max_frame_length(self) -> int:
        """The longest frame this connection reads."""
        return self._max_frame_length

    def frame_checks(self) -> tuple[Any, ...]:
        """Each hook's ``frame_check`` of this connection now (RpcHook): what a FrameServer
        checks the frames it answers with, those hooks not seeing them."""
        context = self.context
        return tuple(
            hook.frame_check(context)  # type: ignore[attr-defined]  # where each has one
            for hook in self._hooks
        )

    @property
    def takes_encoded_answers(self) -> bool:
        """Whether a processor may answer with a finished frame (bytes) instead of a
        command: only where no RPC hook must see the response (``after_response``)."""
        return self._answers_unseen

    @property
    def waiting_requests(self) -> int:
        """Our invocations on this connection still waiting for their response."""
        return len(self._pending)

    @property
    def unknown_responses(self) -> int:
        """Responses that answered none of our waiting invocations (late or stray)."""
        return self._pending.unknown_responses

    @property
    def unsent_bytes(self) -> int:
        """Bytes of responses and requests queued for the peer, not yet sent."""
        return self._out_bytes + self._sending_bytes

    def drain(self) -> None:
        """Stop reading; ``run`` returns once every request read so far is answered (a
        read loop busy with what it read, sending answers for one, first finishes that).

        Bound the wait with a cancel scope around ``run`` (or call ``aclose``).
        """
        self._draining = True
        if self._receiving:  # else the read loop stops once done with what it read
            self._read_scope.cancel()

    async def aclose(self) -> None:
        """Close now: in-flight requests are cancelled and waiting invocations fail."""
        self.closing = True
        self._read_scope.cancel()
        if self._task_group is not None:
            self._task_group.cancel_scope.cancel()
            # Not shielded: a processor of this very connection may be the caller,
            # and its task must end before the connection can.
            await self._done.wait()
        elif not self._closed:
            self._closed = True
            await self._stream.aclose()

    async def _read_loop(self, task_group: TaskGroup) -> None:
        decoder = FrameDecoder(self._max_frame_length)
        server = self._processors.frame_server if self._processors is not None else None
        # a hook sees every request, unless the frame server checks frames for it
        if (
            server is not None
            and self._answers_unseen
            and all(hasattr(hook, "frame_check") for hook in self._hooks)
        ):
            decoder.serve_first = partial(server, self)
            if isinstance(self._io, AsyncioSocketIO) and socket_io_module.SERVE_ON_ARRIVAL:
                self._io.serve_received = partial(self._serve_received, decoder, server, self._io)
        receive = self._io.receive
        budget = self._budget
        high_water = budget.limits.write_high_water if budget is not None else None
        while True:
            if high_water is not None and self._out_bytes + self._sending_bytes > high_water:
                await self._hold_reading()
            if self._draining:  # everything read so far is answered, nothing more read
                return
            self._receiving = True
            try:
                chunk = await receive(RECEIVE_SIZE)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return
            except OSError as exc:
                log.debug("read from %s failed: %s", self.peer_address, exc)
                return
            finally:
                self._receiving = False
            if self._draining or self._read_scope.cancel_called:  # it came as they began
                return
            self.last_active = time.monotonic()
            try:
                commands = decoder.feed(chunk)
            except RemoteProtocolError as exc:
                await self._refuse_stream(exc)
                return
            held = decoder.buffered
            if (
                budget is not None
                and (held or self._incomplete)
                and not self._hold_incomplete(held, bool(commands) or decoder.served)
            ):
                return
            for index, command in enumerate(commands, 1):
                if command.flag & FLAG_RESPONSE:
                    self._complete(command)
                else:
                    self._dispatch(command, task_group)
                if index % FRAMES_PER_TURN == 0 and index < len(commands):
                    await self._let_writer_send()
                    if high_water is not None:
                        if self._inflight >= FRAMES_PER_TURN:
                            await anyio.lowlevel.checkpoint()  # their answers count too
                        if self._out_bytes + self._sending_bytes > high_water:
                            await self._hold_reading()
            writer_idle = not self._sending and not self._wakeup.is_set()
            if self._out and writer_idle and not await self._send_from_reader():
                return
            if self._out:
                self._wakeup.set()
                if self._out_bytes + self._sending_bytes > self._max_unsent:
                    _unread_log.warning(
                        "closing connection from %s: it left %d bytes of responses unread",
                        self.peer_address,
                        self._out_bytes + self._sending_bytes,
                    )
                    return
            if decoder.failure is not None:  # good frames came first: refused after them
                await self._refuse_stream(decoder.failure)
                return

    def _serve_received(
        self, decoder: FrameDecoder, server: Any, io: AsyncioSocketIO, data: bytes
    ) -> int:
        """Requests the frame server answers, served as they arrive (the protocol's
        ``data_received``) while the read loop waits for bytes and nothing is pending:
        no task wakes for them, and their answers are written at once. Returns how many
        bytes of ``data`` it took; the read loop reads the rest."""
        if (
            decoder.buffered
            or decoder.failure is not None
            or self._out
            or self._sending
            or self._closed
            or self._draining  # nothing new once a drain or a close began
            or self._read_scope.cancel_called
            or not io.writable
        ):
            return 0
        self.last_active = time.monotonic()
        try:
            taken: int = server(self, data, 0)
        except Exception:
            log.exception("serving requests from %s failed", self.peer_address)
            # the answers of what was stored before it go to the transport first: what
            # the kernel takes of them at once reaches the peer
            self._write_queued_now(io)
            self.abort()
            return len(data)
        if taken:
            self.served_on_arrival += 1
        self._write_queued_now(io)
        return taken

    def _write_queued_now(self, io: AsyncioSocketIO) -> None:
        """Write what is queued from synchronous code, as ``_send_queued`` would, while
        nothing is being sent and ``io`` is writable: bytes the kernel did not take yet
        count as being sent until it has (a drain waits for them)."""
        if not self._out or self._closed:
            return
        try:
            io.write_now(self._take_queued())
        except _BROKEN_STREAM as exc:
            self._write_failed(exc)
            self._read_scope.cancel()
        else:
            if not io.writable:  # a peer that reads slowly: the rest waits in the buffer
                self._sending = True
                assert self._task_group is not None  # running: both callers see to it
                self._task_group.start_soon(self._finish_write, io)
                return
            self.last_active = time.monotonic()
        self._sent()

    async def _finish_write(self, io: AsyncioSocketIO) -> None:
        """The end of ``_write_queued_now``'s write, once the kernel took it all."""
        try:
            await io.wait_written()
            self.last_active = time.monotonic()
        except _BROKEN_STREAM as exc:
            self._write_failed(exc)
            self._read_scope.cancel()
        finally:
            self._sent()
            self._sending = False
            if self._out:
                self._wakeup.set()  # queued meanwhile: the writer's turn

    async def _hold_reading(self) -> None:
        """Read nothing more from a peer that does not read its answers (Netty's channel
        turning unwritable stops auto-read in Java), until they drain to low water."""
        assert self._budget is not None  # reading is held only under a budget's high water
        self._io.pause_reading()
        low_water = self._budget.limits.write_low_water
        while self._out_bytes + self._sending_bytes > low_water and not self._closed:
            self._writable = anyio.Event()
            self._wakeup.set()
            await self._writable.wait()
        self._writable = None

    def _hold_incomplete(self, held: int, progressed: bool) -> bool:
        """Charge an unfinished frame's bytes to the budget; False: over it, close."""
        if self._closed:  # its bytes left the budget at the close
            return False
        budget = self._budget
        assert budget is not None  # the read loop calls this only under a budget
        budget.incomplete += held - self._incomplete
        self._incomplete = held
        if not held:
            self.incomplete_since = None
            return True
        if progressed or self.incomplete_since is None:
            self.incomplete_since = self.last_active
        limit = budget.limits.max_incomplete_total
        if budget.incomplete > limit:
            _incomplete_log.warning(
                "closing connection from %s: unfinished frames of all clients hold %d bytes,"
                " over the limit of %d (serverMaxIncompleteFrameBytes)",
                self.peer_address,
                budget.incomplete,
                limit,
            )
            # its bytes leave the budget now: the other connections' next checks must not
            # count them (they run before this one's close has finished)
            self.abort()
            return False
        return True

    async def _let_writer_send(self) -> None:
        """Give the writer a turn with what is queued (either task may resume first;
        then we yield again, a few times at most: a writer held up by a slow peer
        is not waited for)."""
        for _ in range(3):
            if not self._out or self._closed:
                return
            self._wakeup.set()
            await anyio.lowlevel.checkpoint()

    async def _send_from_reader(self) -> bool:
        """Send what is queued from the read loop itself, the writer being idle: one task
        switch less per answer when a client sends one request at a time. False: the
        stream is broken (the connection is closed)."""
        self._sending = True
        try:
            await self._send_queued()
        except _BROKEN_STREAM as exc:
            self._write_failed(exc)
            return False
        finally:
            self._sending = False
        self._flushed.set()
        return True

    async def _write_loop(self) -> None:
        try:
            while True:
                await self._wakeup.wait()
                self._wakeup = anyio.Event()
                if self._sending:  # the read loop is sending: it wakes us if more is queued
                    continue
                self._sending = True
                await self._send_queued()
                self._sending = False
                self._flushed.set()
        except _BROKEN_STREAM as exc:
            self._write_failed(exc)
            self._read_scope.cancel()

    async def _send_queued(self) -> None:
        """Send until nothing is queued, all that is queued at once each time (whoever
        calls holds ``_sending``)."""
        send = self._io.send
        while self._out:
            await send(self._take_queued())
            self.last_active = time.monotonic()
            self._sent()

    def _take_queued(self) -> bytes:
        """Everything queued, as one write; its bytes count as being sent from now on."""
        data = b"".join(self._out) if len(self._out) > 1 else self._out[0]
        self._out.clear()
        self._sending_bytes = self._out_bytes
        self._out_bytes = 0
        return data

    def _sent(self) -> None:
        """What was being sent is the kernel's (or lost with the stream): its bytes leave
        the budget, and waiting senders and a read loop holding back reads may go on."""
        if self._budget is not None:
            self._budget.unsent -= self._sending_bytes
        self._sending_bytes = 0
        if self._out_bytes <= WRITE_HIGH_WATER:
            self._flushed.set()  # room again for waiting senders
        if (
            self._writable is not None
            and self._budget is not None
            and self._out_bytes <= self._budget.limits.write_low_water
        ):
            self._writable.set()

    def _write_failed(self, exc: BaseException) -> None:
        log.debug("write to %s failed: %r", self.peer_address, exc)
        self._closed = True
        self._flushed.set()

    async def _wait_flushed(self) -> None:
        """Wait until the writer has sent everything queued so far."""
        if self._flushed.is_set():
            self._flushed = anyio.Event()
        self._wakeup.set()
        await self._flushed.wait()

    async def _refuse_stream(self, error: RemoteProtocolError) -> None:
        """Answer what came before the offending frame (``REFUSAL_WAIT`` s at most), then
        the offending request when we know its id, then give up the stream."""
        BAD_REQUESTS.bad_stream(self.peer_address, error)
        with anyio.move_on_after(REFUSAL_WAIT):  # requests still being processed
            await self._wait_until_processed()
        if error.opaque is not None and not self._closed:
            response = RemotingCommand(
                error.response_code, opaque=error.opaque, flag=FLAG_RESPONSE, remark=str(error)
            )
            self._queue(response)
        # the writer sends it with anything queued before; then the stream closes
        with anyio.move_on_after(1):
            await self._wait_until_sent()

    # --- requests from the peer ----------------------------------------------------------

    def _dispatch(self, request: RemotingCommand, task_group: TaskGroup) -> None:
        route = self._processors.lookup(request.code) if self._processors else None
        if route is None:
            self._respond(request, not_supported(request))
            return
        ctx = self.context
        try:
            for hook in self._hooks:
                refusal = hook.before_request(ctx, request)
                if refusal is not None:
                    self._respond(request, refusal)
                    return
            if route.full:
                self._respond(request, request.response(ResponseCode.SYSTEM_BUSY, BUSY_REMARK))
                return
            result = route.processor(ctx, request)
        except Exception as exc:
            self._respond(request, error_response(request, exc, route, self.peer_address))
            return
        if result is None or isinstance(result, RemotingCommand):
            self._respond(request, result)
        elif type(result) is bytes:  # a finished response frame (takes_encoded_answers)
            self._respond_encoded(request, result)
        elif type(result) is LaterAnswer:  # answered by a callback (counted when made)
            pass
        elif isawaitable(result):
            route.active += 1
            self._inflight += 1
            task_group.start_soon(self._finish, request, route, result)
        else:
            self._respond(
                request,
                error_response(
                    request,
                    TypeError(f"processor returned {type(result).__name__}"),
                    route,
                    self.peer_address,
                ),
            )

    async def _finish(self, request: RemotingCommand, route: ProcessorRoute, pending: Any) -> None:
        try:
            response = await within_limit(route, pending)
        except Exception as exc:
            response = error_response(request, exc, route, self.peer_address)
        finally:
            route.active -= 1
            self._inflight -= 1
            if self._inflight == 0:
                self._idle.set()
        if type(response) is bytes:  # a finished response frame (takes_encoded_answers)
            self._respond_encoded(request, response)
        else:
            self._respond(request, response)
        self._wakeup.set()

    def answer_later(self, request: RemotingCommand) -> LaterAnswer:
        """For a processor that answers ``request`` from a callback: return what this
        gives, call its ``answer`` later. Counted as in flight until answered (or
        withdrawn, when the processor raises after all)."""
        self._inflight += 1
        return LaterAnswer(self, request)

    def _no_longer_in_flight(self) -> None:
        """A later answer settled: answered, or withdrawn."""
        self._inflight -= 1
        if self._inflight == 0:
            self._idle.set()

    def _answer_later_done(
        self, request: RemotingCommand, response: RemotingCommand | bytes
    ) -> None:
        self._no_longer_in_flight()
        if isinstance(response, bytes):
            self._respond_encoded(request, response)
        else:
            self._respond(request, response)
        if self._out:
            self._wakeup.set()

    def _respond(self, request: RemotingCommand, response: RemotingCommand | None) -> None:
        if response is None or request.flag & FLAG_ONEWAY:
            return  # Java suppresses every answer to a oneway request, errors included
        budget = self._budget
        if budget is not None and response.body:
            response = self._within_budget(budget, request, response)
        if self._closed:
            return
        response.opaque = request.opaque
        response.flag |= FLAG_RESPONSE
        response.serialize_type = request.serialize_type
        try:
            for hook in self._hooks:
                hook.after_response(self.context, request, response)
            size = encode_into(response, self._out, self._max_frame_length)
        except Exception as exc:
            log.error("cannot send the response to %r: %s", request, exc)
            remark = f"response not sendable: {type(exc).__name__}"
            refusal = request.response(ResponseCode.SYSTEM_ERROR, remark)
            size = encode_into(refusal, self._out, self._max_frame_length)
        self._out_bytes += size
        if budget is not None:
            budget.unsent += size

    def queue_answers(self, frames: bytes) -> None:
        """Whole answer frames a FrameServer made, queued as ``_respond_encoded`` queues
        one."""
        if self._closed:
            return
        self._out.append(frames)
        size = len(frames)
        self._out_bytes += size
        if self._budget is not None:
            self._budget.unsent += size

    def dispatch_frame(self, frame: bytes | bytearray) -> None:
        """One whole request frame a FrameServer gives back, dispatched now, before the
        frames after it, as the read loop dispatches each request."""
        (request,) = FrameDecoder(self._max_frame_length).feed(frame)
        assert self._task_group is not None  # a FrameServer runs inside the read loop
        self._dispatch(request, self._task_group)

    def answer_failed(self, header: bytes | bytearray, error: Exception) -> None:
        """A frame a FrameServer took whose processing raised ``error``: answered as
        ``_dispatch`` answers a processor's exception (``header``: its JSON header)."""
        request = decode_json_header(header)
        route = self._processors.lookup(request.code) if self._processors is not None else None
        if route is not None:
            self._respond(request, error_response(request, error, route, self.peer_address))

    def _respond_encoded(self, request: RemotingCommand, frame: bytes) -> None:
        """Queue a response a processor encoded itself, as ``_respond`` would queue it."""
        if not request.flag & FLAG_ONEWAY:
            self.queue_answers(frame)

    def _within_budget(
        self, budget: MemoryBudget, request: RemotingCommand, response: RemotingCommand
    ) -> RemotingCommand:
        """``response``, or SYSTEM_BUSY when its body would take this connection or the
        server past its budget of unsent bytes (a client that does not read its pulls)."""
        size = len(response.body)
        limits = budget.limits
        if self._out_bytes + self._sending_bytes + size > limits.max_unsent_per_connection:
            limit = limits.max_unsent_per_connection
        elif budget.unsent + size > limits.max_unsent_total:
            if budget.reclaim(self) and budget.unsent + size <= limits.max_unsent_total:
                return response  # the server closed a client that hoarded answers
            limit = limits.max_unsent_total
        else:
            return response
        _unread_log.warning(
            "answering SYSTEM_BUSY to %s: %d bytes of its responses are unsent, %d for all"
            " clients (limits %d and %d)",
            self.peer_address,
            self._out_bytes + self._sending_bytes,
            budget.unsent,
            limits.max_unsent_per_connection,
            limits.max_unsent_total,
        )
        return request.response(ResponseCode.SYSTEM_BUSY, UNREAD_REMARK.format(limit=limit))

    def _queue(self, command: RemotingCommand) -> None:
        """Encode ``command`` for the writer, counting its bytes (the budget's charge is
        refunded by the writer once sent, or by ``_release_budget`` at close)."""
        if self._closed:  # nothing would refund the charge: the close already did
            raise ConnectionClosedError(f"connection to {self.peer_address} is closed")
        size = encode_into(command, self._out, self._max_frame_length)
        self._out_bytes += size
        if self._budget is not None:
            self._budget.unsent += size

    async def _wait_until_answered(self) -> None:
        await self._wait_until_processed()
        await self._wait_until_sent()

    async def _wait_until_processed(self) -> None:
        """Until no request read is still being processed (its answer queued)."""
        while self._inflight:
            self._idle = anyio.Event()
            await self._idle.wait()

    async def _wait_until_sent(self) -> None:
        """Until everything queued has been sent (or the connection is closed)."""
        while (self._out or self._sending) and not self._closed:
            await self._wait_flushed()

    # --- requests to the peer ------------------------------------------------------------

    async def invoke(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send ``request`` and return its response; RemotingTimeoutError after ``timeout`` s."""
        if self._closed:
            raise ConnectionClosedError(f"connection to {self.peer_address} is closed")
        opaque = request.opaque = self._opaques.next()
        request.flag &= ~(FLAG_RESPONSE | FLAG_ONEWAY)
        for hook in self._invoke_hooks:
            hook.before_request(self.context, request)
        if self._before_send is not None:
            self._before_send(request)
        if self._out_bytes > WRITE_HIGH_WATER or self._closed:
            with anyio.move_on_after(timeout):
                await self._wait_writable()
            if self._out_bytes > WRITE_HIGH_WATER:
                raise RemotingTimeoutError(
                    f"{_request_name(request.code)} to {self.peer_address} not sent within"
                    f" {timeout:g} s: the peer is not reading"
                )
        # this coroutine waits itself: a coroutine more per request costs request rate
        waiter = self._new_waiter()
        deadline = self._clock() + timeout
        self._pending.add(opaque, waiter, deadline)
        try:
            if deadline < self._wake_timer_before:
                self._move_timer()
            self._queue_request(request)
            response: RemotingCommand | None = await waiter  # None: expired
        except BaseException:  # cancelled or not sent (an answer, expiry or close removed it)
            self._pending.discard(opaque)
            raise
        if response is None:
            raise RemotingTimeoutError(
                f"no response to {_request_name(request.code)} from {self.peer_address}"
                f" within {timeout:g} s"
            )
        for hook in self._invoke_hooks:
            hook.after_response(self.context, request, response)
        return response

    def _move_timer(self) -> None:
        """Have the timer look at the deadlines again (the first invocation starts it: a
        connection that never invokes runs no timer)."""
        self._wake_timer_before = -math.inf  # once is enough until it has looked
        if self._timer_running:
            self._timer_moved.set()
        elif self._task_group is None:
            raise ConnectionClosedError(f"connection to {self.peer_address} is not running")
        else:
            self._timer_running = True
            self._task_group.start_soon(self._expire_requests)

    async def _expire_requests(self) -> None:
        """Answer None to each invocation still waiting at its deadline."""
        pending = self._pending
        swept_at = -math.inf
        while True:
            self._timer_moved = moved = anyio.Event()
            deadline = pending.next_deadline()
            if deadline is None:
                self._wake_timer_before = math.inf
                await moved.wait()
                continue
            if deadline > swept_at + SWEEP_GAP:
                self._wake_timer_before = deadline
            else:  # too soon: this sweep takes whatever comes due before it too
                deadline = swept_at + SWEEP_GAP
                self._wake_timer_before = -math.inf
            with anyio.CancelScope(deadline=deadline):
                await moved.wait()
            if moved.is_set():
                continue
            swept_at = self._clock()
            for waiter in pending.expired(swept_at + _TIMER_RESOLUTION):
                if not waiter.done():
                    waiter.set_result(None)

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        """Send ``request`` flagged oneway: the peer sends no response."""
        if self._closed:
            raise ConnectionClosedError(f"connection to {self.peer_address} is closed")
        request.opaque = self._opaques.next()
        request.flag = (request.flag & ~FLAG_RESPONSE) | FLAG_ONEWAY
        for hook in self._invoke_hooks:
            hook.before_request(self.context, request)
        if self._before_send is not None:
            self._before_send(request)
        await self._send(request)

    async def _send(self, request: RemotingCommand) -> None:
        if self._out_bytes > WRITE_HIGH_WATER or self._closed:
            await self._wait_writable()
        self._queue_request(request)

    def _queue_request(self, request: RemotingCommand) -> None:
        """Queue ``request`` for the writer; once a turn's worth is queued
        (``EARLY_WRITE_PARTS`` or ``EARLY_WRITE_BYTES``) and nothing is being sent, write
        it now instead."""
        self._queue(request)
        if (len(self._out) >= EARLY_WRITE_PARTS or self._out_bytes >= EARLY_WRITE_BYTES) and (
            (io := self._direct_io) is not None
            and io.writable
            and not self._sending
            and self._task_group is not None  # running: a write the kernel defers is awaited
            and not self._read_scope.cancel_called  # closing: the writer's to drop, as before
        ):
            self._write_queued_now(io)
        else:
            self._wakeup.set()

    async def _wait_writable(self) -> None:
        """Hold a sender back while a peer that does not read has too much queued."""
        if self._out_bytes > WRITE_HIGH_WATER:
            await self._wait_flushed()
        if self._closed:
            raise ConnectionClosedError(f"connection to {self.peer_address} is closed")

    def _complete(self, response: RemotingCommand) -> None:
        waiter = self._pending.complete(response)
        if waiter is None:
            log.debug("dropping a response nobody waits for: %r", response)
        elif not waiter.done():  # a cancelled invocation's future is done
            waiter.set_result(response)

    def _fail_pending(self, error: Exception) -> None:
        for waiter in self._pending.drain():
            if not waiter.done():
                waiter.set_exception(error)


def _running_asyncio_loop() -> asyncio.AbstractEventLoop | None:
    if sniffio.current_async_library() == "asyncio":
        return asyncio.get_running_loop()
    return None


async def within_limit(route: ProcessorRoute, pending: Any) -> Any:
    """A deferred processor's answer, awaited within its route's limit of those at once."""
    if route.limit is None:
        return await pending
    if route.limiter is None:
        route.limiter = anyio.CapacityLimiter(route.limit)
    async with route.limiter:
        return await pending


def not_supported(request: RemotingCommand) -> RemotingCommand:
    """The answer to a request whose code no processor takes (Java's remark)."""
    return request.response(
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
    )


def error_response(
    request: RemotingCommand, error: Exception, route: ProcessorRoute, peer: str
) -> RemotingCommand:
    """What a processor's exception answers: a refusal's code and remark, a protocol
    error's, else SYSTEM_ERROR (counted in BAD_REQUESTS)."""
    if isinstance(error, ProtocolError):
        BAD_REQUESTS.bad_request(peer, request.code, error)
        return request.response(error.response_code, str(error))
    if isinstance(error, RequestRefused):  # a ResponseError here is a failed call of ours
        return request.response(error.code, error.remark)
    BAD_REQUESTS.failure(route.name, request.code, error)
    return request.response(ResponseCode.SYSTEM_ERROR, f"{type(error).__name__}: {error}")


def _request_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return f"request {code}"


def _address(stream: ByteStream, attribute: Any) -> str:
    value = stream.extra(attribute, None)
    if isinstance(value, tuple) and len(value) >= 2:
        return format_address(str(value[0]), int(value[1]))
    return str(value) if value is not None else "unknown"
