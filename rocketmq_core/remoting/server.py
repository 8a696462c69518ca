"""Serving the remoting protocol: one Connection per accepted stream, graceful stop."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
from anyio.abc import ByteStream, TaskGroup, TaskStatus

from ..protocol.codec import MAX_FRAME_LENGTH
from ..rate_limited_log import RateLimitedLog
from .budgets import MemoryBudget, MemoryReturner, MiB, ServerLimits
from .connection import Connection
from .processor import ProcessorTable, RpcHook
from .transport import TlsOptions, Transport, parse_endpoint

log = logging.getLogger("rocketmq.remoting")
_refused_log = RateLimitedLog(log)
_expired_log = RateLimitedLog(log)
# memory a closed connection held (unsent answers, an unfinished frame) worth handing
# back to the OS at once: glibc keeps freed heap pages otherwise
TRIM_AFTER_BYTES = 8 * MiB


@dataclass(frozen=True)
class Listener:
    """One more address a server serves, over a transport of its own."""

    transport: Transport
    host: str
    port: int
    tls: TlsOptions | None = None


def parse_listeners(
    addresses: str, transports: Callable[[str], Transport], tls: TlsOptions | None
) -> list[Listener]:
    """``"quic://0.0.0.0:10911;tcp://0.0.0.0:10921"`` -> Listeners (a bare address is tcp)."""
    listeners = []
    for address in (part.strip() for part in addresses.split(";")):
        if address:
            endpoint = parse_endpoint(address)
            transport = transports(endpoint.scheme or "tcp")
            listeners.append(Listener(transport, endpoint.host, endpoint.port, tls))
    return listeners


async def serve_connection(
    stream: ByteStream,
    processors: ProcessorTable,
    *,
    hooks: Iterable[RpcHook] = (),
    max_frame_length: int = MAX_FRAME_LENGTH,
    task_status: TaskStatus[Connection] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve requests on ``stream`` until the peer goes away; closes the stream."""
    connection = Connection(stream, processors, hooks=hooks, max_frame_length=max_frame_length)
    await connection.run(task_status=task_status)


