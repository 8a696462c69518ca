"""Single sends at a few in-flight counts: what one request costs the broker when a
client sends them one at a time, against many at once; with the connection's direct
socket path and with anyio's stream calls (ROCKETMQ_DIRECT_SOCKET_IO=0), in one run.

Two ``rocketmq standalone`` (mmap store, async flush, temp dirs) run pinned to
``--server-core``, one with each path; only one is loaded at a time. The C load client
(benchmarks/loadgen_c/rocketmq_load.c) sends SEND_MESSAGE_V2 of 1 KiB bodies pinned to
``--client-core``, ``--inflight`` requests outstanding, for ``--seconds`` after
``--warmup``; the rows alternate between the brokers, ``--rounds`` times, and the table
gives medians: the rate, p50 and p99 of send -> answer, and the broker's CPU per message.
After each row the broker's per-queue counts must equal what the client saw
acknowledged, or the run exits 1.

With ``--flush sync`` both brokers run SYNC_FLUSH: every send is answered once a group
commit (fdatasync) covers it.

    python benchmarks/inflight_sweep.py
    python benchmarks/inflight_sweep.py --inflight 1,4 --rounds 5 --seconds 3
    python benchmarks/inflight_sweep.py --flush sync --inflight 16,64
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import SimpleNamespace

from broker_send import start_standalone
from loadgen import build_c_load_client, machine, write_results
from vs_nats import Ours

PATHS = {"direct": "1", "anyio": "0"}  # ROCKETMQ_DIRECT_SOCKET_IO of each broker
FLUSH_TYPES = {"async": "ASYNC_FLUSH", "sync": "SYNC_FLUSH"}


@contextmanager
def standalone(
    scratch: Path, path: str, core: int, c_binary: Path, checks: list, flush: str = "async"
):
    directory = scratch / path
    directory.mkdir()
    env = {**os.environ, "ROCKETMQ_DIRECT_SOCKET_IO": PATHS[path]}
    settings = f"flushDiskType={FLUSH_TYPES[flush]}\n"  # the later line of the key wins
    process, namesrv, broker = start_standalone(directory, core, settings=settings, env=env)
    try:
        yield Ours(c_binary, broker, namesrv, process.pid, core, checks)
    finally:
        process.terminate()
        process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inflight", default="1,4,16,64")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--server-core", type=int, default=1)
    parser.add_argument("--client-core", type=int, default=0)
    parser.add_argument("--flush", choices=sorted(FLUSH_TYPES), default="async")
    parser.add_argument("--output", default=None, help="default results/inflight_sweep.json")
    args = parser.parse_args()
    suffix = "" if args.flush == "async" else f"_{args.flush}_flush"
    output = args.output or f"benchmarks/results/inflight_sweep{suffix}.json"
    counts = [int(count) for count in args.inflight.split(",")]
    os.sched_setaffinity(0, {args.client_core})
    checks: list[dict] = []
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="inflight-") as name, ExitStack() as servers:
        scratch = Path(name)
        c_binary = build_c_load_client(scratch)
        brokers = {
            path: servers.enter_context(
                standalone(scratch, path, args.server_core, c_binary, checks, args.flush)
            )
            for path in PATHS
        }
        timing = SimpleNamespace(seconds=args.seconds, warmup=args.warmup)
        for round_number in range(1, args.rounds + 1):
            for inflight in counts:
                order = list(PATHS) if round_number % 2 else list(reversed(PATHS))
                for path in order:
                    topic = f"Sweep_{path}_{inflight}_{round_number}"
                    result = brokers[path].send("single", topic, inflight, timing)
                    rows.append({"path": path, "inflight": inflight, "round": round_number}
                                | {key: result.get(key) for key in (
                                    "messages_per_s", "p50_us", "p99_us",
                                    "server_cpu_us_per_msg", "client_cpu_us_per_msg")})  # fmt: skip
                    print(
                        f"round {round_number} {path:>6} {inflight:>3} in flight:"
                        f" {result['messages_per_s']:>9,.0f} msg/s,"
                        f" broker {result['server_cpu_us_per_msg']} us/msg",
                        file=sys.stderr,
                    )
    table = summarize(rows, counts)
    print(
        f"inflight_sweep: C load client (core {args.client_core}) -> rocketmq standalone"
        f" x2 (core {args.server_core}, mmap, {args.flush} flush), SEND_MESSAGE_V2 of 1 KiB;"
        f" {args.seconds:g} s per row after {args.warmup:g} s; {args.rounds} rounds; medians"
    )
    print(
        f"{'in flight':>9} | {'direct msg/s':>12} {'p50 us':>7} {'p99 us':>7} {'us/msg':>7}"
        f" | {'anyio msg/s':>11} {'p50 us':>7} {'p99 us':>7} {'us/msg':>7} | broker CPU ratio"
    )
    for entry in table:
        direct, anyio_ = entry["direct"], entry["anyio"]
        print(
            f"{entry['inflight']:>9} | {direct['messages_per_s']:>12,.0f}"
            f" {direct['p50_us']:>7.0f} {direct['p99_us']:>7.0f}"
            f" {direct['server_cpu_us_per_msg']:>7.1f} | {anyio_['messages_per_s']:>11,.0f}"
            f" {anyio_['p50_us']:>7.0f} {anyio_['p99_us']:>7.0f}"
            f" {anyio_['server_cpu_us_per_msg']:>7.1f} | {entry['cpu_ratio']:.2f}"
        )
    failed = [check for check in checks if not check["equal"]]
    for check in failed:
        print(f"stored != acknowledged for {check['topic']}: {check}")
    setup = {
        "benchmark": "inflight_sweep",
        "server_core": args.server_core,
        "client_core": args.client_core,
        "seconds": args.seconds,
        "warmup": args.warmup,
        "rounds": args.rounds,
        "flush": args.flush,
        "body_bytes": 1024,
        "loadavg": os.getloadavg(),
        **machine(),
    }
    write_results(output, setup, [*table, *rows])
    return 1 if failed else 0


def summarize(rows: list[dict], counts: list[int]) -> list[dict]:
    """Per in-flight count, each path's medians, and direct's CPU per message / anyio's."""
    table = []
    for inflight in counts:
        entry: dict = {"inflight": inflight}
        for path in PATHS:
            mine = [row for row in rows if row["path"] == path and row["inflight"] == inflight]
            entry[path] = {
                key: statistics.median(row[key] for row in mine if row[key] is not None)
                for key in ("messages_per_s", "p50_us", "p99_us", "server_cpu_us_per_msg")
            }
        entry["cpu_ratio"] = round(
            entry["direct"]["server_cpu_us_per_msg"] / entry["anyio"]["server_cpu_us_per_msg"], 3
        )
        table.append(entry)
    return table


if __name__ == "__main__":
    sys.exit(main())
