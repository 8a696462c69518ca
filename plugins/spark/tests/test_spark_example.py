"""examples/spark_tag_counts.py against a real broker: the counts it writes add up."""

from __future__ import annotations

import collections
import importlib.util
from pathlib import Path

import orjson

from rocketmq_core.client.sync import PullConsumer

EXAMPLE = Path(__file__).parents[3] / "examples" / "spark_tag_counts.py"


def load_example():
    spec = importlib.util.spec_from_file_location("spark_tag_counts", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tag_count_pipeline_counts_every_message(spark, cluster, new_topic, tmp_path):
    example = load_example()
    source, target = f"{new_topic()}Orders", new_topic()
    example.seed(cluster.namesrv_address, source, 60)
    example.start(spark, cluster.namesrv_address, source, target, tmp_path).awaitTermination()

    sent = collections.Counter()
    with PullConsumer("CG_example_check", cluster.namesrv_address) as consumer:
        for queue in consumer.queues(source):
            for message in consumer.pull(queue, 0, max_nums=100).messages:
                sent[message.tags] += 1
        written = [
            orjson.loads(message.body)
            for queue in consumer.queues(target)
            for message in consumer.pull(queue, 0, max_nums=100).messages
        ]
    per_tag = collections.Counter()
    for count in written:  # one batch here, so one count per minute and tag
        per_tag[count["tag"]] += count["count"]
    assert per_tag == sent and sum(sent.values()) == 60
    parquet = spark.read.parquet(str(tmp_path / "tag_counts")).collect()
    assert sorted((row.tag, row["count"]) for row in parquet) == sorted(
        (count["tag"], count["count"]) for count in written
    )
