"""PullAhead: a partition's pulls run ahead on the client's loop thread (no Spark needed)."""

from __future__ import annotations

import time

import pytest
from rocketmq_spark import pull_ahead
from rocketmq_spark.pull_ahead import PullAhead

from rocketmq_core.client.consumer_requests import PullStatus
from rocketmq_core.client.message import Message
from rocketmq_core.client.sync import Producer, PullConsumer
from rocketmq_core.errors import RocketMQError
from rocketmq_core.protocol.heartbeat import MessageQueue
from rocketmq_core.protocol.message import iter_records


@pytest.fixture
def filled(cluster, new_topic):
    """A one-queue topic of 300 messages, and a started pull consumer."""
    topic = new_topic(queues=1)
    with Producer("PG-pull-ahead", cluster.namesrv_address) as producer:
        for start in range(0, 300, 50):
            producer.send_batch(
                [Message(topic, f"m{n}".encode()) for n in range(start, start + 50)]
            )
    with PullConsumer("CG-pull-ahead", cluster.namesrv_address) as consumer:
        (queue,) = consumer.queues(topic)
        yield consumer, queue


def offsets_of(results) -> list[int]:
    return [record.queue_offset for result in results for record in iter_records(result.records)]


def test_every_pull_arrives_in_offset_order_and_what_has_arrived_comes_together(
    filled, monkeypatch
):
    consumer, queue = filled
    monkeypatch.setattr(pull_ahead, "AHEAD_BYTES", 1 << 20)
    taken = []
    for results in PullAhead(consumer, queue, 10, 290, "*", batch=16).taken(1 << 20):
        taken.append(results)
        time.sleep(0.05)  # a slow decoder: the pulls run ahead meanwhile
    pulled = [result for results in taken for result in results]
    assert offsets_of(pulled) == list(range(10, 290))
    assert all(result.status is PullStatus.FOUND for result in pulled)
    assert max(len(results) for results in taken) > 1


def test_the_pulls_wait_while_too_much_is_ahead(filled, monkeypatch):
    consumer, queue = filled
    monkeypatch.setattr(pull_ahead, "AHEAD_BYTES", 1)  # one pull ahead at most
    pulls = PullAhead(consumer, queue, 0, 300, "*", batch=10)
    taken = pulls.taken(1 << 20)
    first = next(taken)
    time.sleep(0.3)
    assert pulls._results.qsize() <= 1
    rest = [result for results in taken for result in results]
    assert offsets_of([*first, *rest]) == list(range(300))


def test_closing_early_stops_the_pulls(filled, monkeypatch):
    consumer, queue = filled
    monkeypatch.setattr(pull_ahead, "AHEAD_BYTES", 1)  # the pulls wait for room after one
    pulls = PullAhead(consumer, queue, 0, 300, "*", batch=5)
    taken = pulls.taken(1)
    next(taken)
    taken.close()
    last = None
    deadline = time.monotonic() + 5
    while not isinstance(last, pull_ahead._End) and time.monotonic() < deadline:
        last = pulls._results.get(timeout=5)
    assert isinstance(last, pull_ahead._End)
    assert last.error is not None  # cancelled while waiting, not run to the end


def test_a_failed_pull_is_raised_where_the_results_are_taken(filled):
    consumer, queue = filled
    gone = MessageQueue("NoSuchTopicForPullAhead", queue.broker_name, 0)
    with pytest.raises(RocketMQError):
        for _ in PullAhead(consumer, gone, 0, 10, "*", batch=5).taken(1 << 20):
            pass
