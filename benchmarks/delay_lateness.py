"""How late delayed messages arrive: delay levels and timer messages through the
delay_scheduler plugin of ``rocketmq standalone``.

The server runs in a child process pinned to one core (``--server-core``, default 1;
mmap store, async flush); our SDK runs here on the other (``--client-core``, default 0).
``--messages`` messages (default 100k, 256-byte bodies) are sent as fast as 64 tasks
can, alternating a delay level (levels ``--levels``, default ``1s 2s 3s 5s 10s``) and a
timer message due 1 s to ``--timer-spread`` seconds after its send, while a push
consumer of the same process receives the delivered ones. Deliveries overlap the sends.

Lateness of a delivered message: its store time in the topic (when the broker
delivered it) minus when it was due: ``TIMER_DELIVER_MS`` for a timer; for a level,
the born time plus the level's delay (the parked store time is a little later, so
this over-states level lateness by the send latency). Early deliveries are counted
(there must be none). Broker memory: its RSS before the run, at its peak (sampled
every 100 ms) and after. Prints a table and writes JSON.

    python benchmarks/delay_lateness.py --messages 20000
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

import anyio
from broker_send import start_standalone
from loadgen import machine, run_backend, write_results

from rocketmq_core.broker.config import delay_levels_ms
from rocketmq_core.client.admin import Admin
from rocketmq_core.client.message import Message, ReceivedMessage
from rocketmq_core.client.producer import Producer
from rocketmq_core.client.push import PushConsumer

TOPIC = "BenchDelay"
BODY = b"d" * 256
SENDERS = 64
TARGET_P99_LATE_MS = 1000  # the issue: at most ~1 s late at p99


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def percentile(values: list[int], fraction: float) -> int | None:
    if not values:
        return None
    return values[min(len(values) - 1, int(len(values) * fraction))]


def lateness_row(kind: str, late: list[int]) -> dict:
    late.sort()
    return {
        "row": kind,
        "messages": len(late),
        "early": sum(1 for value in late if value < 0),
        "p50_ms": percentile(late, 0.50),
        "p99_ms": percentile(late, 0.99),
        "max_ms": late[-1] if late else None,
        "target_p99_ms": TARGET_P99_LATE_MS,
        "met": bool(late) and late[0] >= 0 and percentile(late, 0.99) <= TARGET_P99_LATE_MS,
    }


async def run(args: argparse.Namespace, namesrv: str, server_pid: int) -> dict:
    levels_ms = delay_levels_ms(args.levels)
    async with Admin(namesrv) as admin:
        await admin.create_topic(TOPIC, queues=4)
    lateness: dict[str, list[int]] = {"levels": [], "timers": []}
    seen: set[str] = set()
    done = anyio.Event()

    async def listener(messages: list[ReceivedMessage]) -> None:
        for message in messages:
            if message.msg_id in seen:
                continue
            seen.add(message.msg_id)
            level = message.properties.get("level")
            if level is not None:
                due = message.born_timestamp + levels_ms[int(level) - 1]
                lateness["levels"].append(message.store_timestamp - due)
            else:
                due = int(message.properties["due"])
                lateness["timers"].append(message.store_timestamp - due)
        if len(seen) >= args.messages:
            done.set()

    memory = {"before_mib": rss_mib(server_pid), "peak_mib": 0.0}

    async def sample_memory() -> None:
        while True:
            memory["peak_mib"] = max(memory["peak_mib"], rss_mib(server_pid))
            await anyio.sleep(0.1)

    rng = random.Random(1)
    numbers = iter(range(args.messages))

    async def sender(producer: Producer) -> None:
        for number in numbers:
            message = Message(TOPIC, BODY)
            if number % 2:
                level = rng.randint(1, len(levels_ms))
                message.delay_level = level
                message.properties["level"] = str(level)
            else:
                due = int(time.time() * 1000) + rng.randint(1000, args.timer_spread * 1000)
                message.deliver_time_ms = due
                message.properties["due"] = str(due)
            await producer.send(message)

    consumer = PushConsumer("CG-bench-delay", namesrv, listener=listener, consume_from="last")
    consumer.subscribe(TOPIC)
    started = time.monotonic()
    async with consumer, anyio.create_task_group() as group:
        group.start_soon(sample_memory)
        await anyio.sleep(1.0)  # the consumer owns its queues before anything is due
        async with (
            Producer("PG-bench-delay", namesrv) as producer,
            anyio.create_task_group() as senders,
        ):
            for _ in range(SENDERS):
                senders.start_soon(sender, producer)
        sent_in = time.monotonic() - started - 1.0
        with anyio.move_on_after(max(levels_ms) / 1000 + args.timer_spread + 30):
            await done.wait()
        group.cancel_scope.cancel()
    memory["after_mib"] = rss_mib(server_pid)
    rows = [lateness_row(kind, values) for kind, values in lateness.items()]
    rows.append(lateness_row("all", lateness["levels"] + lateness["timers"]))
    for row in rows:
        row.update({key: round(value, 1) for key, value in memory.items()})
    missing = args.messages - len(seen)
    return {"rows": rows, "send_seconds": round(sent_in, 2), "missing": missing}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--levels", default="1s 2s 3s 5s 10s")
    parser.add_argument("--timer-spread", type=int, default=10, help="seconds")
    parser.add_argument("--client-core", type=int, default=0)
    parser.add_argument("--server-core", type=int, default=1)
    parser.add_argument("--output", default="benchmarks/results/delay_lateness.json")
    args = parser.parse_args()
    os.sched_setaffinity(0, {args.client_core})
    with tempfile.TemporaryDirectory(prefix="bench-delay-") as scratch:
        process, namesrv, _broker = start_standalone(
            Path(scratch), args.server_core, "mmap", f"messageDelayLevel={args.levels}\n"
        )
        try:
            outcome: dict = {}

            async def go() -> None:
                outcome.update(await run(args, namesrv, process.pid))

            run_backend(go, "asyncio", use_uvloop=True)
        finally:
            process.terminate()
            process.wait(10)
    setup = {
        **machine(),
        "messages": args.messages,
        "levels": args.levels,
        "timer_spread_s": args.timer_spread,
        "senders": SENDERS,
        "send_seconds": outcome.get("send_seconds"),
        "missing": outcome.get("missing"),
    }
    print(
        f"delay lateness: {args.messages} messages sent in {setup['send_seconds']} s,"
        f" {setup['missing']} not received"
    )
    header = (
        "row",
        "messages",
        "early",
        "p50_ms",
        "p99_ms",
        "max_ms",
        "before_mib",
        "peak_mib",
        "after_mib",
        "met",
    )
    print(" ".join(f"{name:>10}" for name in header))
    for row in outcome.get("rows", []):
        print(" ".join(f"{row.get(name)!s:>10}" for name in header))
    write_results(args.output, setup, outcome.get("rows", []))


if __name__ == "__main__":
    main()
