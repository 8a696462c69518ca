"""Hostile clients against ``rocketmq standalone``: what they cost the broker, and whether it lives.

Three attacks, each against a fresh broker in a child process (optionally under a
lower open-files limit, set on the child with ``prlimit``):

- idle: open many connections and send nothing. Broker fds and RSS, how many
  connections it keeps, and that it still answers a request.
- pull-flood: connections that pipeline pulls of ~256 KB answers and never read.
  Broker RSS sampled every second, and after the connections close.
- partial-frames: connections that each send 15 MiB of a declared 16 MiB frame, then
  stall. Broker RSS while they hold, and after they close.

    python benchmarks/hostile_clients.py                         # all three, as in issue 27
    python benchmarks/hostile_clients.py --attacks idle --nofile 1024 --connections 2000
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import resource
import select
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from loadgen import machine, write_results

from rocketmq_core.protocol.codec import MAX_FRAME_LENGTH, FrameDecoder, encode_command
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.headers import (
    SEND_V2_NAMES,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)

READY = re.compile(r"rocketmq standalone ready: name server (\S+), broker (\S+)")
TOPIC = "HostileClients"
PULL_BATCH = 32  # messages a pull asks for
MESSAGE_SIZE = 8 * 1024  # so that one pull answers ~256 KB


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return float("nan")


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


@dataclass
class Broker:
    """``rocketmq standalone`` in a child process, started and read until ready."""

    scratch: Path
    nofile: int | None = None
    conf: str = ""
    process: subprocess.Popen = field(init=False)
    address: tuple[str, int] = field(init=False)

    def __post_init__(self) -> None:
        conf = self.scratch / "broker.conf"
        conf.write_text(f"listenPort=0\nstorePathRootDir={self.scratch / 'store'}\n{self.conf}")
        command = [sys.executable, "-m", "rocketmq_core.cli", "standalone", "-c", str(conf)]
        command += ["--namesrv-listen", "127.0.0.1:0"]
        if self.nofile is not None:  # the limit is set on the child alone
            command = ["prlimit", f"--nofile={self.nofile}:{self.nofile}", *command]
        env = {**os.environ, "HOME": str(self.scratch)}
        # the log goes to a file: a pipe nobody reads would stall the broker once full
        self.log_path = self.scratch / "broker.log"
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(command, stderr=log, text=True, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.process.poll() is None:
            match = READY.search(self.log_path.read_text())
            if match:
                host, port = match.group(2).rsplit(":", 1)
                self.address = (host, int(port))
                return
            time.sleep(0.05)
        self.process.kill()
        raise SystemExit(f"the broker did not start: {self.log_path.read_text()[-2000:]}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        """The process runs and answers a request on a new connection."""
        if self.process.poll() is not None:
            return False
        try:
            response = call(self.address, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG))
        except OSError:
            return False
        return response.code == ResponseCode.SUCCESS

    def log_lines(self, text: str) -> int:
        """How many lines of the broker's log contain ``text``."""
        return sum(text in line for line in self.log_path.read_text().splitlines())

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def call(
    address: tuple[str, int], request: RemotingCommand, timeout: float = 10
) -> RemotingCommand:
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.sendall(encode_command(request))
        decoder = FrameDecoder()
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            for command in decoder.feed(chunk):
                return command


def send_request(queue_id: int, body: bytes) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="HostilePG",
        topic=TOPIC,
        default_topic="TBW102",
        default_topic_queue_nums=1,
        queue_id=queue_id,
        sys_flag=0,
        born_timestamp=int(time.time() * 1000),
        flag=0,
        properties="",
    )
    return RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(SEND_V2_NAMES), body
    )


def pull_request() -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumer_group="HostileCG",
        topic=TOPIC,
        queue_id=0,
        queue_offset=0,
        max_msg_nums=PULL_BATCH,
        sys_flag=0x4,
        commit_offset=0,
        suspend_timeout_millis=0,
        sub_version=0,
        subscription="*",
    )
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())


def seed_messages(address: tuple[str, int]) -> int:
    """PULL_BATCH messages in queue 0 of TOPIC: one pull answers them all (~256 KB)."""
    body = b"h" * MESSAGE_SIZE
    for _ in range(PULL_BATCH):
        response = call(address, send_request(0, body))
        assert response.code == ResponseCode.SUCCESS, response
    answer = call(address, pull_request())
    assert answer.code == ResponseCode.SUCCESS, answer
    return len(answer.body)


def peer_closed(sock: socket.socket) -> bool:
    sock.setblocking(False)  # a socket with a timeout would wait that long for the peek
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def raise_own_fd_limit(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(wanted, soft)), hard))


def connect_many(address: tuple[str, int], count: int) -> tuple[list[socket.socket], int]:
    sockets, failed = [], 0
    for _ in range(count):
        try:
            sockets.append(socket.create_connection(address, timeout=5))
        except OSError:
            failed += 1
    return sockets, failed


def attack_idle(broker: Broker, count: int, hold: float) -> dict:
    before = {"rss_mib": rss_mib(broker.pid), "fds": open_fds(broker.pid)}
    sockets, failed = connect_many(broker.address, count)
    time.sleep(hold)
    during = {"rss_mib": rss_mib(broker.pid), "fds": open_fds(broker.pid)}
    kept = sum(not peer_closed(sock) for sock in sockets)
    alive_during = broker.alive()
    for sock in sockets:
        sock.close()
    time.sleep(1)
    return {
        "attack": "idle",
        "connections": count,
        "connect_failed": failed,
        "kept_open_by_broker": kept,
        "rss_before_mib": before["rss_mib"],
        "rss_during_mib": during["rss_mib"],
        "fds_before": before["fds"],
        "fds_during": during["fds"],
        "alive_during": alive_during,
        "alive_after": broker.alive(),
        "exit_code": broker.process.poll(),
    }


