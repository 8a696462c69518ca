"""ProcessorTable: request code -> processor, with limits; RequestContext; RPC hooks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..protocol.command import RemotingCommand

if TYPE_CHECKING:
    from .connection import Connection, LaterAnswer

# a command, none (oneway), or a finished response frame (Connection.takes_encoded_answers)
Response = RemotingCommand | bytes | None
# A processor answers inline (a command or None), returns an awaitable of one, or returns
# a LaterAnswer (Connection.answer_later) that a callback answers.
Processor = Callable[
    ["RequestContext", RemotingCommand], "Response | Awaitable[Response] | LaterAnswer"
]


@dataclass(eq=False)
class RequestContext:
    """What a processor knows of where a request came from: one per connection.

    ``connection`` can send requests back to the peer (the broker asking a producer
    to check a transaction); ``attributes`` is free for hooks (an ACL principal).
    """

    connection: Connection
    peer_address: str
    local_address: str
    attributes: dict[str, Any] = field(default_factory=dict)


class RpcHook(Protocol):
    """Runs around every request: ACL checks and signing, tracing, metrics.

    On a server ``before_request`` may return a response to answer with instead of
    calling the processor (a refused ACL check); on a client it runs just before the
    request is sent and may add fields (a signature). ``after_response`` sees each
    response before it is sent (server) or returned (client). A server's hooks do not run
    on the requests it sends to clients, nor a client's on those it receives. A hook with a
    class attribute ``sees_responses = False`` (an ACL guard) lets processors answer with
    finished frames, which no ``after_response`` sees. A hook with a method
    ``frame_check(ctx)`` lets a FrameServer answer frames of ``ctx``'s connection that the
    hook has not seen, checking each with what it returns in place of ``before_request``
    (None: not now).
    """

    def before_request(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None: ...

    def after_response(
        self, ctx: RequestContext, request: RemotingCommand, response: RemotingCommand
    ) -> None: ...


class FrameServer(Protocol):
    """A processor table's way past decoding for the frames it answers the most (a
    broker's usual sends): called with each chunk a connection read, before a frame of
    it is decoded, while every hook of the connection has a ``frame_check`` (RpcHook) and
    none must see responses.

    It answers the whole frames of ``source`` from ``position`` on, in order, exactly as
    the processors would (``connection.queue_answers``), and stops before the first it
    does not take: nothing is done for that one, which is decoded and dispatched as
    usual, and so are the frames after it. Returns the position it stopped at."""

    # told of each run when set (a processor wrapper's counterpart, ProcessorTable.wrap):
    # (request code, requests answered, seconds the run took)
    observer: Callable[[int, int, float], None] | None

    def __call__(self, connection: Connection, source: bytes | bytearray, position: int) -> int: ...


class ProcessorRoute:
    """One processor and its admission state (Java's per-processor pool and queue)."""

    __slots__ = ("active", "backlog", "limit", "limiter", "name", "processor")

    def __init__(
        self, name: str, processor: Processor, limit: int | None, backlog: int | None
    ) -> None:
        self.name = name
        self.processor = processor
        self.limit = limit
        self.backlog = backlog
        self.active = 0  # deferred requests running or waiting for a slot
        self.limiter: Any = None  # anyio.CapacityLimiter, made inside the event loop

    @property
    def full(self) -> bool:
        """No room left for one more deferred request: answer SYSTEM_BUSY."""
        if self.limit is None:
            return False
        return self.active >= self.limit + (self.backlog if self.backlog is not None else 0)


class ProcessorTable:
    """Processors keyed by request code, plus an optional default for the rest."""

    def __init__(self) -> None:
        self._routes: dict[int, ProcessorRoute] = {}
        self._default: ProcessorRoute | None = None
        # answers the leading frames of what a connection read that its processors would
        # answer the usual way, before they are decoded (FrameServer); None: every frame
        # is decoded and dispatched
        self.frame_server: FrameServer | None = None

    def register(
        self,
        code: int | Iterable[int],
        processor: Processor,
        *,
        limit: int | None = None,
        backlog: int | None = None,
    ) -> None:
        """Route ``code`` (or several codes, sharing one limit) to ``processor``.

        ``limit``: how many deferred requests run at once; ``backlog``: how many more
        may wait for a slot before requests are refused with SYSTEM_BUSY.
        """
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        codes = [code] if isinstance(code, int) else list(code)
        self.frame_server = None  # it stands for the processors it was made for
        route = ProcessorRoute(_name(processor), processor, limit, backlog)
        for one in codes:
            self._routes[int(one)] = route

    def set_default(
        self, processor: Processor, *, limit: int | None = None, backlog: int | None = None
    ) -> None:
        """The processor for every code without one of its own."""
        self._default = ProcessorRoute(_name(processor), processor, limit, backlog)

    def lookup(self, code: int) -> ProcessorRoute | None:
        return self._routes.get(code, self._default)

    def codes(self) -> list[int]:
        return sorted(self._routes)

    def wrap(
        self,
        wrapper: Callable[[Processor], Processor],
        runs: Callable[[int, int, float], None] | None = None,
    ) -> None:
        """Put ``wrapper(processor)`` in place of every processor (request timing). The
        frame server stays only with ``runs``, which it tells of each run instead (its
        observer); without, the wrapper must see every request."""
        if runs is not None and self.frame_server is not None:
            self.frame_server.observer = runs
        else:
            self.frame_server = None
        routes = {id(route): route for route in [*self._routes.values(), self._default] if route}
        for route in routes.values():
            route.processor = wrapper(route.processor)


def _name(processor: Any) -> str:
    processor = getattr(processor, "func", processor)  # a functools.partial: name its function
    return getattr(processor, "__qualname__", None) or type(processor).__qualname__
