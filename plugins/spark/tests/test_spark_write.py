"""Spark writing to topics of a real broker: batch, streaming, and exactly-once."""

from __future__ import annotations

import datetime
import time
from contextlib import contextmanager

import pytest

from rocketmq_core.client.message import Message
from rocketmq_core.client.sync import Admin, Producer, PullConsumer
from rocketmq_core.protocol.constants import TRANS_HALF_TOPIC
from rocketmq_core.protocol.heartbeat import MessageQueue


def everything_in(cluster, topic: str, *, settle: float = 0.0, expect: int = 0) -> list:
    """Every message a consumer can read from ``topic``: after ``settle`` seconds, and
    once at least ``expect`` are there (within 30 s): a half a dead task left behind
    shows when a check-back round asks about it."""
    time.sleep(settle)
    deadline = time.monotonic() + 30
    while True:
        messages = _read_all(cluster, topic)
        if len(messages) >= expect or time.monotonic() > deadline:
            return messages
        time.sleep(0.2)


def _read_all(cluster, topic: str) -> list:
    messages = []
    with PullConsumer("CG_spark_check", cluster.namesrv_address) as consumer:
        for queue in consumer.queues(topic):
            offset = 0
            while True:
                result = consumer.pull(queue, offset, max_nums=256)
                messages += result.messages
                if result.next_begin_offset <= offset or not result.messages:
                    break
                offset = result.next_begin_offset
    return messages


def test_a_batch_write_is_seen_by_a_consumer(spark, cluster, topic):
    rows = [
        (f"order-{n}".encode(), f"k{n} shared", "A" if n % 2 else "B", {"region": f"r{n % 3}"})
        for n in range(20)
    ]
    frame = spark.createDataFrame(
        rows, "body binary, keys string, tags string, properties map<string,string>"
    )
    (
        frame.write.format("rocketmq")
        .option("nameServer", cluster.namesrv_address)
        .option("topic", topic)
        .mode("append")
        .save()
    )
    received = {m.body: m for m in everything_in(cluster, topic)}
    assert sorted(received) == sorted(row[0] for row in rows)
    for body, keys, tags, properties in rows:
        message = received[body]
        assert (message.keys, message.tags) == (keys.split(" "), tags)
        assert message.properties["region"] == properties["region"]


def test_a_batch_write_takes_the_topic_from_a_column_and_delays(spark, cluster, new_topic):
    first, second = new_topic(), new_topic()
    at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=1)
    frame = spark.createDataFrame(
        [("a", first, None), ("b", second, None), ("c", first, at)],
        "body string, topic string, deliver_at timestamp",
    )
    frame.write.format("rocketmq").option("nameServer", cluster.namesrv_address).mode(
        "append"
    ).save()
    assert [m.body for m in everything_in(cluster, second)] == [b"b"]
    assert [m.body for m in everything_in(cluster, first)] == [b"a"]  # c is not due yet
    assert sorted(m.body for m in everything_in(cluster, first, settle=2.5)) == [b"a", b"c"]


def test_the_sink_refuses_columns_it_cannot_write(spark, cluster, topic):
    frame = spark.createDataFrame([("x", 1)], "body string, colour int")
    writer = frame.write.format("rocketmq").option("nameServer", cluster.namesrv_address)
    with pytest.raises(Exception, match=r"columns \['colour'\] are not written"):
        writer.option("topic", topic).mode("append").save()
    with pytest.raises(Exception, match="give the topic"):
        spark.createDataFrame([("x",)], "body string").write.format("rocketmq").option(
            "nameServer", cluster.namesrv_address
        ).mode("append").save()
    with pytest.raises(Exception, match="never overwritten"):
        frame.select("body").write.format("rocketmq").option(
            "nameServer", cluster.namesrv_address
        ).option("topic", topic).mode("overwrite").save()


def stream_copy(spark, cluster, source: str, target: str, checkpoint, **sink_options):
    """Copy ``source`` to ``target`` with a streaming query (AvailableNow)."""
    frame = (
        spark.readStream.format("rocketmq")
        .option("nameServer", cluster.namesrv_address)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "25")
        .load()
        .selectExpr("body", "tags", "keys")
    )
    writer = (
        frame.writeStream.format("rocketmq")
        .option("nameServer", cluster.namesrv_address)
        .option("topic", target)
        .option("checkpointLocation", str(checkpoint))
    )
    for key, value in sink_options.items():
        writer = writer.option(key, value)
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    return query


def fill(cluster, topic: str, count: int, pad: int = 0) -> list[bytes]:
    bodies = [f"event-{n}".encode().ljust(pad, b".") for n in range(count)]
    with Producer("PG_spark_tests", cluster.namesrv_address) as producer:
        for body in bodies:
            producer.send(Message(topic, body, tags="T", keys=body[:16].decode().rstrip(".")))
    return bodies


