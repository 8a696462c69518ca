"""Our Python SDK against ``rocketmq standalone``: send and push-consume throughput.

The server runs in a child process pinned to one core (``--server-core``, default 1;
mmap store with async flush by default, as users run it; ``--store memory`` for the
in-memory reference store); the SDK runs here, in one process pinned to the other core
(``--client-core``, default 0), on uvloop when it is installed. 1 KiB bodies. Rows:

* send-async64: 64 tasks, each looping ``await producer.send(...)``: msg/s and the
  latency of each send;
* send-batch32: 8 tasks, each looping ``await producer.send_batch(...)`` of 32
  messages: msg/s and the latency of each batch;
* consume: a topic pre-filled with ``--consume-messages`` messages (batches of 32), then
  a PushConsumer (consume_batch_size=32, an async listener counting) from the first
  offset: msg/s from the first message received to the last (rebalance and the first
  pull are not counted).

The send rows warm up for ``--warmup`` seconds, then count for ``--seconds``. Each row
also reports the CPU time per message of this process and of the server over the
counted window, and how much CPU every other process on the machine took meanwhile: on
a shared 2-core machine that says whether a low figure is ours or a neighbour's.
``--null-broker`` runs the send rows against broker_send.py's null broker (answers at
once, stores nothing): the SDK's own ceiling. Prints a table (with the issue's targets)
and writes JSON.

    python benchmarks/sdk_throughput.py --seconds 5 --rows send-async64,consume
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import anyio
from broker_send import start_null_broker, start_standalone
from loadgen import CpuMeter, closed_loop, machine, run_backend, uvloop_wanted, write_results

from rocketmq_core.client.message import Message
from rocketmq_core.client.producer import Producer
from rocketmq_core.client.push import PushConsumer

BODY = b"x" * 1024
ROWS = ("send-async64", "send-batch32", "consume")
TARGETS = {"send-async64": 30_000, "send-batch32": 100_000, "consume": 50_000}
BATCH = 32
# the null broker (broker_send.py's) routes these two topics only
TOPICS = {"send-async64": "BenchSdkAsync", "send-batch32": "BenchSdkBatch"}
NULL_TOPICS = {"send-async64": "BenchSync", "send-batch32": "BenchBatch"}


def percentile_us(sorted_values: list[float], fraction: float) -> int | None:
    if not sorted_values:
        return None
    index = min(len(sorted_values) - 1, int(len(sorted_values) * fraction))
    return round(sorted_values[index] * 1e6)


def result_row(
    name: str, inflight: int, count: int, seconds: float, latencies: list[float]
) -> dict:
    latencies.sort()
    rate = round(count / seconds) if seconds > 0 else 0
    target = TARGETS[name]
    return {
        "row": name,
        "inflight": inflight,
        "messages": count,
        "seconds": round(seconds, 3),
        "messages_per_s": rate,
        "p50_us": percentile_us(latencies, 0.50),
        "p99_us": percentile_us(latencies, 0.99),
        "target_per_s": target,
        "met": rate >= target,
    }


async def send_async_row(
    namesrv: str, topic: str, inflight: int, warmup: float, seconds: float, meter: CpuMeter
) -> dict:
    async with Producer("PG-bench-async", namesrv) as producer:

        async def send() -> None:
            await producer.send(Message(topic, BODY))

        count, latencies = await closed_loop(send, 1, inflight, warmup, seconds, meter)
    return result_row("send-async64", inflight, count, seconds, latencies) | meter.result


async def send_batch_row(
    namesrv: str, topic: str, tasks: int, warmup: float, seconds: float, meter: CpuMeter
) -> dict:
    async with Producer("PG-bench-batch", namesrv) as producer:

        async def send() -> None:
            await producer.send_batch([Message(topic, BODY) for _ in range(BATCH)])

        count, latencies = await closed_loop(send, BATCH, tasks, warmup, seconds, meter)
    row = result_row("send-batch32", tasks * BATCH, count, seconds, latencies) | meter.result
    row["latency_of"] = "one batch of 32"
    return row


async def fill(namesrv: str, topic: str, total: int, tasks: int) -> float:
    """Send ``total`` messages to ``topic`` in batches of 32; the seconds it took."""
    remaining = (total + BATCH - 1) // BATCH
    started = time.perf_counter()
    async with Producer("PG-bench-fill", namesrv) as producer:

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await producer.send_batch([Message(topic, BODY) for _ in range(BATCH)])

        async with anyio.create_task_group() as task_group:
            for _ in range(tasks):
                task_group.start_soon(worker)
    return time.perf_counter() - started


async def consume_row(
    namesrv: str, total: int, tasks: int, timeout: float, meter: CpuMeter
) -> dict:
    """Fill a fresh topic, then count a push consumer's messages from the first to the
    last (the time to rebalance and pull first is left out, and reported apart)."""
    topic = f"BenchSdkConsume{os.getpid()}"
    total = (total + BATCH - 1) // BATCH * BATCH
    fill_seconds = await fill(namesrv, topic, total, tasks)
    print(
        f"consume: {total:,} messages filled in {fill_seconds:.1f} s", file=sys.stderr, flush=True
    )
    received = 0
    first_at: float | None = None
    last_at = 0.0
    done = anyio.Event()

    async def listener(messages: list) -> None:
        nonlocal received, first_at, last_at
        now = time.perf_counter()
        if first_at is None:
            first_at = now
            meter.start()
        received += len(messages)
        last_at = now
        if received >= total:
            meter.stop(received)
            done.set()

    consumer = PushConsumer(
        f"CG-bench-{os.getpid()}",
        namesrv,
        listener=listener,
        consume_from="first",
        consume_batch_size=BATCH,
    )
    consumer.subscribe(topic, "*")
    started = time.perf_counter()
    async with consumer:
        with anyio.move_on_after(timeout):
            await done.wait()
    seconds = last_at - first_at if first_at is not None else 0.0
    row = result_row("consume", 0, received, seconds, []) | meter.result
    row["expected"] = total
    row["start_to_first_s"] = round(first_at - started, 3) if first_at is not None else None
    row["fill_per_s"] = round(total / fill_seconds)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="counted, per send row")
    parser.add_argument("--warmup", type=float, default=2.0, help="per send row")
    parser.add_argument("--rows", default=",".join(ROWS))
    parser.add_argument("--inflight", type=int, default=64, help="send-async64 tasks")
    parser.add_argument("--batch-tasks", type=int, default=8, help="batches in flight")
    parser.add_argument("--consume-messages", type=int, default=200_000)
    parser.add_argument("--store", default="mmap", choices=("mmap", "memory"))
    parser.add_argument(
        "--null-broker",
        action="store_true",
        help="send rows against broker_send.py's null broker (answers at once, stores"
        " nothing): the SDK's own ceiling",
    )
    parser.add_argument("--server-core", type=int, default=1, help="-1: don't pin")
    parser.add_argument("--client-core", type=int, default=0, help="-1: don't pin")
    parser.add_argument("--no-uvloop", action="store_true")
    parser.add_argument("--output", default="benchmarks/results/sdk_throughput.json")
    args = parser.parse_args()
    wanted = [name.strip() for name in args.rows.split(",") if name.strip()]
    unknown = set(wanted) - set(ROWS)
    if unknown:
        parser.error(f"unknown rows {sorted(unknown)}; choose from {', '.join(ROWS)}")
    if args.null_broker and "consume" in wanted:
        wanted.remove("consume")
        print("the null broker stores nothing: no consume row", file=sys.stderr)
    topics = NULL_TOPICS if args.null_broker else TOPICS
    server_core = None if args.server_core < 0 else args.server_core
    if args.client_core >= 0:
        os.sched_setaffinity(0, {args.client_core})
    use_uvloop = uvloop_wanted(args.no_uvloop)
    results: list[dict] = []

    with tempfile.TemporaryDirectory(prefix="sdk-throughput-") as scratch:
        if args.null_broker:
            process, namesrv = start_null_broker(server_core, Path(scratch))
        else:
            process, namesrv, _broker = start_standalone(Path(scratch), server_core, args.store)
        try:

            async def run() -> None:
                if "send-async64" in wanted:
                    row = await send_async_row(
                        namesrv,
                        topics["send-async64"],
                        args.inflight,
                        args.warmup,
                        args.seconds,
                        CpuMeter(process.pid),
                    )
                    results.append(row)
                if "send-batch32" in wanted:
                    row = await send_batch_row(
                        namesrv,
                        topics["send-batch32"],
                        args.batch_tasks,
                        args.warmup,
                        args.seconds,
                        CpuMeter(process.pid),
                    )
                    results.append(row)
                if "consume" in wanted:
                    row = await consume_row(
                        namesrv,
                        args.consume_messages,
                        args.batch_tasks,
                        60.0,
                        CpuMeter(process.pid),
                    )
                    results.append(row)

            run_backend(run, "asyncio", use_uvloop)
        finally:
            process.terminate()
            process.wait(20)

    loop = "uvloop" if use_uvloop else "asyncio"
    server = (
        "the null broker (stores nothing)"
        if args.null_broker
        else f"rocketmq standalone ({args.store} store, async flush)"
    )
    print(
        f"sdk_throughput: rocketmq_core.client (core {args.client_core}, {loop}) ->"
        f" {server} (core {args.server_core}),"
        f" 1 KiB bodies, {args.seconds:g} s per send row after {args.warmup:g} s warm-up"
    )
    print(
        f"{'row':>13}  {'in flight':>9}  {'msg/s':>9}  {'p50 us':>8}  {'p99 us':>8}"
        f"  {'target':>8}  met  {'cpu us/msg client':>17}  {'server':>6}  {'others %':>8}  extra"
    )
    for result in results:
        extra = ""
        if result["row"] == "send-batch32":
            extra = "latency per batch"
        elif result["row"] == "consume":
            extra = (
                f"{result['messages']:,}/{result['expected']:,} in {result['seconds']:.2f} s,"
                f" first after {result['start_to_first_s']} s; fill {result['fill_per_s']:,}/s"
            )
        print(
            f"{result['row']:>13}  {result['inflight'] or '-':>9}"
            f"  {result['messages_per_s']:>9,}  {result['p50_us'] or '-':>8}"
            f"  {result['p99_us'] or '-':>8}  {result['target_per_s']:>8,}"
            f"  {'yes' if result['met'] else 'NO':>3}"
            f"  {result.get('client_cpu_us_per_msg', '-'):>17}"
            f"  {result.get('server_cpu_us_per_msg', '-'):>6}"
            f"  {result.get('others_cpu_pct', '-'):>8}  {extra}"
        )
    setup = {
        "benchmark": "sdk_throughput",
        "body_bytes": len(BODY),
        "seconds": args.seconds,
        "warmup_s": args.warmup,
        "server": "null broker" if args.null_broker else "rocketmq standalone",
        "store": None if args.null_broker else args.store,
        "flush": "ASYNC_FLUSH",
        "event_loop": loop,
        "server_core": args.server_core,
        "client_core": args.client_core,
        "cpu_columns": "CPU time per message over the counted window: this process, the"
        " server process; others_cpu_pct: what every other process on the machine used"
        " meanwhile (100 = one core)",
        **machine(),
    }
    write_results(args.output, setup, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
