"""Clients that hoard connections or memory cannot stop ``rocketmq standalone`` (issue 27).

Short versions of benchmarks/hostile_clients.py: a real broker in a child process (under
``prlimit`` where a test needs a low open-files limit), real sockets, and the broker's
RSS read from /proc.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocketmq_core.protocol.codec import MAX_FRAME_LENGTH, FrameDecoder, encode_command
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand

from .wire import pull_request, send_request

READY = re.compile(r"rocketmq standalone ready: name server \S+, broker (\S+):(\d+)")
MiB = 1024 * 1024


class Standalone:
    """``rocketmq standalone`` in a child process; its log goes to a file."""

    def __init__(self, tmp_path: Path, conf: str = "", nofile: int | None = None) -> None:
        config = tmp_path / "broker.conf"
        config.write_text(f"listenPort=0\nstorePathRootDir={tmp_path / 'store'}\n{conf}")
        command = [sys.executable, "-m", "rocketmq_core.cli", "standalone", "-c", str(config)]
        command += ["--namesrv-listen", "127.0.0.1:0"]
        if nofile is not None:
            command = ["prlimit", f"--nofile={nofile}:{nofile}", *command]
        self.log = tmp_path / "broker.log"
        with open(self.log, "w") as log:
            env = {**os.environ, "HOME": str(tmp_path)}
            self.process = subprocess.Popen(command, stderr=log, env=env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.process.poll() is None:
            match = READY.search(self.log.read_text())
            if match:
                self.address = (match.group(1), int(match.group(2)))
                return
            time.sleep(0.05)
        self.process.kill()
        raise AssertionError(f"the broker did not start:\n{self.log.read_text()}")

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")

    def call(self, request: RemotingCommand) -> RemotingCommand:
        with socket.create_connection(self.address, timeout=10) as sock:
            sock.sendall(encode_command(request))
            decoder = FrameDecoder()
            while True:
                chunk = sock.recv(1 << 20)
                assert chunk, "the broker closed the connection"
                commands = decoder.feed(chunk)
                if commands:
                    return commands[0]

    def answers(self) -> bool:
        try:
            response = self.call(RemotingCommand.request(RequestCode.GET_BROKER_CONFIG))
        except (OSError, AssertionError):  # refused: still at its connection limit
            return False
        return response.code == ResponseCode.SUCCESS

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def start(tmp_path):
    brokers = []

    def started(conf: str = "", nofile: int | None = None) -> Standalone:
        brokers.append(Standalone(tmp_path, conf, nofile))
        return brokers[-1]

    yield started
    for broker in brokers:
        broker.stop()


@pytest.fixture(autouse=True)
def enough_descriptors_here():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 2048)), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def wait_for(condition, timeout: float = 30.0) -> bool:
    """Whether ``condition()`` holds within ``timeout`` seconds (generous: CI machines are
    small and shared), checked every 50 ms."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def open_count(sockets: list[socket.socket]) -> int:
    return sum(not closed_by_peer(sock) for sock in sockets)


def connect(address, count: int) -> list[socket.socket]:
    return [socket.create_connection(address, timeout=5) for _ in range(count)]


def closed_by_peer(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def close_all(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        sock.close()


def test_connections_beyond_the_maximum_are_closed_at_once(start):
    broker = start("serverMaxConnections=20\n")
    sockets = connect(broker.address, 60)
    assert wait_for(lambda: open_count(sockets) <= 20)
    assert open_count(sockets) == 20
    close_all(sockets)
    assert wait_for(broker.answers)
    assert "the maximum (serverMaxConnections)" in broker.log.read_text()


def test_a_low_open_files_limit_caps_connections_and_the_broker_lives(start):
    # the default maximum leaves room for store files below the limit: accept() never fails
    broker = start(nofile=300)
    sockets = connect(broker.address, 400)
    assert wait_for(lambda: open_count(sockets) <= 300 - 256)
    assert open_count(sockets) > 0
    assert broker.process.poll() is None
    close_all(sockets)
    assert wait_for(broker.answers)


def test_accept_failing_at_the_open_files_limit_does_not_stop_the_broker(start):
    broker = start("serverMaxConnections=100000\n", nofile=300)
    sockets = connect(broker.address, 400)  # the backlog takes those it cannot accept
    assert wait_for(lambda: "Too many open files" in broker.log.read_text())
    assert broker.process.poll() is None
    close_all(sockets)
    assert wait_for(broker.answers)  # the backoff is at most a second
    log = broker.log.read_text()
    assert log.count("cannot accept connections: Too many open files") == 1  # rate-limited
    assert "Traceback" not in log


def test_idle_connections_are_closed_after_the_idle_time(start):
    broker = start("serverChannelMaxIdleTimeSeconds=1\n")
    connected = time.monotonic()
    sockets = connect(broker.address, 30)
    assert open_count(sockets) == 30
    assert wait_for(lambda: open_count(sockets) == 0)
    assert time.monotonic() - connected >= 1  # not before the idle time
    close_all(sockets)
    assert broker.answers()


def seed(broker: Standalone) -> None:
    for _ in range(32):
        response = broker.call(send_request(topic="Hoard", body=b"h" * 8192))
        assert response.code == ResponseCode.SUCCESS, response.remark
    answer = broker.call(pull_request(topic="Hoard", suspend=0))
    assert answer.code == ResponseCode.SUCCESS and len(answer.body) > 256 * 1000


def test_clients_that_pull_and_never_read_hold_bounded_memory(start):
    broker = start(f"serverMaxUnsentBytes={64 * MiB}\n")
    seed(broker)
    base = broker.rss_mib()
    frames = encode_command(pull_request(topic="Hoard", suspend=0)) * 64
    sockets = connect(broker.address, 6)
    for sock in sockets:
        sock.setblocking(False)
    peak = base
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        _, writable, _ = select.select([], sockets, [], 0.1)
        for sock in writable:
            with contextlib.suppress(OSError):  # the broker closed a hoarder
                sock.send(frames)
        peak = max(peak, broker.rss_mib())
    # served the whole time: the budget goes to hoarders first, not to everyone
    assert broker.answers()
    assert peak - base < 64 + 150, (base, peak)  # the budget, plus generous slack
    close_all(sockets)
    assert wait_for(lambda: broker.rss_mib() - base < 100), (base, broker.rss_mib())
    assert broker.answers()


def test_unfinished_frames_are_bounded_in_bytes_and_time(start):
    broker = start(
        f"serverMaxIncompleteFrameBytes={48 * MiB}\nserverIncompleteFrameTimeoutSeconds=3\n"
    )
    base = broker.rss_mib()
    prefix = (MAX_FRAME_LENGTH - 4).to_bytes(4, "big") + (20).to_bytes(4, "big")
    sockets = connect(broker.address, 8)
    filler = b"\0" * MiB
    for sock in sockets:
        try:
            sock.sendall(prefix)
            for _ in range(15):
                sock.sendall(filler)
        except OSError:
            pass  # closed by the broker: over the budget
    assert wait_for(lambda: open_count(sockets) <= 3)  # 48 MiB holds three 15 MiB frames
    assert open_count(sockets) >= 1
    assert broker.rss_mib() - base < 48 + 100
    assert wait_for(lambda: open_count(sockets) == 0)  # the stalled frames expire
    close_all(sockets)
    assert broker.answers()
    # what they held goes back to the OS (~15 MiB stayed while the closed streams' unread
    # chunks waited for a full garbage collection)
    assert wait_for(lambda: broker.rss_mib() - base < 8), (base, broker.rss_mib())
    assert "serverIncompleteFrameTimeoutSeconds" in broker.log.read_text()
