"""Spark reading topics of a real broker: batch, streaming with restarts, limits, time."""

from __future__ import annotations

import re
import time

import pytest
import rocketmq_spark

from rocketmq_core.client.message import Message
from rocketmq_core.client.sync import Admin, Producer
from tests.cpp_client import load_cpp_client
from tests.interop.cpp import message as cpp_message
from tests.interop.cpp import producer as cpp_producer


def send(cluster, topic: str, bodies: list[str], **fields) -> None:
    with Producer("PG_spark_tests", cluster.namesrv_address) as producer:
        for body in bodies:
            producer.send(Message(topic, body.encode(), **fields))


def source(spark, cluster, **options):
    reader = spark.read.format("rocketmq").option("nameServer", cluster.namesrv_address)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def stream_into_list(spark, cluster, checkpoint, *, trigger=None, **options):
    """Run a streaming read until it has read what is there (AvailableNow); returns the
    rows per micro-batch (foreachBatch runs on the driver)."""
    reader = spark.readStream.format("rocketmq").option("nameServer", cluster.namesrv_address)
    for key, value in options.items():
        reader = reader.option(key, value)
    batches: list[list] = []
    query = (
        reader.load()
        .writeStream.foreachBatch(lambda frame, _id: batches.append(frame.collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(**(trigger or {"availableNow": True}))
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise query.exception()
    return [batch for batch in batches if batch]


def test_a_batch_read_returns_what_the_cpp_client_wrote(spark, cluster, topic):
    client = load_cpp_client()
    with cpp_producer(client, cluster.namesrv_address, "PID-spark") as producer:
        for number in range(40):
            producer.send_sync(cpp_message(client, topic, number, tags="A" if number % 2 else "B"))
    rows = source(spark, cluster, subscribe=topic).collect()  # found without register()

    assert sorted(int(row.properties["seq"]) for row in rows) == list(range(40))
    for row in rows:
        number = int(row.properties["seq"])
        assert (row.topic, row.body, row.tags, row.keys) == (
            topic,
            f"body-{number}".encode(),
            "A" if number % 2 else "B",
            f"key-{number}",
        )
        assert row.broker_name == "broker-a" and row.reconsume_times == 0
        assert row.msg_id == row.properties["UNIQ_KEY"]
        assert row.store_timestamp >= row.born_timestamp
    assert len({(row.queue_id, row.queue_offset) for row in rows}) == 40
    assert {row.queue_id for row in rows} == {0, 1, 2, 3}

    by_pattern = source(spark, cluster, subscribePattern=re.escape(topic) + "|NoSuchTopic.*")
    assert by_pattern.count() == 40
    rocketmq_spark.register(spark)  # explicit registration works too, and changes nothing
    assert source(spark, cluster, subscribe=topic).count() == 40

    only_a = source(spark, cluster, subscribe=topic, tags="A").collect()
    assert sorted(int(row.properties["seq"]) for row in only_a) == list(range(1, 40, 2))
    some = source(
        spark,
        cluster,
        assign=f'{{"{topic}": [1, 2]}}',
        endingOffsets=f'{{"{topic}": {{"broker-a": {{"1": 3}}}}}}',
        maxRecordsPerPartition="2",
    )
    assert some.rdd.getNumPartitions() == 2 + 5  # queue 1: 3 rows in 2; queue 2: 10 in 5
    assert sorted((row.queue_id, row.queue_offset) for row in some.collect()) == [
        (1, 0),
        (1, 1),
        (1, 2),
    ] + [(2, offset) for offset in range(10)]


def test_a_stream_restarted_from_its_checkpoint_reads_each_message_once(
    spark, cluster, topic, tmp_path
):
    send(cluster, topic, [f"first-{n}" for n in range(30)])
    first = stream_into_list(
        spark, cluster, tmp_path / "ck", subscribe=topic, startingOffsets="earliest"
    )
    send(cluster, topic, [f"second-{n}" for n in range(7)])
    second = stream_into_list(
        spark, cluster, tmp_path / "ck", subscribe=topic, startingOffsets="earliest"
    )
    third = stream_into_list(spark, cluster, tmp_path / "ck", subscribe=topic)

    bodies = [row.body.decode() for batch in first + second for row in batch]
    assert sorted(bodies) == sorted(
        [f"first-{n}" for n in range(30)] + [f"second-{n}" for n in range(7)]
    )
    assert {row.body.decode() for batch in second for row in batch} == {
        f"second-{n}" for n in range(7)
    }
    assert third == []


def test_max_offsets_per_trigger_caps_each_batch_and_available_now_ends(
    spark, cluster, topic, tmp_path
):
    send(cluster, topic, [f"m{n}" for n in range(35)])
    batches = stream_into_list(
        spark,
        cluster,
        tmp_path / "ck",
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger="10",
    )
    assert [len(batch) for batch in batches] == [10, 10, 10, 5]
    assert len({row.body for batch in batches for row in batch}) == 35


def test_min_offsets_per_trigger_waits_for_enough_rows(spark, cluster, topic, tmp_path):
    send(cluster, topic, [f"m{n}" for n in range(3)])
    waited = stream_into_list(
        spark,
        cluster,
        tmp_path / "ck",
        trigger={"once": True},
        subscribe=topic,
        startingOffsets="earliest",
        minOffsetsPerTrigger="5",
        maxTriggerDelay="1h",
    )
    assert waited == []  # 3 < 5, and the delay is far off
    send(cluster, topic, [f"m{n}" for n in range(3, 6)])
    ran = stream_into_list(
        spark,
        cluster,
        tmp_path / "ck",
        trigger={"once": True},
        subscribe=topic,
        minOffsetsPerTrigger="5",
        maxTriggerDelay="1h",
    )
    assert sorted(row.body for row in ran[0]) == [f"m{n}".encode() for n in range(6)]


def test_a_read_can_start_at_a_time(spark, cluster, topic, tmp_path):
    send(cluster, topic, [f"old-{n}" for n in range(10)])
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    send(cluster, topic, [f"new-{n}" for n in range(10)])

    batch = source(spark, cluster, subscribe=topic, startingTimestamp=str(cut)).collect()
    assert sorted(row.body.decode() for row in batch) == sorted(f"new-{n}" for n in range(10))
    per_queue = f'{{"{topic}": {{"broker-a": {{"0": {cut}}}}}}}'
    streamed = stream_into_list(
        spark,
        cluster,
        tmp_path / "ck",
        subscribe=topic,
        startingOffsetsByTimestamp=per_queue,
        startingOffsets="latest",
    )
    rows = [row for batch in streamed for row in batch]
    assert rows and {row.queue_id for row in rows} == {0}
    assert all(row.body.startswith(b"new-") for row in rows)
    ended = source(spark, cluster, subscribe=topic, endingTimestamp=str(cut)).collect()
    assert sorted(row.body.decode() for row in ended) == sorted(f"old-{n}" for n in range(10))


def test_fail_on_data_loss_when_the_topic_was_recreated(spark, cluster, new_topic, tmp_path):
    topic = new_topic(queues=1)
    send(cluster, topic, [f"m{n}" for n in range(10)])
    assert (
        len(
            stream_into_list(
                spark, cluster, tmp_path / "ck", subscribe=topic, startingOffsets="earliest"
            )[0]
        )
        == 10
    )
    with Admin(cluster.namesrv_address) as admin:
        admin.delete_topic(topic)
    cluster.create_topic(topic, queues=1)
    send(cluster, topic, ["after-0", "after-1", "after-2"])

    with pytest.raises(Exception, match="failOnDataLoss=false"):
        stream_into_list(spark, cluster, tmp_path / "ck", subscribe=topic)
    carried_on = stream_into_list(
        spark, cluster, tmp_path / "ck", subscribe=topic, failOnDataLoss="false"
    )
    assert sorted(row.body for batch in carried_on for row in batch) == [
        b"after-0",
        b"after-1",
        b"after-2",
    ]


def test_a_group_id_commits_progress_to_the_broker(spark, cluster, topic, tmp_path):
    send(cluster, topic, [f"m{n}" for n in range(12)])
    options = {
        "subscribe": topic,
        "startingOffsets": "earliest",
        "groupId": "spark_lag",
        "maxOffsetsPerTrigger": "6",
    }
    committed = []
    for round_ in range(2):
        stream_into_list(spark, cluster, tmp_path / "ck", **options)
        with Admin(cluster.namesrv_address) as admin:
            committed.append(admin.consume_stats("spark_lag", topic).consumer_offset_total)
        if round_ == 0:
            send(cluster, topic, [f"more-{n}" for n in range(6)])
    # Spark commits a batch while planning the next: the group is one batch behind
    assert committed == [6, 12]
