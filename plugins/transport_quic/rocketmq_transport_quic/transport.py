"""RocketMQ remoting over QUIC: TLS 1.3 always, ALPN ``rocketmq``, one stream a connection."""

from __future__ import annotations

import logging
import socket
import ssl
from dataclasses import dataclass
from typing import cast

import anyio
from aioquic.buffer import Buffer
from aioquic.quic.configuration import SMALLEST_MAX_DATAGRAM_SIZE, QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.packet import (
    QuicPacketType,
    encode_quic_version_negotiation,
    pull_quic_header,
)
from anyio.abc import (
    ByteStream,
    IPSockAddrType,
    SocketAttribute,
    TaskGroup,
    TaskStatus,
    UDPSocket,
)

from rocketmq_core.client.config import TRUST_CERT_PATH_VARIABLE
from rocketmq_core.errors import ConfigError
from rocketmq_core.remoting.transport import (
    StreamHandler,
    TlsOptions,
    format_address,
    listen_error,
)

from .channel import Address, ClientChannel, DatagramOutbox, ServerChannel

log = logging.getLogger("rocketmq.transport.quic")

ALPN = "rocketmq"
# a stopped listener keeps serving its connections this long for them to drain
DRAIN_LIMIT = 60.0
DRAIN_POLL = 0.02
RECEIVE_SIZE = 65536  # the largest UDP payload


@dataclass(frozen=True)
class QuicSettings:
    """What both ends of a connection agree on besides TLS."""

    # 1350 bytes fit any path with a 1400-byte MTU (tunnels, IPv6); aioquic does no
    # path-MTU discovery, so a larger value would be dropped on such paths
    max_datagram_size: int = 1350
    # RocketMQ's server closes channels idle for 120 s; consumers heartbeat every 30 s
    idle_timeout: float = 120.0
    # the flow-control windows: a whole 16 MiB frame may be in flight
    window: int = 16 * 1024 * 1024

    def configuration(self, *, is_client: bool) -> QuicConfiguration:
        return QuicConfiguration(
            is_client=is_client,
            alpn_protocols=[ALPN],
            idle_timeout=self.idle_timeout,
            max_datagram_size=self.max_datagram_size,
            max_data=self.window,
            max_stream_data=self.window,
        )


