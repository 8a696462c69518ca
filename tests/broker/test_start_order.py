"""A broker reads no request before it is ready: a client that connects the moment the
port accepts gets its first send stored, never "starting or stopping"."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

from rocketmq_core.protocol.codec import FrameDecoder, encode_command
from rocketmq_core.protocol.codes import ResponseCode
from rocketmq_core.testing.ports import free_port

from .wire import send_request

ATTEMPTS = 3


def connect_the_moment_it_accepts(port: int, process: subprocess.Popen) -> socket.socket:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=30)
        except ConnectionRefusedError:
            assert process.poll() is None, "the broker exited while starting"
    raise AssertionError(f"port {port} never accepted")


def first_answer(sock: socket.socket) -> int:
    decoder = FrameDecoder()
    while True:
        chunk = sock.recv(65536)
        assert chunk, "the broker closed the connection"
        for command in decoder.feed(chunk):
            return command.code


def test_the_first_send_after_the_port_opens_succeeds(tmp_path):
    for attempt in range(ATTEMPTS):
        port = free_port(neighbours=(-2, 1))  # the VIP and HA ports, as the defaults
        config = tmp_path / f"broker-{attempt}.conf"
        config.write_text(f"storePathRootDir={tmp_path}/store-{attempt}\nlistenPort={port}\n")
        command = [sys.executable, "-m", "rocketmq_core.cli", "standalone", "-c", str(config)]
        process = subprocess.Popen(
            [*command, "--namesrv-listen", "127.0.0.1:0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with connect_the_moment_it_accepts(port, process) as sock:
                sock.sendall(encode_command(send_request()))
                assert first_answer(sock) == ResponseCode.SUCCESS
        finally:
            process.terminate()
            process.wait(20)
