"""A non-blocking UDP socket read in batches and written without a task switch.

QUIC's cost is per datagram, so the socket layer must not add an event-loop turn to
each one: a reader takes every datagram already queued in the kernel in one wake-up,
and a writer sends at once, waiting only when the kernel's buffer is full. anyio's UDP
sockets do one checkpoint per datagram each way, so this wraps a plain socket instead;
it works on asyncio and trio alike through ``anyio.wait_readable``/``wait_writable``.
"""

from __future__ import annotations

import contextlib
import socket
from typing import Any

import anyio

Address = tuple[Any, ...]

RECEIVE_SIZE = 65536  # the largest UDP payload
# datagrams taken per wake-up: enough to drain a burst, few enough to stay fair
RECEIVE_BATCH = 64
# kernel buffers for a window's burst (the kernel caps them at net.core.[rw]mem_max)
SOCKET_BUFFER = 4 * 1024 * 1024


class DatagramSocket:
    """One UDP socket; connected (a client's) or bound (a listener's)."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER)
        self._socket = sock
        self.local_address: Address = sock.getsockname()
        self.remote_address: Address | None = None
        self._closed = False
        self._pending_error: OSError | None = None

    @classmethod
    async def connect(cls, host: str, port: int) -> DatagramSocket:
        """A socket connected to its server: an ICMP "port unreachable" then fails its
        next read at once (anyio's connected UDP socket on asyncio keeps it to itself)."""
        family, kind, protocol, _name, address = (
            await anyio.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
        )[0]
        sock = socket.socket(family, kind, protocol)
        try:
            sock.connect(address)  # no packet: it fixes the peer and picks a local port
            endpoint = cls(sock)
        except BaseException:
            sock.close()
            raise
        endpoint.remote_address = sock.getpeername()
        return endpoint

    @classmethod
    async def bind(cls, host: str, port: int) -> DatagramSocket:
        family, kind, protocol, _name, address = (
            await anyio.getaddrinfo(host, port, type=socket.SOCK_DGRAM, flags=socket.AI_PASSIVE)
        )[0]
        sock = socket.socket(family, kind, protocol)
        try:
            sock.bind(address)
            return cls(sock)
        except BaseException:
            sock.close()
            raise

    async def receive_batch(self) -> list[tuple[bytes, Address]]:
        """At least one datagram: every one queued, up to RECEIVE_BATCH, waiting if none.

        A connected socket raises OSError (such as ConnectionRefusedError) when the
        kernel learnt that nobody listens at its peer."""
        if self._pending_error is not None:
            error, self._pending_error = self._pending_error, None
            raise error
        batch: list[tuple[bytes, Address]] = []
        receive = self._socket.recvfrom
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                while len(batch) < RECEIVE_BATCH:
                    batch.append(receive(RECEIVE_SIZE))
            except BlockingIOError:
                pass
            except OSError as exc:
                if not batch:
                    raise
                self._pending_error = exc  # reported by the next call, after this batch
            if batch:
                return batch
            await anyio.wait_readable(self._socket)

    def try_send(self, data: bytes, address: Address | None = None) -> bool:
        """Send now; False when the kernel's buffer is full (see ``wait_writable``)."""
        if self._closed:
            raise anyio.ClosedResourceError
        try:
            if self.remote_address is not None:  # connected: the path's address is its peer
                self._socket.send(data)
            elif address is not None:
                self._socket.sendto(data, address)
            else:
                raise ValueError("an unconnected socket sends to a given address")
        except BlockingIOError:
            return False
        return True

    async def wait_writable(self) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        await anyio.wait_writable(self._socket)

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            anyio.notify_closing(self._socket)  # wakes a task waiting on it
            self._socket.close()