def attack_pull_flood(broker: Broker, count: int, seconds: float) -> dict:
    answer_size = seed_messages(broker.address)
    frames = encode_command(pull_request()) * 64
    rss_before = rss_mib(broker.pid)
    sockets, _failed = connect_many(broker.address, count)
    for sock in sockets:
        sock.setblocking(False)
    samples, sent = [], 0
    started = time.monotonic()
    next_sample = started + 1
    while time.monotonic() - started < seconds:
        _, writable, _ = select.select([], sockets, [], 0.1)
        for sock in writable:
            with contextlib.suppress(BlockingIOError, OSError):
                sent += sock.send(frames)
        if time.monotonic() >= next_sample:
            samples.append(rss_mib(broker.pid))
            next_sample += 1
    kept = sum(not peer_closed(sock) for sock in sockets)
    alive_during = broker.alive()
    for sock in sockets:
        sock.close()
    time.sleep(3)
    return {
        "attack": "pull-flood",
        "connections": count,
        "pull_answer_bytes": answer_size,
        "pull_requests_sent": sent // len(encode_command(pull_request())),
        "rss_before_mib": rss_before,
        "rss_samples_mib": samples,
        "rss_peak_mib": max(samples, default=float("nan")),
        "rss_after_close_mib": rss_mib(broker.pid),
        "kept_open_by_broker": kept,
        "alive_during": alive_during,
        "alive_after": broker.alive(),
        "exit_code": broker.process.poll(),
    }


def attack_partial_frames(broker: Broker, count: int, hold: float) -> dict:
    declared = MAX_FRAME_LENGTH - 4  # the largest length the broker accepts
    sent_bytes = 15 * 1024 * 1024
    prefix = declared.to_bytes(4, "big") + (20).to_bytes(4, "big")  # JSON, 20-byte header
    filler = b"\0" * (1 << 20)
    rss_before = rss_mib(broker.pid)
    sockets, _failed = connect_many(broker.address, count)
    refused = 0
    for sock in sockets:
        try:
            sock.sendall(prefix)
            for _ in range(sent_bytes // len(filler)):
                sock.sendall(filler)
        except OSError:
            refused += 1
    samples = []
    for _ in range(int(hold)):
        time.sleep(1)
        samples.append(rss_mib(broker.pid))
    kept = sum(not peer_closed(sock) for sock in sockets)
    alive_during = broker.alive()
    for sock in sockets:
        sock.close()
    time.sleep(3)
    return {
        "attack": "partial-frames",
        "connections": count,
        "sends_refused": refused,
        "rss_before_mib": rss_before,
        "rss_samples_mib": samples,
        "rss_peak_mib": max(samples, default=float("nan")),
        "rss_after_close_mib": rss_mib(broker.pid),
        "kept_open_by_broker": kept,
        "alive_during": alive_during,
        "alive_after": broker.alive(),
        "exit_code": broker.process.poll(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attacks", default="idle,pull-flood,partial-frames")
    parser.add_argument("--connections", type=int, default=0, help="0: each attack's default")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each attack holds")
    parser.add_argument("--nofile", type=int, help="open-files limit of the broker (prlimit)")
    parser.add_argument("--conf", default="", help="more broker.conf lines, ';' between them")
    parser.add_argument("--output", default="benchmarks/results/hostile_clients.json")
    args = parser.parse_args()
    raise_own_fd_limit(4096)
    defaults = {"idle": 2000, "pull-flood": 10, "partial-frames": 30}
    attacks = {
        "idle": lambda broker, n: attack_idle(broker, n, min(args.seconds, 2.0)),
        "pull-flood": lambda broker, n: attack_pull_flood(broker, n, args.seconds),
        "partial-frames": lambda broker, n: attack_partial_frames(broker, n, args.seconds),
    }
    results = []
    for name in args.attacks.split(","):
        with tempfile.TemporaryDirectory() as scratch:
            broker = Broker(Path(scratch), args.nofile, args.conf.replace(";", "\n"))
            try:
                result = attacks[name](broker, args.connections or defaults[name])
            finally:
                broker.stop()
            result["nofile"] = args.nofile
            results.append(result)
    print(f"hostile clients against rocketmq standalone (nofile={args.nofile or 'inherited'})")
    header = ("attack", "conns", "kept", "RSS before", "RSS peak", "RSS after", "fds")
    header += ("answers during", "after")
    print("{:>15} {:>6} {:>6} {:>11} {:>9} {:>10} {:>6} {:>15} {:>6}".format(*header))
    for row in results:
        peak = row.get("rss_peak_mib", row.get("rss_during_mib"))
        print(
            f"{row['attack']:>15} {row['connections']:>6} {row['kept_open_by_broker']:>6}"
            f" {row['rss_before_mib']:>11} {peak:>9} {row.get('rss_after_close_mib', '-'):>10}"
            f" {row.get('fds_during', '-'):>6} {row['alive_during']!s:>15}"
            f" {row['alive_after']!s:>6}"
        )
    write_results(args.output, {"benchmark": "hostile_clients", **machine()}, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
