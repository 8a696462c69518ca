"""Hostile frames against a real `rocketmq standalone`: does the log stay quiet and the broker up?

Starts `rocketmq standalone` (mmap store, loopback, its log to a file), reads the request
codes the broker and name server register from `rocketmq plugins list --json`, and sends
mutated requests for all of them (rocketmq_core.testing.frame_fuzz: ints beyond
int32/int64, non-numbers, huge strings, bad UTF-8 in headers; deeply nested, mistyped,
cut-short, bad-UTF-8, huge and random bodies) over TCP, one at a time, reconnecting when
the broker closes a connection (a header that is not UTF-8 breaks the stream). Then
counts the tracebacks in the broker's log and its bytes per frame, and checks that the
broker still answers a well-formed send. Prints a table, writes JSON.

    python benchmarks/fuzz_frames.py                  # 100,000 frames, seed 0
    python benchmarks/fuzz_frames.py --frames 5000 --seed 7
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loadgen import machine, write_results

from rocketmq_core.errors import RemoteProtocolError
from rocketmq_core.protocol.codec import FrameDecoder, encode_command
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.testing.frame_fuzz import FrameMutator

READY = "rocketmq standalone ready"
TRACEBACK = "Traceback (most recent call last)"
REPLY_TIMEOUT = 10.0


def registered_codes() -> dict[str, list[int]]:
    """The codes `rocketmq plugins list` shows, by server ("broker", "namesrv")."""
    listing = subprocess.run(
        [sys.executable, "-m", "rocketmq_core.cli", "plugins", "list", "--json"],
        capture_output=True,
        check=True,
        text=True,
    )
    codes: dict[str, set[int]] = collections.defaultdict(set)
    for plugin in json.loads(listing.stdout):
        for entry in plugin.get("registered", {}).get("processor", []):
            server, name = entry.split(":", 1)
            codes[server].add(int(RequestCode[name]))
    return {server: sorted(server_codes) for server, server_codes in codes.items()}


def start_standalone(scratch: Path, log_path: Path) -> tuple[subprocess.Popen, str, str]:
    config = scratch / "broker.conf"
    config.write_text(f"storePathRootDir={scratch}/store\nlistenPort=0\n")
    log = log_path.open("w")
    command = [sys.executable, "-m", "rocketmq_core.cli", "standalone", "-c", str(config)]
    process = subprocess.Popen(
        [*command, "--namesrv-listen", "127.0.0.1:0"], stderr=log, stdout=log
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for line in log_path.read_text().splitlines():
            if READY in line:
                namesrv = line.split("name server ", 1)[1].split(",", 1)[0]
                broker = line.split("broker ", 1)[1].split(" ", 1)[0]
                return process, namesrv, broker
        if process.poll() is not None:
            raise SystemExit(f"rocketmq standalone exited: see {log_path}")
        time.sleep(0.05)
    process.kill()
    raise SystemExit("rocketmq standalone did not start within 30 s")


class Peer:
    """One blocking connection, reopened whenever the server closes it."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.address = (host, int(port))
        self.sock: socket.socket | None = None
        self.decoder = FrameDecoder()
        self.reconnects = 0

    def ask(self, frame: bytes, opaque: int) -> int | None:
        """Send ``frame``; the response code, or None when the server closed the stream."""
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=REPLY_TIMEOUT)
            self.decoder = FrameDecoder()
            self.reconnects += 1
        try:
            self.sock.sendall(frame)
            while True:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    raise ConnectionResetError
                for command in self.decoder.feed(chunk):
                    if command.opaque == opaque:
                        return command.code
        except (OSError, RemoteProtocolError):
            self.sock.close()
            self.sock = None
            return None


def code_name(code: int | None) -> str:
    if code is None:
        return "closed"
    try:
        return ResponseCode(code).name
    except ValueError:
        return str(code)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--label", default="", help="a name for this run in the JSON")
    parser.add_argument("--output", default="benchmarks/results/fuzz_frames.json")
    parser.add_argument("--keep-log", help="copy the broker's log here")
    args = parser.parse_args()
    codes = registered_codes()
    with tempfile.TemporaryDirectory(prefix="fuzz-frames-") as scratch:
        log_path = Path(scratch) / "broker.log"
        process, namesrv, broker = start_standalone(Path(scratch), log_path)
        try:
            log_before = log_path.stat().st_size
            peers = {"broker": Peer(broker), "namesrv": Peer(namesrv)}
            server_of = {code: server for server in codes for code in codes[server]}
            answers: collections.Counter[str] = collections.Counter()
            mutator = FrameMutator(sorted(server_of), args.seed)
            started = time.perf_counter()
            for case in mutator.cases(args.frames):
                peer = peers[server_of[case.command.code]]
                answers[code_name(peer.ask(case.frame(), case.command.opaque))] += 1
            elapsed = time.perf_counter() - started
            time.sleep(0.5)  # let the last log lines reach the file
            log_text = log_path.read_text(errors="replace")
            log_bytes = log_path.stat().st_size - log_before
            runtime_info = encode_command(RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO))
            final = Peer(broker).ask(runtime_info, 0)
            alive = process.poll() is None and final == ResponseCode.SUCCESS
        finally:
            process.terminate()
            process.wait(20)
            if args.keep_log:
                shutil.copyfile(log_path, args.keep_log)
    result = {
        "label": args.label,
        "seed": args.seed,
        "codes": len(server_of),
        "frames_sent": args.frames,
        "seconds": round(elapsed, 1),
        "tracebacks": log_text.count(TRACEBACK),
        "log_bytes": log_bytes,
        "log_bytes_per_frame": round(log_bytes / args.frames, 2),
        "reconnects": sum(peer.reconnects - 1 for peer in peers.values()),
        "broker_alive": alive,
        "answers": dict(answers.most_common()),
    }
    print(f"{'frames sent':<22}{result['frames_sent']:>12,}")
    print(f"{'request codes':<22}{result['codes']:>12}")
    print(f"{'seconds':<22}{result['seconds']:>12}")
    print(f"{'tracebacks':<22}{result['tracebacks']:>12,}")
    print(f"{'log bytes':<22}{result['log_bytes']:>12,}")
    print(f"{'log bytes per frame':<22}{result['log_bytes_per_frame']:>12}")
    print(f"{'reconnects':<22}{result['reconnects']:>12,}")
    print(f"{'broker alive':<22}{alive!s:>12}")
    for name, count in answers.most_common():
        print(f"  answered {name:<28}{count:>10,}")
    write_results(args.output, {"benchmark": "fuzz_frames", **machine()}, [result])
    return 0 if alive else 1


if __name__ == "__main__":
    sys.exit(main())
