"""The TLS front's relay (tls_front.py) on its own, with a plain TCP server standing in
for grpc.aio behind it: what a slow backend does to the client, and what a client does
that leaves."""

from __future__ import annotations

import hashlib
import socket
import threading
import time

import anyio
import pytest
from rocketmq_proxy_grpc.tls_front import TlsFront
from rocketmq_transport_tcp import TcpTransport
from test_grpc_tls import Pki, server_tls

from rocketmq_core.remoting.transport import TlsMode

CHUNK = 64 << 10


def _most(setting: str) -> int:
    """The largest buffer a TCP socket may grow to (the third of tcp_rmem/tcp_wmem)."""
    return int(open(f"/proc/sys/net/ipv4/{setting}").read().split()[2])


# more than the kernel buffers on the way can hold (client send, relay receive and send,
# backend receive), so that flow control, not the kernel, is what holds the client
TOTAL = max(128 << 20, 4 * (_most("tcp_rmem") + _most("tcp_wmem"))) // CHUNK * CHUNK


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return Pki(tmp_path_factory.mktemp("pki"))


class Writer(threading.Thread):
    """A plain client (the port is permissive) writing TOTAL bytes, counting as it goes."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.written = 0
        self.digest = hashlib.sha256()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            with socket.create_connection(("127.0.0.1", self.port)) as client:
                for index in range(TOTAL // CHUNK):
                    chunk = index.to_bytes(8, "big") * (CHUNK // 8)
                    client.sendall(chunk)
                    self.digest.update(chunk)
                    self.written += len(chunk)
                client.shutdown(socket.SHUT_WR)
                client.recv(1)  # until the relay closes
        except BaseException as exc:
            self.failure = exc


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the relay is asyncio's
async def test_a_backend_that_reads_nothing_holds_the_client_back(pki, anyio_backend):
    """The relay reads from the client no faster than the backend takes: what the client
    gets written while the backend reads nothing is what kernel buffers hold, not all of
    it in the relay's memory; once the backend reads, every byte arrives, in order."""
    backend = Reader()
    backend.start()
    front = TlsFront(TcpTransport(), server_tls(pki, TlsMode.PERMISSIVE))
    async with anyio.create_task_group() as servers:
        async with anyio.create_task_group() as relays:
            address = await servers.start(front.serve, "127.0.0.1", 0, backend.port, relays)
            writer = Writer(int(address.rpartition(":")[2]))
            writer.start()
            # the client writes until the buffers on the way are full, then waits
            held_at, since = -1, time.monotonic()
            while time.monotonic() - since < 1.0:
                await anyio.sleep(0.1)
                if writer.written != held_at:
                    held_at, since = writer.written, time.monotonic()
            assert writer.failure is None
            assert 0 < held_at < TOTAL // 2, f"{held_at} of {TOTAL} bytes written"
            backend.reading.set()
            await anyio.to_thread.run_sync(backend.join, 60)
            await anyio.to_thread.run_sync(writer.join, 10)
            assert writer.failure is None and backend.failure is None
            assert backend.received == TOTAL
            assert backend.digest.digest() == writer.digest.digest()
            front.stop_accepting()
        servers.cancel_scope.cancel()


class Reader(threading.Thread):
    """The stand-in for grpc.aio: a plain socket that reads nothing until ``reading``
    (an event loop's stream would read ahead into memory of its own)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.reading = threading.Event()
        self.received = 0
        self.digest = hashlib.sha256()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            with self.listener, self.listener.accept()[0] as relayed:
                self.reading.wait(60)
                while chunk := relayed.recv(1 << 20):
                    self.digest.update(chunk)
                    self.received += len(chunk)
        except BaseException as exc:
            self.failure = exc


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_client_gone_before_its_loopback_twin_connects_leaves_no_relay(pki, anyio_backend):
    """A client that leaves while the relay still connects to the backend (here: the
    backend's accept queue is full, so the connect waits for a SYN retry): once the
    connect is done, the relay hands over what the client sent, meets its end and closes
    the loopback connection; nothing stays noted. (The client's side reads nothing until
    then, so its close is seen after the join.)"""
    backend = socket.create_server(("127.0.0.1", 0), backlog=0)
    filler = socket.create_connection(backend.getsockname())  # the queue's one place
    front = TlsFront(TcpTransport(), server_tls(pki, TlsMode.PERMISSIVE))
    try:
        async with anyio.create_task_group() as servers:
            async with anyio.create_task_group() as relays:
                address = await servers.start(
                    front.serve, "127.0.0.1", 0, backend.getsockname()[1], relays
                )
                client = socket.create_connection(("127.0.0.1", int(address.rpartition(":")[2])))
                client.sendall(b"PRI * HTTP/2.0")  # the first bytes a gRPC client sends
                await anyio.sleep(0.3)  # the relay has taken it and waits on its connect
                client.close()
                backend.settimeout(30)  # a relay that never connects fails the test
                backend.accept()[0].close()  # the filler's place frees: the retry gets in
                relayed, _ = await anyio.to_thread.run_sync(backend.accept)
                with relayed:
                    relayed.settimeout(30)
                    await anyio.to_thread.run_sync(read_to_the_end, relayed)
                with anyio.fail_after(10):
                    while front.relayed:
                        await anyio.sleep(0.05)
                front.stop_accepting()
            servers.cancel_scope.cancel()
    finally:
        filler.close()
        backend.close()


def read_to_the_end(connection: socket.socket) -> None:
    """Until the peer closes: what the client sent may come first."""
    try:
        while connection.recv(1 << 16):
            pass
    except ConnectionResetError:
        pass  # aborted: the relay ends a connection nobody is behind that way
