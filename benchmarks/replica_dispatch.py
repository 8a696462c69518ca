"""Records per second a slave's mmap store appends from its master's CommitLog bytes
(``ReplicaWriter.append``: write the bytes, then dispatch each record to the consume
queue and the index), with each way of reading a record's DispatchRequest:

- decode: the whole record decoded (body copied, every property parsed), then the
  request built from it: what the store did before record_requests.py;
- read, Python: record_requests.read_python, the fields read in place;
- read, compiled: record_requests.read_request (_append.dispatch_request).

The master holds ``--messages`` 1 KiB messages with the properties a Java producer sets
(TAGS, KEYS, UNIQ_KEY, WAIT) over 8 queues; the slave takes them in 32 KiB reads, as
the HA connection sends them, and the second half is timed: the first warms the slave's
files up (a fresh index file faults in a page for nearly every key, which would swamp
what is measured). The variants run interleaved, ``--rounds`` times each, on a
fresh slave store every time, in one process pinned to ``--core`` (the machine may be
shared: compare the ratios within one run, not figures across runs). Time is the
appending thread's CPU time: on a shared core, wall time mostly measures the neighbours.
Prints a table, writes JSON.

    python benchmarks/replica_dispatch.py
    python benchmarks/replica_dispatch.py --messages 50000 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from loadgen import machine, pinned, write_results
from rocketmq_store_mmap.record_requests import read_python, read_request
from rocketmq_store_mmap.recovery import dispatch_request
from rocketmq_store_mmap.replication import ReplicaWriter

from rocketmq_core.protocol.ha import DEFAULT_TRANSFER_BATCH
from rocketmq_core.protocol.message import decode_record, encode_properties
from rocketmq_core.store.api import MessageToStore, StoreConfig
from rocketmq_core.store.loader import create_store

TOPIC = "BenchmarkTopic"
QUEUES = 8
BODY = bytes(range(256)) * 4  # 1 KiB
FILE_SIZE = 256 << 20
WARM_UP_PAUSE = 1.0  # s


def decoded(buffer, position: int):
    return dispatch_request(decode_record(buffer, position), ())


VARIANTS = {"decode": decoded, "read, Python": read_python, "read, compiled": read_request}


def config(root: Path) -> StoreConfig:
    return StoreConfig(root_dir=str(root), commit_log_file_size=FILE_SIZE)


async def master_log(root: Path, count: int) -> list[tuple[int, bytes]]:
    """The master's CommitLog as the reads an HA connection sends."""
    master = create_store("mmap", config(root))
    await master.open()
    try:
        for number in range(count):
            properties = encode_properties(
                {
                    "TAGS": "TagA",
                    "KEYS": f"order-{number}",
                    "UNIQ_KEY": f"7F0000010001{number:020X}",
                    "WAIT": "true",
                }
            ).encode()
            await master.put(MessageToStore(TOPIC, number % QUEUES, BODY, properties))
        reads, offset = [], 0
        while data := master.read_commit_log(offset, DEFAULT_TRANSFER_BATCH):
            reads.append((offset, data))
            offset += len(data)
        return reads
    finally:
        await master.close()


async def appended_per_second(root: Path, reads: list[tuple[int, bytes]], read, count: int):
    """Records per CPU second of the second half of ``reads``: the first half warms the
    slave up (its index slots and queue files faulted in, as on a slave that has run)."""
    slave = create_store("mmap", config(root))
    await slave.open()
    try:
        writer = ReplicaWriter(
            slave.commitlog, slave._dispatch_replicated, read, cut=slave._cut_commit_log
        )
        half = len(reads) // 2
        for offset, data in reads[:half]:
            writer.append(offset, data)
        await anyio.sleep(WARM_UP_PAUSE)  # the pre-toucher faults in the CommitLog ahead
        before = sum(slave.max_offset(TOPIC, queue_id) for queue_id in range(QUEUES))
        started = time.thread_time()
        for offset, data in reads[half:]:
            writer.append(offset, data)
        elapsed = time.thread_time() - started
        after = sum(slave.max_offset(TOPIC, queue_id) for queue_id in range(QUEUES))
        assert after == count
        return (after - before) / elapsed
    finally:
        await slave.close()


async def run(messages: int, rounds: int) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="replica-dispatch-") as tmp:
        reads = await master_log(Path(tmp) / "master", messages)
        rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for round_number in range(rounds + 1):  # round 0 warms up
            for name, read in VARIANTS.items():
                root = Path(tmp) / f"slave-{round_number}-{len(rates[name])}"
                rate = await appended_per_second(root, reads, read, messages)
                if round_number:
                    rates[name].append(rate)
                await anyio.to_thread.run_sync(_remove, root)
    base = statistics.median(rates["decode"])
    return [
        {
            "variant": name,
            "records_per_cpu_s": round(statistics.median(values)),
            "runs": [round(value) for value in values],
            "vs_decode": round(statistics.median(values) / base, 2),
        }
        for name, values in rates.items()
    ]


def _remove(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    root.rmdir()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--core", type=int, default=1, help="pin to this core (-1: don't)")
    parser.add_argument("--output", default="benchmarks/results/replica_dispatch.json")
    args = parser.parse_args()
    if args.core >= 0 and not os.environ.get("REPLICA_DISPATCH_PINNED"):
        command = pinned([sys.executable, *sys.argv], args.core)
        os.environ["REPLICA_DISPATCH_PINNED"] = "1"
        os.execvp(command[0], command)
    results = anyio.run(run, args.messages, args.rounds)
    print(f"ReplicaWriter.append, {args.messages} records of 1 KiB, median of {args.rounds}")
    print(f"{'variant':>16}  {'records/CPU s':>13}  {'vs decode':>9}  runs")
    for row in results:
        print(
            f"{row['variant']:>16}  {row['records_per_cpu_s']:>13,}  {row['vs_decode']:>9}"
            f"  {row['runs']}"
        )
    setup = {"benchmark": "replica_dispatch", "messages": args.messages, **machine()}
    write_results(args.output, setup, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
