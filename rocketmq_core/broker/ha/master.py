"""The master side of the HA port: accept slaves, stream them the CommitLog (HA.md §2.2).

Per slave connection a reader takes its offset reports (the acks) and a writer sends
frames of CommitLog bytes from the offset the first report asked for; when either
ends, both end.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
from anyio.abc import SocketAttribute, SocketStream, TaskStatus

from ...errors import ConfigError
from ...protocol.ha import OffsetReportReader, encode_transfer_header
from ...remoting.socket_io import socket_io
from ...remoting.transport import listen_error
from ...store.api import ReplicationSource
from . import CONNECTION_LOST
from .progress import ReplicaProgress
from .silence import SilenceLimit

log = logging.getLogger("rocketmq.broker.ha")

POLL_INTERVAL = 0.1  # a writer with nothing to send looks again after this, unless woken
RECEIVE_SIZE = 65_536
WRITE_AT_MOST = 262_144  # bytes of CommitLog a writer sends in one write
# ASYNC_MASTER: after a write that caught up, a writer lets appends gather this long, so
# that sends arriving one at a time cost master and slave one write, read, dispatch and
# report per window rather than per message (~10% of the master's CPU and 7% of the
# slave's at 8k msg/s); the slave's copy trails by at most this much more
ASYNC_GATHER_WINDOW = 0.001


@dataclass
class MasterSettings:
    transfer_batch_size: int = 32_768
    heartbeat_interval: float = 5.0  # seconds idle before an empty frame
    housekeeping_interval: float = 20.0  # seconds a slave may stay silent
    # seconds a caught-up writer waits before it looks again; 0 on a SYNC_MASTER, whose
    # sends wait for the slave's ack
    gather_window: float = 0.0


class HAMaster:
    """Serves every slave that connects to the HA port."""

    def __init__(
        self, source: ReplicationSource, progress: ReplicaProgress, settings: MasterSettings
    ) -> None:
        self.source = source
        self.progress = progress
        self.settings = settings
        self.slaves: set[SlaveConnection] = set()
        self._appended = anyio.Event()
        self._idle_writers = 0
        self._ticking = anyio.Event()  # set: a writer waits, so the tick runs
        # (slave host, its end) already reported ahead of this master: said once, not per loop
        self._told_ahead: set[tuple[str, int]] = set()

    async def serve(
        self, port: int, *, task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen on ``port`` (0: any free one) and report the bound port."""
        try:
            listener = await anyio.create_tcp_listener(local_port=port)
        except OSError as exc:
            raise ConfigError(f"haListenPort: {listen_error('0.0.0.0', port, exc)}") from None
        async with listener:
            bound = listener.extra(SocketAttribute.local_port)
            log.info("HA port %d open for slaves", bound)
            task_status.started(bound)
            async with anyio.create_task_group() as ticking:
                ticking.start_soon(self._tick)
                await listener.serve(self._serve_slave)

    def appended(self) -> None:
        """The put path appended: wake the writers that wait for data."""
        if self._idle_writers and not self._appended.is_set():
            self._appended.set()

    async def wait_appended(self) -> None:
        """Until the next ``appended`` or tick (``_tick``, every POLL_INTERVAL); the caller
        checked for data first. No timeout of its own: a cancel scope per wait cost the
        master ~10% of a message sent on its own."""
        self._idle_writers += 1
        if not self._ticking.is_set():
            self._ticking.set()
        try:
            await self._appended.wait()
        finally:
            self._idle_writers -= 1

    async def _tick(self) -> None:
        """Wake the waiting writers every POLL_INTERVAL: each then looks for data it was
        not woken for and whether a heartbeat is due. Idle while no writer waits (no
        slave: an idle master does not wake for it)."""
        while True:
            if not self._idle_writers:
                self._ticking = anyio.Event()
                await self._ticking.wait()
            await anyio.sleep(POLL_INTERVAL)
            if self._idle_writers and not self._appended.is_set():
                self._appended.set()

    def arm(self) -> None:
        """Before a writer looks for data: a set wake-up is spent, a fresh one waits."""
        if self._appended.is_set():
            self._appended = anyio.Event()

    async def _serve_slave(self, stream: SocketStream) -> None:
        slave = SlaveConnection(self, stream)
        self.slaves.add(slave)
        self.progress.connections += 1
        log.info("slave %s connected", slave.peer)
        try:
            await slave.run()
        finally:
            if slave.counted:
                self.progress.connections -= 1
            self.slaves.discard(slave)
            with anyio.CancelScope(shield=True):
                await stream.aclose()
            log.info("slave %s disconnected (acked %d)", slave.peer, slave.acked)

    def slave_ahead(self, slave: SlaveConnection, reported: int) -> None:
        """``slave`` reported an end past this master's: one warning per slave and end."""
        end = self.source.max_commit_log_offset
        self._told_ahead = {told for told in self._told_ahead if told[1] > end}
        if (slave.host, reported) in self._told_ahead:
            return
        self._told_ahead.add((slave.host, reported))
        log.warning(
            "slave %s is ahead of this master: its CommitLog end %d is %d bytes past this"
            " master's %d, and those bytes are not on this master, so the slave is refused"
            " while ahead. To keep them, stop this master and promote that slave (brokerId=0,"
            " a master brokerRole); to follow this master, stop the slave and clear its store"
            " (storePathRootDir)",
            slave.peer,
            reported,
            reported - end,
            end,
        )


