"""What a restart of the mmap store costs with many idle queues: ``--topics`` topics
(10,000) of one queue, ``--messages`` small messages each, then a clean stop and
``--restarts`` starts and clean stops (each in a fresh process, as a broker restarts).

For the fill and each start it reports: the time the store took to open, the bytes the
store takes on disk after the stop (st_blocks, so sparse files count as what they hold),
the descriptors and memory mappings the process holds with the store open, and RSS.
A restart should write nothing: disk use stays as it was after the fill.

    python benchmarks/restart_many_topics.py
    python benchmarks/restart_many_topics.py --topics 2000 --restarts 1
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import anyio
import orjson
from loadgen import machine, pinned, write_results

from rocketmq_core.store.api import MessageToStore, StoreConfig
from rocketmq_core.store.loader import create_store

BODY = b"x" * 100


def disk_bytes(root: str) -> int:
    """Bytes the files under ``root`` take on disk (allocated blocks, not sizes)."""
    total = 0
    for directory, _dirs, names in os.walk(root):
        for name in names:
            total += os.lstat(os.path.join(directory, name)).st_blocks * 512
    return total


def held() -> dict:
    """Descriptors, mappings and resident memory of this process, now."""
    with open("/proc/self/maps", "rb") as maps:
        mappings = sum(1 for _ in maps)
    with open("/proc/self/status") as status:
        rss_kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return {
        "fds": len(os.listdir("/proc/self/fd")),
        "mappings": mappings,
        "rss_mib": round(rss_kib / 1024, 1),
    }


async def run_phase(args: argparse.Namespace) -> dict:
    config = StoreConfig(
        root_dir=args.root, flush="async", commit_log_file_size=args.commit_log_mib << 20
    )
    store = create_store("mmap", config)
    started = time.perf_counter()
    await store.open()
    row: dict = {"phase": args.worker, "open_s": round(time.perf_counter() - started, 3)}
    if args.worker == "fill":
        started = time.perf_counter()
        for _ in range(args.messages):
            for number in range(args.topics):
                result = await store.put(MessageToStore(f"Topic{number:06d}", 0, BODY))
                if not result.ok:
                    raise SystemExit(f"put failed: {result.status.value}: {result.remark}")
        row["fill_s"] = round(time.perf_counter() - started, 3)
    else:  # the store serves what it had: the last topic's messages are all there
        got = await store.get(f"Topic{args.topics - 1:06d}", 0, 0, args.messages)
        assert len(got.records) == args.messages, got.status
    row["queues"] = sum(len(ids) for ids in store.queues().values())
    row.update(held())
    started = time.perf_counter()
    await store.close()
    row["close_s"] = round(time.perf_counter() - started, 3)
    row["disk_mib"] = round(disk_bytes(args.root) / 2**20, 1)
    return row


def worker(args: argparse.Namespace) -> None:
    result: dict = {}

    async def main() -> None:
        result.update(await run_phase(args))

    anyio.run(main)
    sys.stdout.write(orjson.dumps(result).decode() + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=3, help="per topic")
    parser.add_argument("--restarts", type=int, default=2)
    parser.add_argument("--commit-log-mib", type=int, default=64)
    parser.add_argument("--core", default="0", help="taskset core ('' for none)")
    parser.add_argument("--scratch", default=None, help="directory for the store")
    parser.add_argument("--output", default="benchmarks/results/restart_many_topics.json")
    parser.add_argument("--worker", choices=("fill", "start"), help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return 0
    rows = []
    with tempfile.TemporaryDirectory(dir=args.scratch) as root:
        for phase in ["fill"] + ["start"] * args.restarts:
            command = [
                sys.executable,
                __file__,
                "--worker",
                phase,
                "--root",
                root,
                "--topics",
                str(args.topics),
                "--messages",
                str(args.messages),
                "--commit-log-mib",
                str(args.commit_log_mib),
            ]
            done = subprocess.run(
                pinned(command, args.core or None), capture_output=True, text=True, check=False
            )
            if done.returncode:
                print(done.stderr[-2000:], file=sys.stderr)
                return 1
            rows.append(orjson.loads(done.stdout.strip().splitlines()[-1]))
    print(f"restart with {args.topics:,} topics of one queue, {args.messages} messages each")
    print(
        f"{'phase':<8}{'open s':>8}{'close s':>9}{'queues':>8}{'fds':>7}{'maps':>8}"
        f"{'RSS MiB':>9}{'disk MiB after':>16}"
    )
    for row in rows:
        print(
            f"{row['phase']:<8}{row['open_s']:>8}{row['close_s']:>9}{row['queues']:>8,}"
            f"{row['fds']:>7,}{row['mappings']:>8,}{row['rss_mib']:>9}{row['disk_mib']:>16,}"
        )
    setup = {
        **machine(),
        "topics": args.topics,
        "messages_each": args.messages,
        "commit_log_mib": args.commit_log_mib,
    }
    write_results(args.output, setup, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
