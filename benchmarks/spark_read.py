"""Rows per second of the Spark source: a batch read and a streaming catch-up of
``--messages`` (default 1M) 100-byte messages, on local[2], into Spark's noop sink.

The server (``rocketmq standalone``, mmap store, async flush) runs in a child process
pinned to ``--server-core`` (default 1). Spark runs here with local[2]: its JVM and its
two Python workers share both cores with the broker, as on a laptop running the
whole pipeline; ``--spark-core`` pins them to one core instead. The topic has
``--queues`` queues (default 4), so Spark reads in that many partitions, two at a
time. A warm-up read of 20k messages of another topic comes first (JVM, worker
spawns); each measured row is the best of ``--repeat`` runs (default 2). rows_per_s
counts from the call to the end; for the stream that includes starting the query
(about 1.5 s here), so in_batches_rows_per_s gives the rate inside its micro-batches.

    python benchmarks/spark_read.py --messages 200000
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import anyio
from broker_send import start_standalone
from loadgen import machine, run_backend, write_results

from rocketmq_core.client.admin import Admin
from rocketmq_core.client.message import Message
from rocketmq_core.client.producer import Producer

TOPIC, WARMUP_TOPIC = "BenchSpark", "BenchSparkWarmup"
BODY = b"x" * 100
TARGET_ROWS_PER_S = 300_000


async def fill(namesrv: str, topic: str, count: int, queues: int) -> float:
    """Send ``count`` messages in batches of 256, 8 batches in flight; seconds taken."""
    async with Admin(namesrv) as admin:
        await admin.create_topic(topic, queues=queues)
    started = time.perf_counter()
    async with Producer("PG_bench_spark", namesrv) as producer:
        limiter = anyio.CapacityLimiter(8)

        async def send(size: int) -> None:
            async with limiter:
                await producer.send_batch([Message(topic, BODY, tags="T")] * size)

        async with anyio.create_task_group() as group:
            for at in range(0, count, 256):
                group.start_soon(send, min(256, count - at))
    return time.perf_counter() - started


def spark_session():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.driver.memory", "2g")
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def batch_read(spark, namesrv: str, topic: str) -> tuple[float, None]:
    started = time.perf_counter()
    (
        spark.read.format("rocketmq")
        .option("nameServer", namesrv)
        .option("subscribe", topic)
        .load()
        .write.format("noop")
        .mode("overwrite")
        .save()
    )
    return time.perf_counter() - started, None


def streaming_catch_up(spark, namesrv: str, topic: str, checkpoint: Path) -> tuple[float, float]:
    """Seconds from start() to the end (Spark's query start included), and the rows per
    second inside the micro-batches (Spark's own triggerExecution times)."""
    started = time.perf_counter()
    query = (
        spark.readStream.format("rocketmq")
        .option("nameServer", namesrv)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    seconds = time.perf_counter() - started
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    in_batches = sum(p["durationMs"]["triggerExecution"] for p in batches) / 1000
    return seconds, sum(p["numInputRows"] for p in batches) / in_batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--server-core", type=int, default=1)
    parser.add_argument("--spark-core", type=int, default=None)
    parser.add_argument("--output", default="benchmarks/results/spark_read.json")
    args = parser.parse_args()
    if args.spark_core is not None:
        os.sched_setaffinity(0, {args.spark_core})
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as scratch:
        process, namesrv, _broker = start_standalone(Path(scratch), args.server_core)
        try:
            filled: dict = {}

            async def load() -> None:
                filled["warmup"] = await fill(namesrv, WARMUP_TOPIC, 20_000, args.queues)
                filled["seconds"] = await fill(namesrv, TOPIC, args.messages, args.queues)

            run_backend(load, "asyncio", use_uvloop=True)
            print(f"filled {args.messages} messages in {filled['seconds']:.1f} s")
            spark = spark_session()
            batch_read(spark, namesrv, WARMUP_TOPIC)
            streaming_catch_up(spark, namesrv, WARMUP_TOPIC, Path(scratch) / "warm-ck")
            for name, run in (
                ("batch", lambda n: batch_read(spark, namesrv, TOPIC)),
                (
                    "stream",
                    lambda n: streaming_catch_up(spark, namesrv, TOPIC, Path(scratch) / f"ck{n}"),
                ),
            ):
                seconds, in_batches = min(run(n) for n in range(args.repeat))
                rate = args.messages / seconds
                rows.append(
                    {
                        "row": name,
                        "rows": args.messages,
                        "seconds": round(seconds, 2),
                        "rows_per_s": round(rate),
                        "in_batches_rows_per_s": in_batches and round(in_batches),
                        "target": TARGET_ROWS_PER_S,
                        "met": rate >= TARGET_ROWS_PER_S,
                    }
                )
            spark.stop()
        finally:
            process.terminate()
            process.wait(10)
    setup = {
        **machine(),
        "messages": args.messages,
        "body_bytes": len(BODY),
        "queues": args.queues,
        "master": "local[2]",
        "server_core": args.server_core,
        "spark_core": args.spark_core,
        "repeat": args.repeat,
    }
    header = ("row", "rows", "seconds", "rows_per_s", "in_batches_rows_per_s", "target", "met")
    print(" ".join(f"{name:>11}" for name in header))
    for row in rows:
        print(" ".join(f"{row[name]!s:>11}" for name in header))
    write_results(args.output, setup, rows)


if __name__ == "__main__":
    main()
