"""The official C++ client (rocketmq==0.4.4) against our name server and broker.

One cluster per store plugin (mmap, rocksdb) serves the module from a thread of its own
(the client blocks); each test has its own topic and groups. The name server and the
broker serve QUIC too, so every route the client reads carries rocketmq-py's
``endpoints`` field, which it must ignore.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import pytest
from rocketmq_transport_quic.certs import write_self_signed

from rocketmq_core.protocol.heartbeat import MessageQueue
from rocketmq_core.testing.cluster import EmbeddedCluster, quic_listener_settings
from tests.cpp_client import load_cpp_client

from .cpp import CollectingConsumer, message, producer, sharding_selector, wait_until


@pytest.fixture(scope="module")
def client():
    return load_cpp_client()


@pytest.fixture(scope="module", params=["mmap", "rocksdb"])
def store(request):
    """Every test runs against the broker on each store plugin."""
    return request.param


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, client, store):
    certificate = write_self_signed(tmp_path_factory.mktemp("certs"))
    quic = quic_listener_settings(str(certificate.cert_file), str(certificate.key_file))
    # levels 1 and 2 for the delay test; retries wait at level 3+ (a second, not 10 s)
    with EmbeddedCluster(
        tmp_path_factory.mktemp("cluster"),
        message_delay_level="1s 2s 1s 1s 1s 1s",
        store=store,
        namesrv_overrides=quic,
        **quic,
    ) as running:
        yield running


def stored(cluster: EmbeddedCluster, topic: str, queues: int = 4) -> int:
    """How many messages the broker holds for ``topic``."""
    store = cluster.broker.store
    return sum(max(0, store.max_offset(topic, queue)) for queue in range(queues))


def bodies(received) -> list[bytes]:
    return sorted(item.body for item in received)


def expected_bodies(numbers) -> list[bytes]:
    return sorted(f"body-{n}".encode() for n in numbers)


def test_sync_sends_and_a_push_consumer_round_trip_keys_tags_and_properties(client, cluster):
    cluster.create_topic("SyncTopic")
    # what this client is answered (bare numeric keys, as for every client before 4.9.4)
    assert b'"endpoints":{0:["quic://127.0.0.1:' in cluster.namesrv.routes.route_body(
        "SyncTopic", standard=False
    )
    with producer(client, cluster.namesrv_address) as sender:
        results = [
            sender.send_sync(message(client, "SyncTopic", n, "TagA" if n % 2 else "TagB"))
            for n in range(20)
        ]
    assert [r.status for r in results] == [client.SendStatus.OK] * 20
    assert len({r.msg_id for r in results}) == 20
    with CollectingConsumer(client, cluster.namesrv_address, "CID-sync", "SyncTopic") as consumer:
        received = consumer.wait_for(20)
    assert bodies(received) == expected_bodies(range(20))
    third = next(item for item in received if item.body == b"body-3")
    # the wheel returns tags, keys and properties as bytes
    assert (third.topic, third.tags, third.keys, third.seq) == (
        "SyncTopic",
        b"TagA",
        b"key-3",
        b"3",
    )


def test_async_sends_all_complete_and_are_stored(client, cluster, store):
    cluster.create_topic("AsyncTopic")
    runs = cluster.broker.server.processors.frame_server
    served_before = runs.served
    done = threading.Semaphore(0)
    outcomes: list = []

    def succeeded(result):
        outcomes.append(result.status)
        done.release()

    def failed(error):
        outcomes.append(error)
        done.release()

    with producer(client, cluster.namesrv_address, "PID-async") as sender:
        for n in range(50):
            sender.send_async(message(client, "AsyncTopic", n), succeeded, failed)
        assert all(done.acquire(timeout=20) for _ in range(50))
    assert outcomes == [client.SendStatus.OK] * 50
    assert stored(cluster, "AsyncTopic") == 50
    # the C++ client's headers are read in place (send_frames), but for each queue's
    # first put; the rocksdb store has no compiled usual append
    served = runs.served - served_before
    assert served >= 46 if store == "mmap" else served == 0


def test_oneway_sends_are_stored(client, cluster):
    cluster.create_topic("OnewayTopic")
    with producer(client, cluster.namesrv_address, "PID-oneway") as sender:
        for n in range(30):
            sender.send_oneway(message(client, "OnewayTopic", n))
        assert wait_until(lambda: stored(cluster, "OnewayTopic") == 30)


def test_batch_sends_store_each_message_and_the_pull_consumer_reads_them(client, cluster, store):
    # the C++ client's pull consumers share one client instance per process, which keeps
    # the routes it learnt (a broker address of the previous cluster): a topic per store
    topic = f"BatchTopic-{store}"
    cluster.create_topic(topic, 1)  # one queue: the second batch is not the queue's first put
    runs = cluster.broker.server.processors.frame_server
    served_before = runs.served
    with producer(client, cluster.namesrv_address, "PID-batch") as sender:
        for first in (0, 16, 32):
            result = sender.send_batch([message(client, topic, first + n) for n in range(16)])
            assert result.status == client.SendStatus.OK
    assert stored(cluster, topic) == 48
    # its batches (SEND_MESSAGE with batch "1") are read in place (send_frames) but for the
    # queue's first put (and one that shares a read with a heartbeat before it); the
    # rocksdb store has no compiled usual append
    served = runs.served - served_before
    assert served >= 1 if store == "mmap" else served == 0
    puller = client.PullConsumer("CID-pull")
    puller.set_namesrv_addr(cluster.namesrv_address)
    puller.start()
    try:
        # a pulled message lives until the generator pulls the next batch: read it now
        pulled = [(m.topic, m.body, m.get_property("seq")) for m in puller.pull(topic)]
    finally:
        puller.shutdown()
    assert sorted(body for _, body, _ in pulled) == expected_bodies(range(48))
    assert all(t == topic and body == b"body-" + seq for t, body, seq in pulled)


def test_orderly_sends_by_sharding_key_are_consumed_in_order(client, cluster):
    cluster.create_topic("OrderlyTopic")
    with producer(client, cluster.namesrv_address, "PID-orderly") as sender:
        for n in range(60):
            shard = n % 3
            result = sender.send_orderly(
                message(client, "OrderlyTopic", n, keys=f"order-{shard}"),
                shard,
                queue_selector=sharding_selector,
            )
            assert result.status == client.SendStatus.OK
    with CollectingConsumer(
        client, cluster.namesrv_address, "CID-orderly", "OrderlyTopic", orderly=True
    ) as consumer:
        received = consumer.wait_for(60)
        # an orderly consumer consumes a queue only while it holds the broker's lock on it
        locks = cluster.broker.queue_locks
        holders = {
            locks.holder("CID-orderly", MessageQueue("OrderlyTopic", "broker-a", queue), now)
            for queue in range(4)
            for now in [cluster.broker.now()]
        }
        assert len(holders) == 1 and None not in holders
    assert bodies(received) == expected_bodies(range(60))
    by_shard: dict[bytes, list[int]] = defaultdict(list)
    queues: dict[bytes, set[int]] = defaultdict(set)
    for item in received:
        by_shard[item.keys].append(int(item.seq))
        queues[item.keys].add(item.queue_id)
    for shard in range(3):
        key = f"order-{shard}".encode()
        assert by_shard[key] == list(range(shard, 60, 3)), key
        assert queues[key] == {shard}  # 4 queues: shard n goes to queue n


def test_tag_expressions_filter_on_the_broker(client, cluster):
    cluster.create_topic("TagTopic")
    with producer(client, cluster.namesrv_address, "PID-tags") as sender:
        for n in range(30):
            sender.send_sync(message(client, "TagTopic", n, ("TagA", "TagB", "TagC")[n % 3]))
    with CollectingConsumer(
        client, cluster.namesrv_address, "CID-tags", "TagTopic", "TagA || TagB"
    ) as consumer:
        received = consumer.wait_for(20)
        # anything else would come with them: a TagC message is never delivered
        assert not wait_until(lambda: len(consumer.received) > 20, timeout=1.0)
    assert bodies(received) == expected_bodies(n for n in range(30) if n % 3 != 2)
    assert {item.tags for item in received} == {b"TagA", b"TagB"}


def test_two_clustering_consumers_split_the_queues_and_receive_each_message_once(client, cluster):
    cluster.create_topic("SharedTopic")
    address = cluster.namesrv_address
    with (
        CollectingConsumer(client, address, "CID-shared", "SharedTopic") as first,
        CollectingConsumer(client, address, "CID-shared", "SharedTopic") as second,
    ):
        group = cluster.broker.consumers.group("CID-shared")
        assert wait_until(lambda: group is not None and len(group.client_ids()) == 2)
        # the broker tells the first consumer of the second as the second registers; when
        # the second pulls on half of the queues, both have rebalanced (the first's pulls on
        # the queues it gave up stay held until they time out, and are ignored by it)
        assert wait_until(lambda: _pulls_on_half_of_the_queues(cluster, "SharedTopic"))
        time.sleep(0.5)
        with producer(client, address, "PID-shared") as sender:
            for n in range(40):
                sender.send_sync(message(client, "SharedTopic", n))
        assert wait_until(lambda: len(first.received) + len(second.received) >= 40)
        assert not wait_until(lambda: len(first.received) + len(second.received) > 40, 1.0)
    everything = first.received + second.received
    assert bodies(everything) == expected_bodies(range(40))
    first_queues = {item.queue_id for item in first.received}
    second_queues = {item.queue_id for item in second.received}
    assert first_queues and second_queues and not first_queues & second_queues


def _pulls_on_half_of_the_queues(cluster: EmbeddedCluster, topic: str) -> bool:
    held = cluster.broker.pulls.held_queues(topic)
    return any(len(queues) == 2 for queues in held.values())


def _pulls_on_every_queue_by(cluster: EmbeddedCluster, topic: str, consumers: int) -> bool:
    held = cluster.broker.pulls.held_queues(topic)
    return sum(len(queues) == 4 for queues in held.values()) == consumers


def test_broadcasting_consumers_each_receive_every_message(client, cluster):
    cluster.create_topic("BroadcastTopic")
    address = cluster.namesrv_address
    with (
        CollectingConsumer(
            client, address, "CID-broadcast", "BroadcastTopic", broadcasting=True
        ) as first,
        CollectingConsumer(
            client, address, "CID-broadcast", "BroadcastTopic", broadcasting=True
        ) as second,
    ):
        group = cluster.broker.consumers.group("CID-broadcast")
        assert wait_until(lambda: group is not None and len(group.client_ids()) == 2)
        # a broadcasting consumer starts a queue at its end when it first pulls it: send
        # only once both pull on every queue, or a late one misses what came before
        assert wait_until(lambda: _pulls_on_every_queue_by(cluster, "BroadcastTopic", 2))
        with producer(client, address, "PID-broadcast") as sender:
            for n in range(20):
                sender.send_sync(message(client, "BroadcastTopic", n))
        first.wait_for(20)
        second.wait_for(20)
    assert bodies(first.received) == expected_bodies(range(20))
    assert bodies(second.received) == expected_bodies(range(20))


def test_after_a_broker_restart_consumption_resumes_from_the_committed_offsets(
    client, tmp_path, store
):
    with EmbeddedCluster(tmp_path, store=store) as own:
        own.create_topic("RestartTopic")
        with producer(client, own.namesrv_address, "PID-restart") as sender:
            for n in range(20):
                sender.send_sync(message(client, "RestartTopic", n))
        with CollectingConsumer(
            client, own.namesrv_address, "CID-restart", "RestartTopic"
        ) as before:
            assert bodies(before.wait_for(20)) == expected_bodies(range(20))
        # the consumer committed its offsets as it shut down; the broker persists them
        own.restart_broker()
        with producer(client, own.namesrv_address, "PID-restart") as sender:
            for n in range(20, 30):
                sender.send_sync(message(client, "RestartTopic", n))
        with CollectingConsumer(
            client, own.namesrv_address, "CID-restart", "RestartTopic"
        ) as after:
            after.wait_for(10)
            assert not wait_until(lambda: len(after.received) > 10, timeout=1.0)
    assert bodies(after.received) == expected_bodies(range(20, 30))


def test_a_message_the_consumer_gives_back_returns_through_the_retry_topic(client, cluster):
    cluster.create_topic("RetryTopic")
    # routed before the consumer starts, as for a group that consumed before (the broker
    # creates it at a group's first heartbeat: tests/broker/test_processors.py): the C++
    # client looks %RETRY% routes up at start, then only at its refresh ~10 s later
    cluster.create_topic("%RETRY%CID-retry", 1)
    with producer(client, cluster.namesrv_address, "PID-retry") as sender:
        for n in range(5):
            sender.send_sync(message(client, "RetryTopic", n))
    with CollectingConsumer(
        client,
        cluster.namesrv_address,
        "CID-retry",
        "RetryTopic",
        reconsume=lambda item: item.reconsume_times == 0,  # fail each first delivery
    ) as consumer:
        assert wait_until(
            lambda: sum(item.reconsume_times == 1 for item in consumer.received) >= 5, 40
        )
    again = [item for item in consumer.received if item.reconsume_times == 1]
    # (the client hands over the messages of one pull one at a time and gives back the
    # rest of the pull with the first that fails, so not every first delivery is seen)
    assert bodies(again) == expected_bodies(range(5))
    # the client restores the original topic from RETRY_TOPIC; keys and properties stay
    assert {item.topic for item in again} == {"RetryTopic"}
    assert {(item.keys, item.seq) for item in again} == {
        (f"key-{n}".encode(), str(n).encode()) for n in range(5)
    }
    assert stored(cluster, "%RETRY%CID-retry", queues=1) == 5


def test_set_delay_time_level_delivers_no_earlier_than_the_level(client, cluster):
    cluster.create_topic("DelayTopic")
    delays_ms = {1: 1000, 2: 2000}
    with producer(client, cluster.namesrv_address, "PID-delay") as sender:
        for n, level in enumerate((1, 2, 1, 2)):
            delayed = message(client, "DelayTopic", n)
            delayed.set_delay_time_level(level)
            sender.send_sync(delayed)
    with CollectingConsumer(client, cluster.namesrv_address, "CID-delay", "DelayTopic") as consumer:
        received = consumer.wait_for(4, timeout=20)
    assert bodies(received) == expected_bodies(range(4))
    for item in received:
        level = 1 if item.seq in (b"0", b"2") else 2
        waited = item.store_timestamp - item.born_timestamp
        assert delays_ms[level] <= waited <= delays_ms[level] + 1000, (item.seq, waited)
        assert item.topic == "DelayTopic" and item.tags == b"TagA"