class SlaveConnection:
    """One slave: its reports in, CommitLog frames out."""

    def __init__(self, master: HAMaster, stream: SocketStream) -> None:
        self.master = master
        self.stream = stream
        self.io = socket_io(stream)
        remote = stream.extra(SocketAttribute.remote_address)  # a TCP stream's: (host, port)
        self.host = str(remote[0]) if isinstance(remote, tuple) else str(remote)
        self.peer = f"{remote[0]}:{remote[1]}" if isinstance(remote, tuple) else self.host
        self.requested: int | None = None  # the first report: where streaming starts
        self.acked = 0
        self.counted = True  # in progress.connections, which SYNC_MASTER sends wait on
        self._ahead = False  # reported an end past this master's; refused at the next report
        self._first_report = anyio.Event()

    async def run(self) -> None:
        async with anyio.create_task_group() as both:

            async def then_cancel(part: Callable[[], Awaitable[None]]) -> None:
                try:
                    await part()
                except CONNECTION_LOST:
                    pass  # the other side notices too; the slave reconnects
                finally:
                    both.cancel_scope.cancel()

            both.start_soon(then_cancel, self._read_reports)
            both.start_soon(then_cancel, self._write_frames)

    async def _read_reports(self) -> None:
        reader = OffsetReportReader()
        silence = SilenceLimit(self.master.settings.housekeeping_interval)
        progress = self.master.progress
        receive = self.io.receive
        with silence.scope:
            while True:
                data = await receive(RECEIVE_SIZE)
                silence.mark_activity()
                offset = reader.feed(data)
                if offset is None:
                    continue
                if self._ahead:  # refused at its last report: closed at this one, as Java
                    return
                if offset > self.master.source.max_commit_log_offset:
                    self._refuse_ahead(offset)
                    if self.requested is not None:  # Java closes at once after the first
                        return
                    continue
                if self.requested is None:
                    self.requested = offset
                    self._first_report.set()
                self.acked = offset
                progress.ack(offset)
        if silence.timed_out:
            log.warning("slave %s sent nothing for %.0f s: closing", self.peer, silence.seconds)

    def _refuse_ahead(self, offset: int) -> None:
        """A report past this master's end (HA.md §2.2, a slave ahead of the master).

        Java takes a first report like that as where to stream from, counts it as an ack
        for SYNC_MASTER sends, and closes at the next report. We keep the timing (closing at
        the next report paces a slave's reconnect loop) but neither stream from it nor
        count it: bytes this master does not hold acknowledge nothing.
        """
        self._ahead = True
        self.master.slave_ahead(self, offset)
        if self.counted:  # sends get SLAVE_NOT_AVAILABLE at once, not a wait for its ack
            self.counted = False
            self.master.progress.connections -= 1

    async def _write_frames(self) -> None:
        await self._first_report.wait()
        master = self.master
        source = master.source
        settings = master.settings
        assert self.requested is not None
        offset = self.requested
        if offset == 0:  # an empty slave starts at the master's last file, never older ones
            end = source.max_commit_log_offset
            offset = end - end % source.commit_log_file_size
        log.info("slave %s asked for %d: streaming from %d", self.peer, self.requested, offset)
        if offset < source.min_commit_log_offset:  # Java stalls silently here (HA.md §10.9)
            log.warning(
                "slave %s asked for offset %d, older than this master's first %d: it gets"
                " only heartbeats until it is emptied and restarted",
                self.peer,
                offset,
                source.min_commit_log_offset,
            )
        last_write = anyio.current_time()
        while True:
            master.arm()
            # what accumulated, in frames of at most haTransferBatchSize, leaves in one write
            frames: list[bytes] = []
            size = 0
            while size < WRITE_AT_MOST:
                body = source.read_commit_log(offset, settings.transfer_batch_size)
                if not body:
                    break
                frames += (encode_transfer_header(offset, len(body)), body)
                offset += len(body)
                size += len(body)
            if frames:
                await self.io.send(b"".join(frames))
                last_write = anyio.current_time()
                if size < WRITE_AT_MOST and settings.gather_window:
                    await anyio.sleep(settings.gather_window)  # caught up: let appends gather
                else:
                    # the direct send does not yield when the kernel takes it all: a slave
                    # catching up must leave the broker's other work its turns
                    await anyio.lowlevel.checkpoint()
                continue
            if anyio.current_time() - last_write > settings.heartbeat_interval:
                await self.io.send(encode_transfer_header(offset, 0))
                last_write = anyio.current_time()
                continue  # an append during that send woke no one: look again first
            await master.wait_appended()
