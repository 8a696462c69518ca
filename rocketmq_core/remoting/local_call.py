"""A request handed to this process's own processors, without a socket.

A plugin that runs beside a server on its event loop (the gRPC proxy in local mode)
would otherwise send the server remoting requests over loopback: an encode, two socket
writes and reads, and a decode each way, for a processor a function call away. Here the
processor gets the request itself and a context of its own, and whatever it answers
with (a command, an awaitable of one, a later answer from a callback) comes back as the
response command.

What differs from a request over a connection, on purpose: no RPC hooks run (the caller
is the process itself, which checked its own client's rights already), and processors
are asked for response commands, not finished frames.
"""

from __future__ import annotations

from collections.abc import Awaitable
from inspect import isawaitable
from typing import Any

import anyio

from ..protocol.codes import ResponseCode
from ..protocol.command import RemotingCommand
from .connection import BUSY_REMARK, LaterAnswer, error_response, not_supported, within_limit
from .processor import ProcessorRoute, ProcessorTable, RequestContext


class _Call:
    """One request's stand-in for its connection: what a processor may use of one to
    answer later (``answer_later``), and where that answer arrives."""

    __slots__ = ("_answered", "response")

    takes_encoded_answers = False  # a response command, never a finished frame

    def __init__(self) -> None:
        self._answered: anyio.Event | None = None  # made by answer_later: most answer inline
        self.response: RemotingCommand | None = None

    def answer_later(self, request: RemotingCommand) -> LaterAnswer:
        self._answered = anyio.Event()
        return LaterAnswer(self, request)  # type: ignore[arg-type]

    # what LaterAnswer tells its connection
    def _answer_later_done(self, request: RemotingCommand, response: Any) -> None:
        self.response = response
        assert self._answered is not None  # a later answer comes through answer_later
        self._answered.set()

    def _no_longer_in_flight(self) -> None:
        """Withdrawn: the processor raised, and its error is the answer."""

    async def answered(self) -> RemotingCommand | None:
        assert self._answered is not None  # called for a LaterAnswer only
        await self._answered.wait()
        return self.response


async def call_locally(
    processors: ProcessorTable, request: RemotingCommand, peer_address: str, local_address: str
) -> RemotingCommand:
    """``request``'s response from the processor its code routes to, as a connection
    would answer it (REQUEST_CODE_NOT_SUPPORTED, SYSTEM_BUSY, a processor's refusal or
    failure as its response). ``peer_address`` is whom the processor sees sending it.
    Cancelled (a caller's timeout), it stops waiting for a later answer; a processor's
    awaitable runs to its end regardless (its own timeouts bound it)."""
    answer = answer_locally(processors, request, peer_address, local_address)
    return answer if isinstance(answer, RemotingCommand) else await answer


def answer_locally(
    processors: ProcessorTable, request: RemotingCommand, peer_address: str, local_address: str
) -> RemotingCommand | Awaitable[RemotingCommand]:
    """``call_locally``'s response when the processor answered at once (most do), else
    an awaitable of it, to be awaited at once (it holds the processor's work, and counts
    it against the route's limit only once started): a caller then needs no timeout for
    the usual request (a cancel scope per call cost the gRPC proxy a quarter of a send)."""
    route = processors.lookup(request.code)
    if route is None:
        return not_supported(request)
    if route.full:
        return request.response(ResponseCode.SYSTEM_BUSY, BUSY_REMARK)
    call = _Call()
    ctx = RequestContext(call, peer_address, local_address)  # type: ignore[arg-type]
    try:
        result: Any = route.processor(ctx, request)
    except Exception as exc:
        return error_response(request, exc, route, peer_address)
    if type(result) is LaterAnswer or isawaitable(result):
        return _answered_later(request, route, call, result, peer_address)
    return _response(request, route, result)


async def _answered_later(
    request: RemotingCommand, route: ProcessorRoute, call: _Call, result: Any, peer_address: str
) -> RemotingCommand:
    """The response of a processor that answers later (a LaterAnswer) or in an awaitable."""
    try:
        if type(result) is LaterAnswer:
            result = await call.answered()
        else:
            route.active += 1
            try:
                # a caller that stops waiting must not cut the processor's work short (a
                # put half done): over a connection a client's timeout never does either
                with anyio.CancelScope(shield=True):
                    result = await within_limit(route, result)
            finally:
                route.active -= 1
    except Exception as exc:
        return error_response(request, exc, route, peer_address)
    return _response(request, route, result)


def _response(request: RemotingCommand, route: ProcessorRoute, result: Any) -> RemotingCommand:
    if not isinstance(result, RemotingCommand):  # None (a oneway's) or a frame: no answer
        return request.response(
            ResponseCode.SYSTEM_ERROR, f"processor {route.name} gave no response command"
        )
    return result
