"""The sans-IO parts of the Spark plugin: options, offset planning, the sink's ledger."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.datasource import CaseInsensitiveDict
from rocketmq_spark import ledger
from rocketmq_spark.options import (
    OptionError,
    batch_source_options,
    sink_options,
    stream_source_options,
)
from rocketmq_spark.planning import cap_rows, from_json, plan_partitions, to_json, total_rows

from rocketmq_core.client.transaction import LocalTransactionState
from rocketmq_core.protocol.heartbeat import MessageQueue


def spark_options(**given: str) -> CaseInsensitiveDict:
    return CaseInsensitiveDict(given)  # as Spark hands them over: keys lower-cased


def queue(number: int, topic: str = "T") -> MessageQueue:
    return MessageQueue(topic, "broker-a", number)


# --- options ----------------------------------------------------------------------------------


def test_options_are_read_case_insensitively_with_typed_values():
    settings = stream_source_options(
        spark_options(
            nameServer="127.0.0.1:9876",
            subscribe="A, B",
            startingOffsets='{"A": {"broker-a": {"0": 5, "1": -2}}}',
            maxOffsetsPerTrigger="100",
            maxTriggerDelay="30s",
            failOnDataLoss="false",
            **{"client.requestTimeout": "7.5"},
        )
    )
    assert settings.subscribe == ("A", "B")
    assert settings.starting == {
        MessageQueue("A", "broker-a", 0): 5,
        MessageQueue("A", "broker-a", 1): -2,
    }
    assert (settings.max_offsets_per_trigger, settings.max_trigger_delay_ms) == (100, 30_000)
    assert settings.fail_on_data_loss is False
    assert settings.connection.client_config().request_timeout == 7.5


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"subscribe": "T"}, "nameServer is required"),
        ({"nameServer": "h:9876"}, "exactly one of subscribe"),
        (
            {"nameServer": "h:9876", "subscribe": "T", "assign": '{"T": [0]}'},
            "given: subscribe, assign",
        ),
        ({"nameServer": "h:9876", "subscribePattern": "(["}, "not a valid regex"),
        ({"nameServer": "h:9876", "subscribe": "T", "startingOffsets": "{oops"}, "not valid JSON"),
        (
            {"nameServer": "h:9876", "subscribe": "T", "startingOffsets": '{"T": [1]}'},
            '{"topic": {"broker"',
        ),
        ({"nameServer": "h:9876", "subscribe": "T", "maxOffsetsPerTrigger": "0"}, "at least 1"),
        ({"nameServer": "h:9876", "subscribe": "T", "maxTriggerDelay": "soon"}, "duration like"),
        (
            {"nameServer": "h:9876", "subscribe": "T", "endingOffsets": "latest"},
            "batch reads (read) only",
        ),
        (
            {"nameServer": "h:9876", "subscribe": "T", "client.colour": "red"},
            "unknown client option",
        ),
        (
            {"nameServer": "h:9876", "subscribe": "T", "accessKey": "ak"},
            "option accessKey is set but secretKey is not",
        ),
        (
            {"nameServer": "h:9876", "subscribe": "T", "secretKey": "sk"},
            "option secretKey is set but accessKey is not",
        ),
    ],
)
def test_a_wrong_option_is_named_with_what_it_takes(given, says):
    with pytest.raises(OptionError, match=re.escape(says)):
        stream_source_options(spark_options(**given))


def test_a_batch_read_starts_at_the_earliest_and_refuses_stream_options():
    assert (
        batch_source_options(spark_options(nameServer="h:9876", subscribe="T")).starting
        == "earliest"
    )
    with pytest.raises(OptionError, match="streaming reads"):
        batch_source_options(
            spark_options(nameServer="h:9876", subscribe="T", maxOffsetsPerTrigger="5")
        )
    with pytest.raises(OptionError, match="cannot start at"):
        batch_source_options(
            spark_options(nameServer="h:9876", subscribe="T", startingOffsets="latest")
        )


def test_a_pattern_takes_user_topics_only():
    settings = stream_source_options(spark_options(nameServer="h:9876", subscribePattern="Ord.*"))
    assert [
        t
        for t in ["Orders", "OrdX", "Other", "%RETRY%Ord", "rmq_sys_wheel_timer"]
        if settings.matches(t)
    ] == ["Orders", "OrdX"]


def test_a_streaming_sink_is_transactional_by_its_checkpoint_unless_told_otherwise():
    streaming = sink_options(
        spark_options(nameServer="h:9876", checkpointLocation="/ck/q1"), streaming=True
    )
    assert (streaming.transactional, streaming.transactional_id) == (True, "/ck/q1")
    plain = sink_options(spark_options(nameServer="h:9876", transactional="false"), streaming=True)
    assert (plain.transactional, plain.transactional_id) == (False, None)
    assert sink_options(spark_options(nameServer="h:9876"), streaming=False).transactional is False
    with pytest.raises(OptionError, match="transactionalId"):
        sink_options(spark_options(nameServer="h:9876", transactional="true"), streaming=False)


# --- planning ---------------------------------------------------------------------------------


def test_offsets_round_trip_through_the_checkpoint_json():
    table = {queue(0): 3, queue(1): 0, MessageQueue("U", "broker-b", 2): 9}
    assert to_json(table) == {"T": {"broker-a": {"0": 3, "1": 0}}, "U": {"broker-b": {"2": 9}}}
    assert from_json(to_json(table)) == table


@given(
    backlog=st.lists(st.integers(0, 1000), min_size=1, max_size=8),
    limit=st.integers(1, 3000),
)
def test_a_rate_limit_is_never_exceeded_and_always_makes_progress(backlog, limit):
    start = {queue(i): 10 for i in range(len(backlog))}
    latest = {queue(i): 10 + rows for i, rows in enumerate(backlog)}
    end = cap_rows(start, latest, limit)
    admitted = total_rows(start, end)
    assert admitted == min(limit, sum(backlog))
    assert all(start[q] <= end[q] <= latest[q] for q in latest)


def test_a_rate_limit_splits_in_proportion_to_each_backlog():
    start = {queue(0): 0, queue(1): 0, queue(2): 0}
    end = cap_rows(start, {queue(0): 100, queue(1): 10, queue(2): 10}, 12)
    assert [end[queue(i)] for i in range(3)] == [10, 1, 1]


def test_partitions_skip_empty_queues_and_are_cut_to_size():
    start = {queue(0): 0, queue(1): 5, queue(2): 7}
    end = {queue(0): 10, queue(1): 5, queue(2): 8}
    assert [(p.queue.queue_id, p.start, p.end) for p in plan_partitions(start, end)] == [
        (0, 0, 10),
        (2, 7, 8),
    ]
    cut = plan_partitions(start, end, max_records_per_partition=4)
    assert [(p.queue.queue_id, p.start, p.end) for p in cut] == [
        (0, 0, 4),
        (0, 4, 8),
        (0, 8, 10),
        (2, 7, 8),
    ]
    spread = plan_partitions(start, end, min_partitions=4)
    assert len(spread) == 4 and sum(p.size for p in spread) == 11


# --- the exactly-once ledger ------------------------------------------------------------------


def test_a_half_is_kept_only_if_its_attempt_won_its_epoch():
    won, lost = ledger.HalfTag("s", "7", 0, 31), ledger.HalfTag("s", "7", 0, 30)
    record = {0: 31, 1: 12}
    assert ledger.decide(won, record, 7) is LocalTransactionState.COMMIT
    assert ledger.decide(lost, record, 7) is LocalTransactionState.ROLLBACK
    # not recorded: still running, unless its streaming epoch is long committed
    assert ledger.decide(ledger.HalfTag("s", "8", 0, 40), None, 7) is LocalTransactionState.UNKNOWN
    assert ledger.decide(ledger.HalfTag("s", "3", 0, 40), None, 7) is LocalTransactionState.ROLLBACK
    assert (
        ledger.decide(ledger.HalfTag("s", "ab12", 0, 1), None, 7) is LocalTransactionState.UNKNOWN
    )
    assert ledger.decode_record(ledger.encode_record(record)) == record
    assert ledger.HalfTag.decode(won.encode()) == won
    assert ledger.HalfTag.decode("garbage") is None


def test_rows_are_sent_in_batches_of_one_topic_and_delayed_ones_alone():
    from rocketmq_spark.writer import _chunks

    from rocketmq_core.client.message import Message

    messages = [
        Message("A", b"1"),
        Message("A", b"2"),
        Message("A", b"3"),
        Message("B", b"4"),
        Message("B", b"5", delay_level=2),
        Message("B", b"6"),
    ]
    assert [[m.body for m in chunk] for chunk in _chunks(messages, 2)] == [
        [b"1", b"2"],
        [b"3"],
        [b"4"],
        [b"5"],
        [b"6"],
    ]