class QuicTransport:
    """Listener and connector over QUIC (aioquic), on asyncio and trio alike."""

    name = "quic"

    def __init__(self, settings: QuicSettings | None = None) -> None:
        self.settings = settings or QuicSettings()

    async def listen(
        self,
        host: str,
        port: int,
        handler: StreamHandler,
        *,
        tls: TlsOptions | None = None,
        task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        configuration = self.server_configuration(tls)
        try:
            socket = await anyio.create_udp_socket(local_host=host, local_port=port)
        except OSError as exc:
            raise listen_error(host, port, exc) from None
        # an IP socket's address: (host, port) or (host, port, flowinfo, scope id)
        bound = cast("IPSockAddrType", socket.extra(SocketAttribute.local_address))
        bound_host, bound_port = bound[:2]
        async with socket, anyio.create_task_group() as task_group:
            listener = QuicListener(socket, configuration, task_group, handler)
            task_status.started(format_address(bound_host, bound_port))
            try:
                await listener.serve()
            finally:
                with anyio.CancelScope(shield=True):
                    await listener.drain()

    async def connect(self, host: str, port: int, *, tls: TlsOptions | None = None) -> ByteStream:
        configuration = self.client_configuration(host, tls)
        socket = await ConnectedDatagramSocket.connect(host, port)
        try:
            quic = QuicConnection(configuration=configuration)
            quic.connect(socket.remote_address, now=anyio.current_time())

            async def send(data: bytes, _address: Address) -> None:
                await socket.send(data)

            channel = ClientChannel(
                quic,
                DatagramOutbox(send),
                stream_id=quic.get_next_available_stream_id(),
                local_address=socket.local_address,
                remote_address=socket.remote_address,
                receive=socket.receive,
                close_socket=socket.aclose,
            )
            await channel.transmit()
            while not channel.handshake_complete:
                if channel.terminated is not None:
                    address = format_address(host, port)
                    hint = ""
                    if "certificate" in channel.terminated:
                        hint = (
                            " (trust the server's CA file: TlsOptions(ca_file=...), the"
                            f" {TRUST_CERT_PATH_VARIABLE} environment variable, or the"
                            " command line's --tls-ca FILE)"
                        )
                    raise ConnectionError(
                        f"QUIC handshake with {address}: {channel.terminated}{hint}"
                    )
                await channel.wait_progress()
            return channel
        except BaseException:
            await socket.aclose()
            raise

    def server_configuration(self, tls: TlsOptions | None) -> QuicConfiguration:
        if tls is None or not tls.cert_file or not tls.key_file:
            raise ConfigError(
                "QUIC always encrypts: a quic listener needs a certificate file and a key"
                " file (`rocketmq certs create` writes a pair for development)"
            )
        configuration = self.settings.configuration(is_client=False)
        try:
            configuration.load_cert_chain(tls.cert_file, tls.key_file)
        except (OSError, ValueError, TypeError) as exc:
            raise ConfigError(
                f"cannot load TLS certificate {tls.cert_file!r} / key {tls.key_file!r}: {exc}"
            ) from exc
        return configuration

    def client_configuration(self, host: str, tls: TlsOptions | None) -> QuicConfiguration:
        tls = tls or TlsOptions()
        tls.check_client_files()
        configuration = self.settings.configuration(is_client=True)
        configuration.server_name = tls.server_hostname or host
        configuration.verify_mode = ssl.CERT_REQUIRED if tls.verify else ssl.CERT_NONE
        configuration.cafile = tls.ca_file
        if tls.cert_file and tls.key_file:
            configuration.load_cert_chain(tls.cert_file, tls.key_file)
        return configuration


class QuicListener:
    """Reads one UDP socket and routes each datagram to its connection by connection id."""

    def __init__(
        self,
        socket: UDPSocket,
        configuration: QuicConfiguration,
        task_group: TaskGroup,
        handler: StreamHandler,
    ) -> None:
        self._socket = socket
        self._configuration = configuration
        self._task_group = task_group
        self._handler = handler
        self._local_address = socket.extra(SocketAttribute.local_address)
        self._by_connection_id: dict[bytes, ServerChannel] = {}
        self._timers: dict[ServerChannel, anyio.CancelScope] = {}
        self._handed_over: set[ServerChannel] = set()
        self._accepting = True

        async def send(data: bytes, address: Address) -> None:
            await socket.send((data, address))

        self._outbox = DatagramOutbox(send)

    async def serve(self) -> None:
        async for data, address in self._socket:
            await self._datagram_received(data, address)

    async def drain(self) -> None:
        """Stopped: accept no one, serve the open connections until they close (bounded)."""
        self._accepting = False
        async with anyio.create_task_group() as reading:
            reading.start_soon(self.serve)
            for channel in list(self._timers):
                if channel not in self._handed_over:  # mid-handshake: nothing to drain
                    await channel.aclose()
            with anyio.move_on_after(DRAIN_LIMIT) as limit:
                while any(channel.terminated is None for channel in self._timers):
                    await anyio.sleep(DRAIN_POLL)
            if limit.cancelled_caught:
                still_open = [channel for channel in self._timers if channel.terminated is None]
                log.warning(
                    "closing %d QUIC connections still open after stopping", len(still_open)
                )
                async with anyio.create_task_group() as closing:
                    for channel in still_open:
                        closing.start_soon(channel.aclose)
            reading.cancel_scope.cancel()
        for scope in self._timers.values():
            scope.cancel()

    async def _datagram_received(self, data: bytes, address: Address) -> None:
        try:
            header = pull_quic_header(
                Buffer(data=data), host_cid_length=self._configuration.connection_id_length
            )
        except ValueError:
            return  # not QUIC
        supported = self._configuration.supported_versions
        if (
            header.version is not None
            and header.version not in supported
            and header.packet_type != QuicPacketType.VERSION_NEGOTIATION
        ):
            negotiation = encode_quic_version_negotiation(
                source_cid=header.destination_cid,
                destination_cid=header.source_cid,
                supported_versions=supported,
            )
            await self._outbox.send([(negotiation, address)])
            return
        channel = self._by_connection_id.get(header.destination_cid)
        if channel is None:
            if not (
                self._accepting
                and header.packet_type == QuicPacketType.INITIAL
                and len(data) >= SMALLEST_MAX_DATAGRAM_SIZE
            ):
                return
            channel = self._accept(header.destination_cid, address)
        await channel.datagram_received(data, address)
        if channel.handshake_complete and channel not in self._handed_over:
            self._handed_over.add(channel)
            self._task_group.start_soon(self._handler, channel)

    def _accept(self, original_connection_id: bytes, address: Address) -> ServerChannel:
        quic = QuicConnection(
            configuration=self._configuration,
            original_destination_connection_id=original_connection_id,
        )
        channel = ServerChannel(
            quic,
            self._outbox,
            stream_id=0,  # the first stream a client opens
            local_address=self._local_address,
            remote_address=address,
            on_connection_id=self._route,
        )
        self._by_connection_id[original_connection_id] = channel
        self._by_connection_id[quic.host_cid] = channel
        self._task_group.start_soon(self._run_timer, channel)
        return channel

    def _route(self, connection_id: bytes, channel: ServerChannel | None) -> None:
        if channel is None:
            self._by_connection_id.pop(connection_id, None)
        else:
            self._by_connection_id[connection_id] = channel

    async def _run_timer(self, channel: ServerChannel) -> None:
        # shielded: a stopped listener keeps its connections' timers until they drain
        with anyio.CancelScope(shield=True) as scope:
            self._timers[channel] = scope
            try:
                await channel.run_timer()
            finally:
                del self._timers[channel]
                self._handed_over.discard(channel)
                for connection_id, owner in list(self._by_connection_id.items()):
                    if owner is channel:
                        del self._by_connection_id[connection_id]


class ConnectedDatagramSocket:
    """A client's UDP socket, connected to its server, read and written through anyio.

    A plain socket rather than anyio's connected UDP socket: on asyncio, that one keeps
    the ICMP "port unreachable" to itself, and a connect to a stopped server would wait
    for its timeout instead of failing at once as it does on trio and over TCP.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._socket = sock
        self.local_address = sock.getsockname()
        self.remote_address = sock.getpeername()
        self._closed = False

    @classmethod
    async def connect(cls, host: str, port: int) -> ConnectedDatagramSocket:
        family, kind, protocol, _name, address = (
            await anyio.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
        )[0]
        sock = socket.socket(family, kind, protocol)
        try:
            sock.setblocking(False)
            sock.connect(address)  # no packet: it fixes the peer and picks a local port
        except BaseException:
            sock.close()
            raise
        return cls(sock)

    async def receive(self) -> bytes:
        while True:
            try:
                return self._socket.recv(RECEIVE_SIZE)
            except BlockingIOError:
                await anyio.wait_readable(self._socket)

    async def send(self, data: bytes) -> None:
        while True:
            try:
                self._socket.send(data)
                return
            except BlockingIOError:
                await anyio.wait_writable(self._socket)

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            anyio.notify_closing(self._socket)  # wakes a reader waiting on it
            self._socket.close()
