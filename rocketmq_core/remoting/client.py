"""RemotingClient: requests to many peers by address, one cached connection each."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AsyncExitStack
from functools import partial
from inspect import isawaitable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..acl.signing import Credentials, sign
from ..errors import ConfigError, ConnectionClosedError, RemotingConnectError, RemotingError
from ..protocol.codec import MAX_FRAME_LENGTH
from ..protocol.command import OpaqueSequence, RemotingCommand
from .connection import Connection
from .processor import ProcessorTable, RpcHook
from .transport import TlsOptions, Transport, parse_endpoint

log = logging.getLogger("rocketmq.remoting")

ResponseCallback = Callable[[RemotingCommand | None, Exception | None], Awaitable[None] | None]


class RemotingClient:
    """Invoke requests on peers named by ``host:port``; an async context manager.

    A bare ``host:port`` is reached over ``transport``; ``quic://host:port`` (any
    ``name://``) over the transport ``transports(name)`` returns. Peers may send
    requests back on the same connections (the broker asks a producer to check a
    transaction); ``processors`` answers them. With ``credentials``, every request it
    sends is signed (docs/spec/ACL.md §1) once its fields and body are final.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        processors: ProcessorTable | None = None,
        hooks: Iterable[RpcHook] = (),
        connect_timeout: float = 3.0,
        tls: TlsOptions | None = None,
        max_frame_length: int = MAX_FRAME_LENGTH,
        transports: Callable[[str], Transport] | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        self.transport = transport
        self._transports = transports
        self.processors = processors
        self.hooks = tuple(hooks)
        self.connect_timeout = connect_timeout
        self.tls = tls
        self.max_frame_length = max_frame_length
        self.credentials = credentials
        self._sign = partial(sign, credentials=credentials) if credentials else None
        self._opaques = OpaqueSequence()
        self._connections: dict[str, Connection] = {}
        self._connecting: dict[str, anyio.Lock] = {}
        self._closed_callbacks: list[Callable[[str, Connection], Any]] = []
        self._task_group: TaskGroup | None = None  # runs the connections; set while open
        self._lifetime: AsyncExitStack | None = None  # what __aexit__ leaves, in order

    async def __aenter__(self) -> RemotingClient:
        # the task group is left by the task that entered it: enter and leave the client
        # in one task (``async with``), as anyio requires of every task group
        async with AsyncExitStack() as lifetime:
            lifetime.callback(self._forget_task_group)
            self._task_group = await lifetime.enter_async_context(anyio.create_task_group())
            lifetime.push_async_callback(self._close_connections)
            self._lifetime = lifetime.pop_all()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        lifetime, self._lifetime = self._lifetime, None
        if lifetime is not None:
            await lifetime.aclose()

    async def _close_connections(self) -> None:
        """Close every connection (shielded: a peer is told even when we are cancelled),
        then stop what still runs in the task group."""
        assert self._task_group is not None
        try:
            with anyio.CancelScope(shield=True):
                for connection in list(self._connections.values()):
                    await connection.aclose()
        finally:
            self._task_group.cancel_scope.cancel()

    def _forget_task_group(self) -> None:
        self._task_group = None

    def on_connection_closed(self, callback: Callable[[str, Connection], Any]) -> None:
        """``callback(address, connection)`` when a connection to a peer closes."""
        self._closed_callbacks.append(callback)

    async def connection(self, address: str) -> Connection:
        """The open connection to ``address``, connecting first if there is none."""
        connection = self._connections.get(address)
        if connection is not None and not connection.closed:
            return connection
        if self._task_group is None:
            raise RemotingError("RemotingClient used outside 'async with'")
        lock = self._connecting.setdefault(address, anyio.Lock())
        async with lock:
            connection = self._connections.get(address)
            if connection is not None and not connection.closed:
                return connection
            endpoint = parse_endpoint(address)
            transport = self._transport_for(endpoint.scheme, address)
            try:
                with anyio.fail_after(self.connect_timeout):
                    stream = await transport.connect(endpoint.host, endpoint.port, tls=self.tls)
            except (OSError, TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError) as exc:
                reason = "timed out" if isinstance(exc, TimeoutError) else str(exc)
                raise RemotingConnectError(f"cannot connect to {address}: {reason}") from exc
            connection = Connection(
                stream,
                self.processors,
                invoke_hooks=self.hooks,
                opaques=self._opaques,
                max_frame_length=self.max_frame_length,
                peer_address=address,  # dialable again, scheme and all
                before_send=self._sign,
            )
            connection.on_close(lambda closed: self._forget(address, closed))
            if self._task_group is None:  # the client closed while we were connecting
                await anyio.aclose_forcefully(stream)
                raise ConnectionClosedError(f"the client closed while connecting to {address}")
            await self._task_group.start(connection.run)
            self._connections[address] = connection
            return connection

    def _transport_for(self, scheme: str | None, address: str) -> Transport:
        if scheme is None or scheme == self.transport.name:
            return self.transport
        if self._transports is None:
            raise ConfigError(
                f"cannot reach {address}: this client speaks only {self.transport.name}"
            )
        return self._transports(scheme)

    def invoke(
        self, address: str, request: RemotingCommand, timeout: float = 3.0
    ) -> Awaitable[RemotingCommand]:
        """Send ``request`` to ``address``; await the response. (The connection's own
        coroutine when it is open: a coroutine less per request.)"""
        connection = self._connections.get(address)
        if connection is None or connection.closed:
            return self._connect_and_invoke(address, request, timeout)
        return connection.invoke(request, timeout)

    async def _connect_and_invoke(
        self, address: str, request: RemotingCommand, timeout: float
    ) -> RemotingCommand:
        connection = await self.connection(address)
        return await connection.invoke(request, timeout)

    async def invoke_oneway(self, address: str, request: RemotingCommand) -> None:
        connection = await self.connection(address)
        await connection.invoke_oneway(request)

    def invoke_callback(
        self,
        address: str,
        request: RemotingCommand,
        callback: ResponseCallback,
        timeout: float = 3.0,
    ) -> None:
        """Send ``request`` in the background; ``callback(response, error)`` gets the result.

        Exactly one of ``response`` and ``error`` is set. The callback may be async.
        """
        if self._task_group is None:
            raise RemotingError("RemotingClient used outside 'async with'")
        self._task_group.start_soon(self._invoke_then_call, address, request, callback, timeout)

    async def _invoke_then_call(
        self, address: str, request: RemotingCommand, callback: ResponseCallback, timeout: float
    ) -> None:
        response: RemotingCommand | None
        error: Exception | None
        try:
            response = await self.invoke(address, request, timeout)
        except Exception as exc:
            response, error = None, exc
        else:
            error = None
        try:
            outcome = callback(response, error)
            if isawaitable(outcome):
                await outcome
        except Exception:
            # a failing callback must not take the client's connections down with it
            log.exception("response callback %r failed", callback)

    async def close_connection(self, address: str) -> None:
        connection = self._connections.get(address)
        if connection is not None:
            await connection.aclose()

    def _forget(self, address: str, connection: Connection) -> None:
        if self._connections.get(address) is connection:
            del self._connections[address]
        for callback in self._closed_callbacks:
            try:
                callback(address, connection)
            except Exception:
                log.exception("connection-closed callback %r failed", callback)
