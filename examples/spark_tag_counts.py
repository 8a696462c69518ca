"""A Structured Streaming pipeline on RocketMQ: count the messages of a topic per tag
per minute, and write the counts to another topic and to Parquet.

Start a broker, then run the pipeline (``--seed`` sends sample orders first):

    rocketmq standalone &
    python examples/spark_tag_counts.py --seed 1000

It reads what is in the topic and stops (Trigger.AvailableNow); run it again and it
goes on from its checkpoint. ``--follow`` keeps it running, a micro-batch every 5 s.
Each count goes out as a JSON message, keyed and tagged by its tag, e.g.
``{"minute": "2026-11-22T09:41:00+00:00", "tag": "paid", "count": 412}``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path


def seed(namesrv: str, topic: str, count: int) -> None:
    """Create the topic and send ``count`` orders tagged created / paid / shipped."""
    from rocketmq_core.client.message import Message
    from rocketmq_core.client.sync import Admin, Producer

    with Admin(namesrv) as admin:
        admin.create_topic(topic, queues=4)
    with Producer("PG_example_orders", namesrv) as producer:
        for number in range(count):
            tag = random.choice(["created", "paid", "shipped"])
            producer.send(Message(topic, f"order-{number}".encode(), tags=tag, keys=f"o{number}"))


def counts_per_tag_per_minute(spark, namesrv: str, source: str):
    from pyspark.sql import functions as F

    return (
        spark.readStream.format("rocketmq")
        .option("nameServer", namesrv)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .withWatermark("store_timestamp", "2 minutes")
        .groupBy(F.window("store_timestamp", "1 minute").alias("window"), "tags")
        .count()
        .select(
            F.col("window.start").alias("minute"),
            F.coalesce("tags", F.lit("(none)")).alias("tag"),
            F.col("count"),
        )
    )


def start(spark, namesrv: str, source: str, target: str, out: Path, *, follow: bool = False):
    """Start the query; each micro-batch's updated counts go to Parquet and to
    ``target`` (a count that grows in a later batch is written again, larger)."""
    from pyspark.sql import functions as F

    parquet = str(out / "tag_counts")

    def write_both(counts, batch_id: int) -> None:
        counts = counts.withColumn("batch_id", F.lit(batch_id))
        counts.write.mode("append").parquet(parquet)
        (
            counts.select(
                F.to_json(
                    F.struct(
                        F.date_format("minute", "yyyy-MM-dd'T'HH:mm:ssXXX").alias("minute"),
                        "tag",
                        "count",
                    )
                ).alias("body"),
                F.col("tag").alias("keys"),
                F.col("tag").alias("tags"),
            )
            .write.format("rocketmq")
            .option("nameServer", namesrv)
            .option("topic", target)
            .mode("append")
            .save()
        )

    trigger = {"processingTime": "5 seconds"} if follow else {"availableNow": True}
    return (
        counts_per_tag_per_minute(spark, namesrv, source)
        .writeStream.outputMode("update")
        .foreachBatch(write_both)
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(**trigger)
        .start()
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--namesrv-addr", default="127.0.0.1:9876")
    parser.add_argument("--source", default="Orders")
    parser.add_argument("--target", default="OrderTagCounts")
    parser.add_argument("--out", type=Path, default=Path("spark-example-out"))
    parser.add_argument("--seed", type=int, default=0, help="send this many orders first")
    parser.add_argument("--follow", action="store_true", help="keep running (Ctrl-C stops)")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    if args.seed:
        seed(args.namesrv_addr, args.source, args.seed)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("rocketmq tag counts")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    query = start(spark, args.namesrv_addr, args.source, args.target, args.out, follow=args.follow)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    spark.read.parquet(str(args.out / "tag_counts")).orderBy("minute", "tag", "batch_id").show(
        50, False
    )
    print(f"counts in {args.out / 'tag_counts'} (Parquet) and in topic {args.target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