class RemotingServer:
    """Accepts connections on a transport and serves a ProcessorTable on each.

    ``serve`` runs until cancelled (abrupt) or ``stop`` (graceful: stop accepting,
    let every connection answer what it has read, then close). ``extra`` listeners
    (QUIC beside TCP) serve the same processors; their bound addresses, with their
    transport's scheme, are in ``extra_addresses``. ``limits`` bound what clients may
    hold: connections, idle time, unsent answers and unfinished frames.
    """

    def __init__(
        self,
        transport: Transport,
        processors: ProcessorTable,
        *,
        hooks: Iterable[RpcHook] = (),
        tls: TlsOptions | None = None,
        max_frame_length: int = MAX_FRAME_LENGTH,
        held: bool = False,
        limits: ServerLimits | None = None,
    ) -> None:
        self.transport = transport
        self.processors = processors
        self.hooks = tuple(hooks)
        self.tls = tls
        self.max_frame_length = max_frame_length
        self.address: str | None = None
        self.extra_addresses: list[str] = []
        self.accepted: Counter[str] = Counter()  # connections accepted, by transport
        self.refused = 0  # connections closed at once: over the maximum
        self.expired: Counter[str] = Counter()  # connections closed: "idle", "incomplete"
        self.connections: set[Connection] = set()
        self.limits = limits or ServerLimits()
        self.budget = MemoryBudget(self.limits)
        self.budget.reclaim = self._close_hoarder
        self.memory_returner = MemoryReturner()  # after big connections close
        self.max_connections = 0  # resolved when serving starts (the fd limit may change)
        self._streams = 0  # accepted and not yet closed, held and starting ones included
        self._listen_scopes: list[anyio.CancelScope] = []
        self._task_group: TaskGroup | None = None
        self._no_connections = anyio.Event()
        self._stopping = False
        # held: connections accepted before open_for_requests() wait unread (an app
        # binds first, to learn its port, and serves once it is ready)
        self._requests_open = anyio.Event()
        if not held:
            self._requests_open.set()
        self._opened_callbacks: list[Callable[[Connection], Any]] = []
        self._closed_callbacks: list[Callable[[Connection], Any]] = []

    def on_connection_opened(self, callback: Callable[[Connection], Any]) -> None:
        self._opened_callbacks.append(callback)

    def on_connection_closed(self, callback: Callable[[Connection], Any]) -> None:
        """``callback(connection)`` after any connection closes (a broker went away)."""
        self._closed_callbacks.append(callback)

    async def serve(
        self,
        host: str = "0.0.0.0",
        port: int = 0,
        *,
        extra: Iterable[Listener] = (),
        task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on ``host:port`` and every ``extra`` listener; report the bound
        ``host:port`` through task_status once all of them accept connections."""
        self.max_connections = self.limits.resolved_max_connections()
        async with anyio.create_task_group() as task_group:
            self._task_group = task_group
            task_group.start_soon(self._close_expired)
            main = Listener(self.transport, host, port, self.tls)
            self.address = await task_group.start(self._listen, main)
            for listener in extra:
                bound = await task_group.start(self._listen, listener)
                self.extra_addresses.append(f"{listener.transport.name}://{bound}")
            task_status.started(self.address)

    def open_for_requests(self) -> None:
        """Serve the connections held since the start, and every one after."""
        self._requests_open.set()

    async def stop(self, grace: float = 10.0) -> None:
        """Stop accepting, drain every connection for up to ``grace`` seconds, close."""
        self._stopping = True
        self._requests_open.set()  # held connections are closed unread
        for scope in self._listen_scopes:
            scope.cancel()
        for connection in list(self.connections):
            connection.drain()
        if self.connections:
            self._no_connections = anyio.Event()
            with anyio.move_on_after(grace):
                await self._no_connections.wait()
        for connection in list(self.connections):
            log.warning("closing %r: still busy after the %g s grace period", connection, grace)
            await connection.aclose()

    async def _listen(self, listener: Listener, *, task_status: TaskStatus[str]) -> None:
        with anyio.CancelScope() as scope:
            self._listen_scopes.append(scope)
            if self._stopping:
                scope.cancel()
            await listener.transport.listen(
                listener.host,
                listener.port,
                partial(self._accept, listener.transport.name),
                tls=listener.tls,
                task_status=task_status,
            )

    async def _accept(self, transport_name: str, stream: ByteStream) -> None:
        # Connections live in the server's task group, not the listener's, so that
        # closing the listener leaves them running to drain.
        assert self._task_group is not None
        self.accepted[transport_name] += 1
        if self._streams >= self.max_connections:
            self.refused += 1
            _refused_log.warning(
                "refusing a %s connection: %d are open, the maximum (serverMaxConnections)",
                transport_name,
                self._streams,
            )
            await anyio.aclose_forcefully(stream)
            return
        self._streams += 1
        self._task_group.start_soon(self._serve_stream, stream)

    async def _serve_stream(self, stream: ByteStream) -> None:
        try:
            await self._serve_connection(stream)
        finally:
            self._streams -= 1

    async def _serve_connection(self, stream: ByteStream) -> None:
        if not self._requests_open.is_set():
            await self._requests_open.wait()
        if self._stopping:  # accepted just before stop() closed the listener
            await anyio.aclose_forcefully(stream)
            return
        connection = Connection(
            stream,
            self.processors,
            hooks=self.hooks,
            max_frame_length=self.max_frame_length,
            budget=self.budget,
        )
        self.connections.add(connection)
        connection.on_close(self._forget)
        try:
            for callback in self._opened_callbacks:
                callback(connection)
            await connection.run()
        except Exception:
            # one connection's failure is logged, never the whole server's
            log.exception("connection from %s failed", connection.peer_address)
            await connection.aclose()

    async def _close_expired(self) -> None:
        """Close connections idle past ``idle_seconds`` (Java's IdleStateHandler with
        serverChannelMaxIdleTimeSeconds) and those whose frame stopped arriving."""
        idle = self.limits.idle_seconds
        incomplete = self.limits.incomplete_frame_seconds
        timeouts = [seconds for seconds in (idle, incomplete) if seconds > 0]
        if not timeouts:
            return
        period = min(max(min(timeouts) / 4, 0.05), 5.0)
        with anyio.CancelScope() as scope:
            self._listen_scopes.append(scope)  # stop() ends it with the listeners
            while True:
                await anyio.sleep(period)
                self._close_expired_now(idle, incomplete)

    def _close_expired_now(self, idle: float, incomplete: float) -> None:
        now = time.monotonic()
        for connection in list(self.connections):
            since = connection.incomplete_since
            if idle > 0 and now - connection.last_active > idle:
                reason = "idle"
                detail = f"nothing read or sent for {idle:g} s (serverChannelMaxIdleTimeSeconds)"
            elif incomplete > 0 and since is not None and now - since > incomplete:
                reason = "incomplete"
                detail = (
                    f"a frame still incomplete after {incomplete:g} s"
                    " (serverIncompleteFrameTimeoutSeconds)"
                )
            else:
                continue
            if connection.closing or connection.closed:
                continue  # asked to close on an earlier pass, still finishing
            connection.closing = True
            self.expired[reason] += 1
            _expired_log.warning("closing connection from %s: %s", connection.peer_address, detail)
            assert self._task_group is not None
            self._task_group.start_soon(connection.aclose)

    def _close_hoarder(self, asking: Connection) -> bool:
        """The unsent answers of all clients reached their budget: close the client that
        leaves the most unread, if it holds more than the write high water (a client
        that does not read), rather than refuse everyone else."""
        hoarder = max(self.connections, key=lambda connection: connection.unsent_bytes)
        held = hoarder.unsent_bytes
        if held <= self.limits.write_high_water:
            return False
        self.expired["unread"] += 1
        _expired_log.warning(
            "closing connection from %s: it leaves %d bytes of answers unread and all"
            " clients together reached serverMaxUnsentBytes (%d)",
            hoarder.peer_address,
            held,
            self.limits.max_unsent_total,
        )
        hoarder.abort()
        return True

    def _forget(self, connection: Connection) -> None:
        if connection.held_at_close >= TRIM_AFTER_BYTES and self._task_group is not None:
            self.memory_returner.request(self._task_group)
        self.connections.discard(connection)
        if not self.connections:
            self._no_connections.set()
        for callback in self._closed_callbacks:
            try:
                callback(connection)
            except Exception:
                log.exception("connection-closed callback %r failed", callback)