@pytest.mark.parametrize("transactional", ["true", "false"])
def test_a_streaming_write_is_seen_by_a_consumer(
    spark, cluster, new_topic, tmp_path, transactional
):
    source, target = new_topic(), new_topic()
    bodies = fill(cluster, source, 60)
    stream_copy(spark, cluster, source, target, tmp_path / "ck", transactional=transactional)
    received = everything_in(cluster, target, expect=len(bodies))
    assert sorted(m.body for m in received) == sorted(bodies)
    assert all(m.tags == "T" and m.keys == [m.body.decode()] for m in received)
    more = [f"late-{n}".encode() for n in range(5)]
    with Producer("PG_spark_tests", cluster.namesrv_address) as producer:
        for body in more:
            producer.send(Message(source, body))
    stream_copy(spark, cluster, source, target, tmp_path / "ck", transactional=transactional)
    received = everything_in(cluster, target, expect=len(bodies + more), settle=1.0)
    assert sorted(m.body for m in received) == sorted(bodies + more)


def half_messages(cluster) -> int:
    with Admin(cluster.namesrv_address) as admin:
        return admin.max_offset(MessageQueue(TRANS_HALF_TOPIC, "broker-a", 0))


def test_the_exactly_once_sink_survives_a_failed_task(spark, cluster, new_topic, tmp_path):
    """A task dies after sending half of its rows; Spark runs it again. The halves of the
    dead attempt are never committed (the broker's check-back rolls them back), so each
    row arrives once."""
    source, target = new_topic(), new_topic()
    # 8 KiB rows: the Python worker's 64 KiB output buffer flushes them to the sink early
    bodies = fill(cluster, source, 80, pad=8192)
    marker = tmp_path / "failed-once"

    def fail_first_attempt(batches):
        from pyspark import TaskContext

        context = TaskContext.get()
        for index, batch in enumerate(batches):
            yield batch
            if context.attemptNumber() == 0 and context.partitionId() == 0 and index == 2:
                time.sleep(1.0)  # the sink has sent these halves by now
                marker.touch()
                raise RuntimeError("injected task failure")

    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "4")
    try:
        halves_before = half_messages(cluster)
        frame = (
            spark.readStream.format("rocketmq")
            .option("nameServer", cluster.namesrv_address)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .select("body")
            .mapInArrow(fail_first_attempt, "body binary")
        )
        query = (
            frame.writeStream.format("rocketmq")
            .option("nameServer", cluster.namesrv_address)
            .option("topic", target)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")

    assert marker.exists(), "the injected failure did not happen"
    assert half_messages(cluster) - halves_before > len(bodies)  # the dead attempt's halves
    # check-back rounds run meanwhile: the dead attempt's halves are rolled back
    received = everything_in(cluster, target, settle=3.0, expect=len(bodies))
    assert sorted(m.body for m in received) == sorted(bodies)


def test_a_half_left_behind_is_decided_by_a_plain_writes_producer_of_its_group(cluster, new_topic):
    """A broker asks the producers of a half's group about it, in turn. A task died and
    left a half of a recorded epoch behind; the only producer of that group still here is
    the one a plain (at-least-once) write made. It answers from the ledger, so the row
    shows (a plain producer could not answer: the half was discarded after its checks)."""
    import pyarrow as pa
    from rocketmq_spark import ledger
    from rocketmq_spark.options import sink_options
    from rocketmq_spark.writer import write_rows

    from rocketmq_core.client.sync import TransactionProducer
    from rocketmq_core.client.transaction import LocalTransactionState

    topic, group = new_topic(), "PG_spark_left_behind"
    sink = ledger.sink_key("left-behind")
    with Admin(cluster.namesrv_address) as admin:
        admin.put_kv(ledger.NAMESPACE, ledger.epoch_key(sink, "7"), ledger.encode_record({0: 42}))
    undecided = lambda *_: LocalTransactionState.UNKNOWN  # noqa: E731
    with TransactionProducer(
        group, cluster.namesrv_address, executor=undecided, checker=undecided
    ) as dead_task:
        half = Message(topic, b"left behind")
        half.properties[ledger.TXN_PROPERTY] = ledger.HalfTag(sink, "7", 0, 42).encode()
        dead_task.send_in_transaction(half)
    settings = sink_options(
        {"nameServer": cluster.namesrv_address, "topic": topic, "producerGroup": group},
        streaming=False,
    )
    plain = pa.RecordBatch.from_pydict({"body": [b"plain write"]})
    assert write_rows(settings, [plain], None).count == 1
    received = everything_in(cluster, topic, expect=2)
    assert sorted(m.body for m in received) == [b"left behind", b"plain write"]


def test_an_exactly_once_batch_longer_than_the_check_backs_still_commits(tmp_path):
    """A batch write that outlasts the broker's transactionCheckMax check-backs (each
    answered 'unknown' from the ledger while the batch runs): its halves are moved
    aside, and the driver's commit still delivers every row, once."""
    import pyarrow as pa
    from rocketmq_spark.writer import commit_epoch, write_rows

    from rocketmq_core.protocol.constants import TRANS_CHECK_MAX_TIME_TOPIC

    with checking_cluster(tmp_path, transaction_check_max=1) as cluster:
        topic = "SparkLongBatch"
        cluster.create_topic(topic, queues=4)
        settings = exactly_once_batch(cluster, topic, "long-batch")
        bodies = [f"row {n}".encode() for n in range(20)]
        sent = write_rows(settings, [pa.RecordBatch.from_pydict({"body": bodies})], "epoch-1")
        assert sent.count == len(bodies)
        assert stored_reaches(cluster, TRANS_CHECK_MAX_TIME_TOPIC, len(bodies)) == len(bodies)
        commit_epoch(settings, [sent], "epoch-1", streamed=False)
        received = everything_in(cluster, topic, settle=1.0, expect=len(bodies))
        assert sorted(m.body for m in received) == sorted(bodies)


def test_a_check_back_round_reads_the_ledger_once_per_epoch_not_once_per_half(tmp_path):
    """A check-back round asks about each half of a running epoch; the ledger record
    is read once for all of them (and kept once written), not twice per half."""
    import pyarrow as pa
    from rocketmq_spark import ledger
    from rocketmq_spark.writer import commit_epoch, write_rows

    with checking_cluster(tmp_path) as cluster:
        topic = "SparkChecked"
        cluster.create_topic(topic, queues=4)
        kv = cluster.namesrv.kv
        reads: list[str] = []
        read = kv.get

        def counted(namespace: str, key: str) -> str | None:
            if namespace == ledger.NAMESPACE:
                reads.append(key)
            return read(namespace, key)

        kv.get = counted  # the name server's own table, read by its GET_KV_CONFIG
        settings = exactly_once_batch(cluster, topic, "checked")
        bodies = [f"row {n}".encode() for n in range(40)]
        sent = write_rows(settings, [pa.RecordBatch.from_pydict({"body": bodies})], "epoch-1")
        # each half checked twice
        assert stored_reaches(cluster, TRANS_HALF_TOPIC, 3 * len(bodies)) >= 3 * len(bodies)
        asked_twice = len(reads) - 1  # the write's own look at the ledger
        commit_epoch(settings, [sent], "epoch-1", streamed=False)
        received = everything_in(cluster, topic, settle=1.0, expect=len(bodies))
    assert 1 <= asked_twice <= 8, reads
    assert sorted(m.body for m in received) == sorted(bodies)


def exactly_once_batch(cluster, topic: str, transactional_id: str):
    """The sink's settings for an exactly-once batch write to ``topic``."""
    from rocketmq_spark.options import sink_options

    options = {
        "nameServer": cluster.namesrv_address,
        "topic": topic,
        "transactional": "true",
        "transactionalId": transactional_id,
    }
    return sink_options(options, streaming=False)


def stored_reaches(cluster, topic: str, count: int) -> int:
    """How many messages the broker's queue 0 of ``topic`` holds, once ``count`` (or
    after 30 s)."""

    async def stored() -> int:
        return cluster.broker.store.max_offset(topic, 0)

    deadline = time.monotonic() + 30
    while cluster.call(stored) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return cluster.call(stored)


@contextmanager
def checking_cluster(tmp_path, **settings):
    """A cluster of the test's own, whose check-back comes every 200 ms for halves older
    than 300 ms; the plugin's clients of it are shut down before it stops."""
    from rocketmq_spark import runtime

    from rocketmq_core.testing.cluster import EmbeddedCluster

    with EmbeddedCluster(
        tmp_path / "rq", transaction_check_interval=200, transaction_time_out=300, **settings
    ) as cluster:
        try:
            yield cluster
        finally:
            runtime.shutdown_all()


def test_a_check_racing_a_streaming_commit_does_not_roll_it_back(cluster):
    """The checker keeps "not recorded" and the last streamed epoch a second each, read
    at different moments. A check that meets a committed epoch's half with "not recorded"
    kept from before the commit and the last streamed epoch read after it must look at
    the record again, not roll a committed row back."""
    from types import SimpleNamespace

    from rocketmq_spark import ledger, runtime
    from rocketmq_spark.options import sink_options
    from rocketmq_spark.writer import _checker

    from rocketmq_core.client.transaction import LocalTransactionState

    settings = sink_options(
        {"nameServer": cluster.namesrv_address, "topic": "T", "checkpointLocation": "race"},
        streaming=True,
    )
    sink = ledger.sink_key("race")
    admin = runtime.admin(settings.connection)
    admin.put_kv(ledger.NAMESPACE, sink, "3")  # epochs up to 3 streamed
    check = _checker(settings.connection)

    def half_of(epoch: str) -> SimpleNamespace:
        tag = ledger.HalfTag(sink, epoch, 0, 1).encode()
        return SimpleNamespace(properties={ledger.TXN_PROPERTY: tag})

    assert check(half_of("4")) is LocalTransactionState.UNKNOWN  # last streamed kept: 3
    time.sleep(0.5)
    assert check(half_of("5")) is LocalTransactionState.UNKNOWN  # "not recorded" kept
    admin.put_kv(ledger.NAMESPACE, ledger.epoch_key(sink, "5"), ledger.encode_record({0: 1}))
    admin.put_kv(ledger.NAMESPACE, sink, "5")  # the driver commits epoch 5
    time.sleep(0.6)  # the last streamed epoch is read again; "not recorded" is still kept
    assert check(half_of("5")) is LocalTransactionState.COMMIT
