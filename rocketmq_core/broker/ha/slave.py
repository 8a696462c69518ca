"""The slave side of the HA port: follow a master's CommitLog (HA.md §2.1).

Connect to the master's HA address, report the local CommitLog end at once, right after
each read's frames are appended (from the reader: no task hand-over on the way to the
master's ack) and when a heartbeat interval passed without a report, and write each
frame's bytes at the offset it names. A frame for another offset than the local end
means the two logs disagree: close, reconnect, and report again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial

import anyio
from anyio.abc import SocketStream

from ...errors import ConfigError, RemoteProtocolError
from ...protocol.ha import Transfer, TransferReader, encode_offset_report
from ...remoting.socket_io import SocketIO, socket_io
from ...remoting.transport import parse_address
from ...store.api import ReplicationError, ReplicationTarget
from . import CONNECTION_LOST
from .silence import SilenceLimit

log = logging.getLogger("rocketmq.broker.ha")

CONNECT_TIMEOUT = 5.0
RECEIVE_SIZE = 4 * 1024 * 1024


@dataclass
class SlaveSettings:
    heartbeat_interval: float = 5.0  # seconds between reports when nothing is appended
    housekeeping_interval: float = 20.0  # seconds of a silent master before reconnecting


class OffsetMismatch(ReplicationError):
    """The master sent bytes for another offset than this slave's end."""


class HAClient:
    """Follows the master whose HA address ``master_address()`` gives (None: not known yet)."""

    reconnect_delay = 5.0  # seconds after a failed connect, as Java's HAClient waits

    def __init__(
        self,
        target: ReplicationTarget,
        master_address: Callable[[], str | None],
        settings: SlaveSettings,
    ) -> None:
        self.target = target
        self.master_address = master_address
        self.settings = settings
        self.connected_to: str | None = None
        self.reported = -1  # the last offset reported to the master
        self._sending = anyio.Lock(fast_acquire=True)  # one report at a time on the stream
        self._reported_at = 0.0  # anyio.current_time() of the last report
        self._address_known = anyio.Event()  # cuts a wait for an address short

    def address_changed(self) -> None:
        """The master's HA address was learned or changed: try it now."""
        self._address_known.set()

    async def _pause(self) -> None:
        with anyio.move_on_after(self.reconnect_delay):
            await self._address_known.wait()
        self._address_known = anyio.Event()

    async def run(self) -> None:
        mismatched_at = -1
        while True:
            address = self.master_address()
            if not address:
                await self._pause()
                continue
            try:
                host, port = parse_address(address)
                with anyio.fail_after(CONNECT_TIMEOUT):
                    stream = await anyio.connect_tcp(host, port)
            except (OSError, TimeoutError, ConfigError) as exc:
                log.warning("cannot reach the master's HA port %s: %s", address, exc)
                await self._pause()
                continue
            pause = False
            try:
                await self._follow(stream, address)
            except OffsetMismatch as exc:
                log.warning("%s: reconnecting to report again", exc)
                # at once, as Java does; the same mismatch again waits, not to spin
                pause = mismatched_at == self._end()
                mismatched_at = self._end()
            except RemoteProtocolError as exc:
                log.warning("master %s sent a bad frame (%s): reconnecting", address, exc)
                pause = True
            except CONNECTION_LOST as exc:
                log.info("connection to master %s lost: %r", address, exc)
            finally:
                self.connected_to = None
                with anyio.CancelScope(shield=True):
                    await stream.aclose()
            if pause:
                await self._pause()

    async def _follow(self, stream: SocketStream, address: str) -> None:
        self.connected_to = address
        log.info("following master %s from offset %d", address, self._end())
        ended: list[Exception] = []  # why the connection ended, raised to run's handlers
        async with anyio.create_task_group() as both:

            async def part(work: Callable[[], Awaitable[None]]) -> None:
                try:
                    await work()
                except (*CONNECTION_LOST, OffsetMismatch, RemoteProtocolError) as exc:
                    ended.append(exc)
                finally:
                    both.cancel_scope.cancel()

            io = socket_io(stream)
            both.start_soon(part, partial(self._report, io))
            both.start_soon(part, partial(self._read_frames, io, address))
        if ended:
            raise ended[0]

    def _end(self) -> int:
        return self.target.max_commit_log_offset

    async def _report(self, io: SocketIO) -> None:
        """The local end at once, then whenever a heartbeat interval passed without a
        report (the reader reports after each append itself: no hand-over to this task)."""
        interval = self.settings.heartbeat_interval
        await self._send_report(io)
        while True:
            await anyio.sleep(max(self._reported_at + interval - anyio.current_time(), 0))
            if anyio.current_time() - self._reported_at >= interval:
                await self._send_report(io)

    async def _send_report(self, io: SocketIO) -> None:
        async with self._sending:  # the reader and the heartbeat share the stream
            offset = self._end()
            await io.send(encode_offset_report(offset))
            self.reported = offset
            self._reported_at = anyio.current_time()

    async def _read_frames(self, io: SocketIO, address: str) -> None:
        reader = TransferReader()
        silence = SilenceLimit(self.settings.housekeeping_interval)
        with silence.scope:
            while True:
                data = await io.receive(RECEIVE_SIZE)
                silence.mark_activity()
                if self._append(reader.feed(data), address):
                    await self._send_report(io)
        if silence.timed_out:  # the scope covers the reports too
            log.warning(
                "master %s sent nothing (or took no report) for %.0f s: reconnecting",
                address,
                silence.seconds,
            )

    def _append(self, transfers: Iterable[Transfer], address: str) -> bool:
        """Append what the master sent; whether any of it was CommitLog bytes."""
        appended = False
        for transfer in transfers:
            end = self._end()
            if end != 0 and end != transfer.offset:
                raise OffsetMismatch(
                    f"master {address} sent offset {transfer.offset}, this slave's end is {end}"
                )
            if not transfer.body:
                continue  # the master's heartbeat
            try:
                self.target.append_replicated(transfer.offset, transfer.body)
            except ReplicationError as exc:
                raise OffsetMismatch(f"master {address}: {exc}") from exc
            appended = True
        return appended
