"""The blocking facade: the same clients from plain threads, and nothing left running."""

from __future__ import annotations

import threading
import time

import pytest

from rocketmq_core.client import sync
from rocketmq_core.client.message import Message, SendStatus

from .conftest import TOPIC


def loop_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == sync.LOOP_THREAD_NAME]


def test_many_threads_share_one_producer_and_a_push_consumer_gets_all(namesrv):
    with sync.Producer("PG", namesrv) as producer:

        def send_some(worker: int) -> None:
            for i in range(25):
                assert producer.send(Message(TOPIC, f"{worker}-{i}".encode())).status is (
                    SendStatus.SEND_OK
                )

        workers = [threading.Thread(target=send_some, args=(n,)) for n in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        results = []
        producer.send_with_callback(Message(TOPIC, b"cb"), lambda r, e: results.append((r, e)))
        deadline = time.monotonic() + 5
        while not results and time.monotonic() < deadline:
            time.sleep(0.01)
        assert results and results[0][1] is None
    received: list[bytes] = []
    consumer = sync.PushConsumer(
        "CG", namesrv, listener=lambda ms: received.extend(m.body for m in ms), consume_from="first"
    )
    consumer.subscribe(TOPIC)
    with consumer:
        deadline = time.monotonic() + 10
        while len(received) < 101 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert len(received) == 101 and len(set(received)) == 101
    assert loop_threads() == []
    consumer.start()
    assert loop_threads() == [sync.LOOP_THREAD_NAME]
    consumer.shutdown()
    assert loop_threads() == [], "the loop thread outlived the last blocking client"


def test_lite_pull_iteration_pull_consumer_and_errors(namesrv):
    with sync.Producer("PG", namesrv) as producer:
        producer.send_batch([Message(TOPIC, f"m{i}".encode()) for i in range(10)])
    consumer = sync.LitePullConsumer("CG", namesrv, consume_from="first")
    consumer.subscribe(TOPIC)
    with consumer:
        bodies = []
        for message in consumer:
            bodies.append(message.body)
            if len(bodies) == 10:
                break
    assert sorted(bodies) == sorted(f"m{i}".encode() for i in range(10))
    with sync.PullConsumer("CG2", namesrv) as puller:
        queues = puller.queues(TOPIC)
        assert sum(puller.max_offset(queue) for queue in queues) == 10
    idle = sync.Producer("PG", namesrv)
    with pytest.raises(RuntimeError, match="not started"):
        idle.send(Message(TOPIC, b"x"))
