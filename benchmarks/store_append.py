"""Messages per second into and out of a store, no network: ``memory``, ``mmap`` and
``rocksdb`` side by side.

1 KiB bodies with the properties a Java producer sets (TAGS, KEYS, UNIQ_KEY, WAIT), one
topic of 8 queues; 8,192 distinct messages are built once and cycled through, so the
rows measure the store, not message building. Rows, each warmed up first:

- async put: flush ``async``, one putter awaiting each put;
- async batch 32: flush ``async``, ``put_batch`` of 32 messages of one queue;
- sync put x64: flush ``sync`` (group commit), 64 concurrent putters (the memory store
  has nothing to flush: its row shows the cost of 64 tasks);
- get 32: ``get(max_count=32)`` round-robin over the written queues.

Then the workload of many small queues, for each persistent store: ``--many-topics``
topics (100,000) of one queue, 10 messages each, put round after round (every queue is
created in the first round); it reports the time, the files the store created, RSS,
disk use, and the time to open the store again. A store that cannot take them all, or
not within ``--many-topics-budget`` seconds, reports how far it got and why.

Each store is measured in its own process, pinned with taskset to one core (docs/perf.md),
on asyncio + uvloop. With ``--threads-core`` the event loop's thread stays on ``--core``
and the threads the store starts (pre-touching CommitLog pages, fdatasync) run on the
other core, as they do on a machine with cores to spare: here a first touch of a page
costs 8-10 us of the kernel's time, ~2.5 us per 1 KiB record, on whichever core
touches it. The mmap store uses RocketMQ's default 1 GiB CommitLog files
(``--commit-log-mib`` to change). Prints tables, writes JSON.

    python benchmarks/store_append.py
    python benchmarks/store_append.py --duration 5 --stores mmap --core 0
    python benchmarks/store_append.py --many-topics 0     # skip the many-queues workload
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

import anyio
import orjson
from loadgen import machine, pinned, run_backend, write_results

from rocketmq_core.protocol.message import encode_properties
from rocketmq_core.store.api import MessageStore, MessageToStore, StoreConfig
from rocketmq_core.store.loader import create_store

TOPIC = "BenchmarkTopic"
QUEUES = 8
BODY = bytes(range(256)) * 4  # 1 KiB
POOL = 8192  # distinct messages (UNIQ_KEY, KEYS) cycled through
BATCH = 32
PUTTERS = 64
READ = 32
# a put that needs no flush never yields; a broker yields at least once per read from
# its connections, which lets the store's own tasks (flush, pre-touch, next file) run
YIELD_EVERY = 32
ROWS = ("async put", "async batch 32", "sync put x64", "get 32")
MANY_TOPICS = 100_000
MANY_MESSAGES = 10  # per topic
TARGETS = {
    "async put": 200_000,
    "async batch 32": 400_000,
    "sync put x64": 40_000,
    "get 32": 500_000,
}


def message_pool() -> list[MessageToStore]:
    pool = []
    for number in range(POOL):
        uniq = f"7F0000010001{number:020X}"
        properties = encode_properties(
            {"TAGS": "TagA", "KEYS": f"order-{number}", "UNIQ_KEY": uniq, "WAIT": "true"}
        )
        pool.append(MessageToStore(TOPIC, number % QUEUES, BODY, properties=properties.encode()))
    return pool


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


class Runner:
    """Runs one row for ``warmup`` then ``duration`` seconds; counts messages."""

    def __init__(self, warmup: float, duration: float) -> None:
        self.warmup = warmup
        self.duration = duration
        self.pool = message_pool()
        self.batches = [
            [m for m in self.pool if m.queue_id == queue][:BATCH] for queue in range(QUEUES)
        ]

    async def timed(self, work) -> tuple[int, float]:
        await work(time.perf_counter() + self.warmup)
        started = time.perf_counter()
        done = await work(started + self.duration)
        return done, time.perf_counter() - started

    async def async_put(self, store: MessageStore) -> tuple[int, float]:
        pool = self.pool

        async def work(stop_at: float) -> int:
            done = 0
            while True:
                for number, message in enumerate(pool):
                    result = await store.put(message)
                    assert result.ok, result
                    if number % YIELD_EVERY == 0:
                        await anyio.sleep(0)
                done += len(pool)
                if time.perf_counter() >= stop_at:
                    return done

        return await self.timed(work)

    async def async_batch(self, store: MessageStore) -> tuple[int, float]:
        batches = self.batches

        async def work(stop_at: float) -> int:
            done = 0
            while time.perf_counter() < stop_at:
                for batch in batches:
                    result = await store.put_batch(batch)
                    assert result.ok, result
                    await anyio.sleep(0)
                done += BATCH * len(batches)
            return done

        return await self.timed(work)

    async def sync_put(self, store: MessageStore) -> tuple[int, float]:
        pool = self.pool

        async def work(stop_at: float) -> int:
            done = 0

            async def putter(first: int) -> None:
                nonlocal done
                index = first
                while time.perf_counter() < stop_at:
                    result = await store.put(pool[index])
                    assert result.ok, result
                    done += 1
                    index = (index + PUTTERS) % POOL

            async with anyio.create_task_group() as task_group:
                for first in range(PUTTERS):
                    task_group.start_soon(putter, first)
            return done

        return await self.timed(work)

    async def get(self, store: MessageStore) -> tuple[int, float]:
        queues = [(TOPIC, queue) for queue in range(QUEUES)]
        positions = {queue: store.min_offset(*queue) for queue in queues}

        async def work(stop_at: float) -> int:
            done = 0
            while time.perf_counter() < stop_at:
                for queue in queues:
                    result = await store.get(*queue, positions[queue], READ)
                    if result.records:
                        done += len(result.records)
                        positions[queue] = result.next_begin_offset
                    else:  # the end: from the start again
                        positions[queue] = store.min_offset(*queue)
            return done

        return await self.timed(work)


async def measure_store(args: argparse.Namespace, results: list[dict]) -> None:
    runner = Runner(args.warmup, args.duration)
    with tempfile.TemporaryDirectory(dir=args.scratch) as scratch:
        sizes = {
            "commit_log_file_size": args.commit_log_mib << 20,
            "message_index_enable": True,
        }

        def row(name: str, done: int, seconds: float, store: MessageStore) -> None:
            stats = store.stats()
            results.append(
                {
                    "store": args.worker,
                    "row": name,
                    "messages": done,
                    "seconds": round(seconds, 3),
                    "msg_per_s": round(done / seconds),
                    "rss_mib": rss_mib(),
                    "flushes": stats.get("flushes"),
                }
            )

        store = create_store(args.worker, StoreConfig(root_dir=scratch, flush="async", **sizes))
        await store.open()
        try:
            row("async put", *await runner.async_put(store), store)
            row("async batch 32", *await runner.async_batch(store), store)
        finally:
            await store.close()
        store = create_store(args.worker, StoreConfig(root_dir=scratch, flush="sync", **sizes))
        await store.open()
        try:
            flushes = store.stats().get("flushes") or 0
            row("sync put x64", *await runner.sync_put(store), store)
            if results[-1]["flushes"] is not None:
                results[-1]["flushes"] -= flushes
            row("get 32", *await runner.get(store), store)
        finally:
            await store.close()


async def measure_many_topics(args: argparse.Namespace, results: list[dict]) -> None:
    """``args.many_topics`` topics of one queue, MANY_MESSAGES each, round after round."""
    topics = [f"Topic{number:06d}" for number in range(args.many_topics)]
    properties = encode_properties({"TAGS": "TagA", "WAIT": "true"}).encode()
    row = {"store": args.worker, "row": "many topics", "topics": len(topics)}
    with tempfile.TemporaryDirectory(dir=args.scratch) as scratch:
        config = StoreConfig(
            root_dir=scratch, flush="async", commit_log_file_size=args.commit_log_mib << 20
        )
        store = create_store(args.worker, config)
        await store.open()
        put = 0
        started = time.perf_counter()
        give_up_at = started + args.many_topics_budget
        try:
            for _round in range(MANY_MESSAGES):
                for topic in topics:
                    result = await store.put(MessageToStore(topic, 0, BODY, properties))
                    if not result.ok:
                        raise RuntimeError(f"{result.status.value}: {result.remark}")
                    put += 1
                    if put % YIELD_EVERY == 0:
                        await anyio.sleep(0)
                        if time.perf_counter() > give_up_at:
                            raise TimeoutError(f"the budget of {args.many_topics_budget:g} s")
        except TimeoutError as exc:
            row["stopped_by"] = str(exc)
        except Exception as exc:  # how far the store got, and why it stopped
            row["stopped_by"] = row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        row["seconds"] = round(time.perf_counter() - started, 3)
        row["messages"] = put
        row["msg_per_s"] = round(put / row["seconds"]) if row["seconds"] else 0
        row["queues_created"] = sum(len(ids) for ids in store.queues().values())
        row["rss_mib"] = rss_mib()
        try:
            await store.close()
        except Exception as exc:
            row["error"] = f"close: {type(exc).__name__}: {exc}"[:300]
            row.setdefault("stopped_by", row["error"])
        row["files"], row["disk_mib"] = files_and_disk_use(scratch)
        if "error" not in row:
            started = time.perf_counter()
            store = create_store(args.worker, config)
            await store.open()
            row["reopen_seconds"] = round(time.perf_counter() - started, 3)
            first = await store.get(topics[0], 0, 0, MANY_MESSAGES)
            assert first.records, first.status
            await store.close()
    results.append(row)


def place_threads(loop_core: int, threads_core: int) -> None:
    """This thread (the event loop's) on ``loop_core``; each thread started from now on
    moves itself to ``threads_core`` as it starts."""
    os.sched_setaffinity(0, {loop_core})

    def move_new_thread(_frame, _event, _arg) -> None:
        sys.setprofile(None)
        os.sched_setaffinity(0, {threads_core})

    threading.setprofile(move_new_thread)


def files_and_disk_use(root: str) -> tuple[int, float]:
    """Files under ``root``, and the disk blocks they take (MiB)."""
    files = blocks = 0
    for directory, _dirs, names in os.walk(root):
        for name in names:
            files += 1
            blocks += os.lstat(os.path.join(directory, name)).st_blocks
    return files, round(blocks * 512 / 2**20, 1)


def print_many_topics(topics: int, rows: list[dict]) -> None:
    print(f"\nmany topics: {topics:,} topics of one queue, {MANY_MESSAGES} x 1 KiB messages each")
    print(
        f"{'store':<9}{'put s':>9}{'msg/s':>10}{'queues':>9}{'files':>9}"
        f"{'disk MiB':>10}{'RSS MiB':>9}{'reopen s':>10}  stopped by"
    )
    for row in rows:
        print(
            f"{row['store']:<9}{row['seconds']:>9}{row['msg_per_s']:>10,}"
            f"{row['queues_created']:>9,}{row['files']:>9,}{row['disk_mib']:>10}"
            f"{row['rss_mib']:>9}{row.get('reopen_seconds', '-'):>10}  {row.get('stopped_by', '')}"
        )


def print_table(title: str, stores: list[str], results: list[dict]) -> None:
    by = {(row["store"], row["row"]): row for row in results}
    print(title)
    header = f"{'row':<16}" + "".join(f"{store + ' msg/s':>14}" for store in stores)
    header += f"{'mmap target':>13}" if "mmap" in stores else ""
    header += "".join(f"{store + ' RSS MiB':>15}" for store in stores)
    print(header)
    for name in ROWS:
        line = f"{name:<16}"
        line += "".join(f"{by[(store, name)]['msg_per_s']:>14,}" for store in stores)
        if "mmap" in stores:
            line += f"{TARGETS[name]:>13,}"
        line += "".join(f"{by[(store, name)]['rss_mib']:>15}" for store in stores)
        print(line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="memory,mmap,rocksdb")
    parser.add_argument("--many-topics", type=int, default=MANY_TOPICS)
    parser.add_argument(
        "--many-topics-budget", type=float, default=120.0, help="seconds one store may take"
    )
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--commit-log-mib", type=int, default=1024)
    parser.add_argument("--core", default="1", help="the core to pin to, or 'none'")
    parser.add_argument(
        "--threads-core",
        type=int,
        default=None,
        help="run the store's worker threads on this core (the event loop stays on --core)",
    )
    parser.add_argument("--scratch", default=None, help="directory for the mmap store files")
    parser.add_argument("--output", default="benchmarks/results/store_append.json")
    parser.add_argument("--worker", metavar="STORE", help=argparse.SUPPRESS)
    parser.add_argument("--workload", default="rows", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.threads_core is not None:
            place_threads(int(args.core), args.threads_core)
        results: list[dict] = []
        measure = measure_store if args.workload == "rows" else measure_many_topics
        run_backend(lambda: measure(args, results), "asyncio", use_uvloop=True)
        sys.stdout.write(orjson.dumps(results).decode())
        return 0

    core = None if args.core == "none" else int(args.core)
    if args.threads_core is not None and core is None:
        parser.error("--threads-core needs --core")
    stores = args.stores.split(",")
    forwarded = [
        f"--{name.replace('_', '-')}={getattr(args, name)}"
        for name in ("duration", "warmup", "commit_log_mib", "many_topics", "many_topics_budget")
    ]
    cores = str(core)
    if args.threads_core is not None:
        forwarded += [f"--core={core}", f"--threads-core={args.threads_core}"]
        cores = f"{core},{args.threads_core}"
    if args.scratch:
        forwarded.append(f"--scratch={args.scratch}")

    def worker(store: str, workload: str) -> list[dict]:
        command = [sys.executable, __file__, "--worker", store, f"--workload={workload}"]
        done = subprocess.run(
            pinned([*command, *forwarded], cores if core is not None else None),
            check=True,
            capture_output=True,
        )
        return orjson.loads(done.stdout)

    results = []
    for store in stores:
        results.extend(worker(store, "rows"))
    many = []
    if args.many_topics:
        for store in stores:
            if store != "memory":
                many.extend(worker(store, "many-topics"))
    setup = {
        "benchmark": "store_append",
        "body_bytes": len(BODY),
        "properties": "TAGS, KEYS, UNIQ_KEY, WAIT",
        "queues": QUEUES,
        "batch": BATCH,
        "sync_putters": PUTTERS,
        "read_max_count": READ,
        "commit_log_file_size": args.commit_log_mib << 20,
        "core": core,
        "threads_core": args.threads_core,
        "loop": "asyncio+uvloop",
        "duration": args.duration,
        "warmup": args.warmup,
        "targets_mmap": TARGETS,
        "many_topics": args.many_topics,
        "many_topics_messages_each": MANY_MESSAGES,
        **machine(),
    }
    placement = f"core={args.core}"
    if args.threads_core is not None:
        placement = f"loop core={args.core}, store threads core={args.threads_core}"
    title = (
        f"store_append  1 KiB bodies  {placement}  commit log files"
        f" {args.commit_log_mib} MiB  {args.duration:g} s per row after {args.warmup:g} s warm-up"
    )
    print_table(title, stores, results)
    if many:
        print_many_topics(args.many_topics, many)
    write_results(args.output, setup, results + many)
    return 0


if __name__ == "__main__":
    sys.exit(main())
