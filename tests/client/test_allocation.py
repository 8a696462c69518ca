"""Queue-allocation strategies: the conformance suite for each, then the exact shares of
ROUTE.md §7, which must match the Java client's."""

from __future__ import annotations

import hashlib
import zlib

import pytest

from rocketmq_core.client.allocation import (
    AllocationStrategy,
    Averagely,
    ByConfig,
    ByMachineRoom,
    ConsistentHash,
    MachineRoomNearby,
    averagely,
    averagely_by_circle,
    consistent_hash,
    md5_hash,
    queue_key,
)
from rocketmq_core.protocol.heartbeat import MessageQueue
from rocketmq_core.testing.allocation import AllocationConformance

GROUP = "group_a"


def queues_of(broker_name: str, count: int, topic: str = "TopicTest") -> list[MessageQueue]:
    return [MessageQueue(topic, broker_name, queue_id) for queue_id in range(count)]


def shares(strategy, queues, client_ids) -> dict[str, list[MessageQueue]]:
    return {cid: strategy(GROUP, cid, queues, client_ids) for cid in client_ids}


# --- conformance -------------------------------------------------------------------------


class TestAveragelyConformance(AllocationConformance):
    @pytest.fixture
    def strategy(self):
        return averagely


class TestAveragelyByCircleConformance(AllocationConformance):
    @pytest.fixture
    def strategy(self):
        return averagely_by_circle


class ConfiguredPerClient:
    """Each consumer configured with its own ByConfig share, as an operator would set them
    up (here: every N-th queue); a client outside the group is configured with everything,
    which ByConfig must still refuse."""

    name = "config"

    def __call__(self, group, current_client_id, queues, client_ids):
        ordered_queues, ordered_ids = sorted(queues), sorted(client_ids)
        configured = ordered_queues
        if current_client_id in ordered_ids:
            configured = ordered_queues[ordered_ids.index(current_client_id) :: len(ordered_ids)]
        return ByConfig(configured)(group, current_client_id, queues, client_ids)


class TestByConfigConformance(AllocationConformance):
    @pytest.fixture
    def strategy(self):
        return ConfiguredPerClient()


class TestByMachineRoomConformance(AllocationConformance):
    broker_names = ("hz@broker-a", "sh@broker-b", "hz@broker-c")

    @pytest.fixture
    def strategy(self):
        return ByMachineRoom({"hz", "sh"})


class TestByMachineRoomWithUnreadRoomsConformance(AllocationConformance):
    covers_all = False  # bj has no consumers; the others are not named <idc>@<name>
    broker_names = ("hz@broker-a", "bj@broker-b", "broker-c", "hz@broker@d")

    @pytest.fixture
    def strategy(self):
        return ByMachineRoom({"hz", "sh"})


class TestConsistentHashConformance(AllocationConformance):
    balanced = False

    @pytest.fixture
    def strategy(self):
        return consistent_hash


class RoomByPrefix:
    """Brokers are named <room>@<name>; consumers are spread over hz and sh by a checksum."""

    def broker_room(self, queue: MessageQueue) -> str:
        return queue.broker_name.split("@")[0]

    def client_room(self, client_id: str) -> str:
        return ("hz", "sh")[zlib.crc32(client_id.encode()) % 2]


class TestMachineRoomNearbyConformance(AllocationConformance):
    balanced = False  # a room with one consumer and many queues gives it all of them
    broker_names = ("hz@broker-a", "sh@broker-b", "bj@broker-c")

    @pytest.fixture
    def strategy(self):
        return MachineRoomNearby(averagely, RoomByPrefix())


# --- built-ins -----------------------------------------------------------------------------


def test_the_parameterless_strategies_are_registered_by_name(plugin_host):
    registry = plugin_host.registry.allocation_strategies
    assert registry.get("averagely") is averagely
    assert registry.get("averagely_by_circle") is averagely_by_circle
    assert registry.get("consistent_hash") is consistent_hash
    for name in ("averagely", "averagely_by_circle", "consistent_hash"):
        assert isinstance(registry.get(name), AllocationStrategy)
        assert registry.get(name).name == name


# --- averagely -----------------------------------------------------------------------------


def test_averagely_eight_queues_three_consumers():
    queues = queues_of("broker-a", 8)
    assert shares(averagely, queues, ["c0", "c1", "c2"]) == {
        "c0": queues[0:3],
        "c1": queues[3:6],
        "c2": queues[6:8],
    }


def test_averagely_fewer_queues_than_consumers_leaves_the_last_idle():
    queues = queues_of("broker-a", 2)
    assert shares(averagely, queues, ["c0", "c1", "c2"]) == {
        "c0": [queues[0]],
        "c1": [queues[1]],
        "c2": [],
    }


@pytest.mark.parametrize("consumers", range(1, 6))
@pytest.mark.parametrize("count", range(1, 13))
def test_averagely_hands_out_contiguous_blocks_larger_first(count, consumers):
    queues = queues_of("broker-a", count)
    client_ids = [f"c{i}" for i in range(consumers)]
    blocks = [averagely(GROUP, cid, queues, client_ids) for cid in client_ids]
    assert [queue for block in blocks for queue in block] == queues
    expected_sizes = [count // consumers + (i < count % consumers) for i in range(consumers)]
    assert [len(block) for block in blocks] == expected_sizes


def test_queues_sort_by_topic_then_broker_then_queue_id_as_a_number():
    queues = [
        MessageQueue("TopicB", "broker-a", 0),
        MessageQueue("TopicA", "broker-b", 0),
        MessageQueue("TopicA", "broker-a", 10),
        MessageQueue("TopicA", "broker-a", 2),
    ]
    assert averagely(GROUP, "c0", queues, ["c0"]) == [queues[3], queues[2], queues[1], queues[0]]


def test_client_ids_sort_as_strings():
    queues = queues_of("broker-a", 3)
    # "c10" sorts before "c2": the first block goes to c10
    assert averagely(GROUP, "c10", queues, ["c2", "c10", "c3"]) == [queues[0]]


# --- averagely_by_circle -------------------------------------------------------------------


def test_averagely_by_circle_eight_queues_three_consumers():
    queues = queues_of("broker-a", 8)
    assert shares(averagely_by_circle, queues, ["c0", "c1", "c2"]) == {
        "c0": [queues[0], queues[3], queues[6]],
        "c1": [queues[1], queues[4], queues[7]],
        "c2": [queues[2], queues[5]],
    }


# --- config --------------------------------------------------------------------------------


def test_config_returns_the_configured_queues_whatever_the_route_says():
    configured = [
        MessageQueue("TopicTest", "broker-b", 5),
        MessageQueue("TopicTest", "broker-a", 1),
    ]
    strategy = ByConfig(configured)
    assert strategy.name == "config"
    assert strategy(GROUP, "c1", queues_of("broker-c", 4), ["c0", "c1"]) == configured
    assert strategy(GROUP, "c1", [], ["c1"]) == configured  # the route is not even read
    assert strategy(GROUP, "c9", queues_of("broker-c", 4), ["c0", "c1"]) == []


# --- machine_room --------------------------------------------------------------------------


def test_machine_room_blocks_then_the_remainder_one_each():
    hz, sh, bj = (
        queues_of("hz@broker-a", 4),
        queues_of("sh@broker-b", 3),
        queues_of("bj@broker-c", 2),
    )
    strategy = ByMachineRoom({"hz", "sh"})
    # eligible, sorted: hz0..hz3, sh0..sh2 (7 queues); 7 = 3 * 2 + 1
    assert shares(strategy, bj + sh + hz, ["c0", "c1", "c2"]) == {
        "c0": [hz[0], hz[1], sh[2]],
        "c1": [hz[2], hz[3]],
        "c2": [sh[0], sh[1]],
    }


@pytest.mark.parametrize(
    ("broker_name", "eligible"),
    [
        ("hz@broker-a", True),
        ("hz@broker-a@", True),  # Java's split drops the trailing empty part
        ("hz@broker@a", False),
        ("broker-a", False),
        ("sh@broker-a", False),
        ("@hz", False),
    ],
)
def test_machine_room_reads_the_room_from_the_broker_name(broker_name, eligible):
    queues = queues_of(broker_name, 2)
    owned = ByMachineRoom({"hz"})(GROUP, "c0", queues, ["c0"])
    assert owned == (queues if eligible else [])


# --- consistent_hash -----------------------------------------------------------------------


def ring_point(key: str) -> int:
    """ROUTE.md §7: the first 4 bytes of MD5 of the UTF-8 key, unsigned big-endian."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


def expected_owner(queue: MessageQueue, client_ids: list[str], virtual_nodes: int = 10) -> str:
    points: dict[int, str] = {}
    for cid in sorted(client_ids):
        for k in range(virtual_nodes):
            points[ring_point(f"{cid}-{k}")] = cid
    h = ring_point(
        f"MessageQueue [topic={queue.topic}, brokerName={queue.broker_name},"
        f" queueId={queue.queue_id}]"
    )
    at_or_after = [point for point in points if point >= h]
    return points[min(at_or_after) if at_or_after else min(points)]


def test_md5_hash_is_the_first_four_bytes_big_endian():
    assert md5_hash("a") == 0x0CC175B9  # md5("a") = 0cc175b9c0f1b6a8...
    assert md5_hash("10.0.0.1@4242-3") == ring_point("10.0.0.1@4242-3")


def test_the_queue_key_is_javas_message_queue_to_string():
    queue = MessageQueue("TopicTest", "broker-a", 3)
    assert queue_key(queue) == "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=3]"


def test_consistent_hash_owners_follow_the_md5_ring():
    client_ids = ["10.0.0.1@101", "10.0.0.2@202", "10.0.0.3@303"]
    queues = queues_of("broker-a", 8) + queues_of("broker-b", 8)
    got = shares(consistent_hash, queues, client_ids)
    for cid in client_ids:
        assert got[cid] == [q for q in queues if expected_owner(q, client_ids) == cid]
    assert sum(len(share) for share in got.values()) == len(queues)


def test_consistent_hash_hashes_node_and_queue_keys():
    seen: list[str] = []

    def recording_hash(key: str) -> int:
        seen.append(key)
        return md5_hash(key)

    ConsistentHash(hash_function=recording_hash)(
        GROUP, "c1", [MessageQueue("TopicTest", "broker-a", 3)], ["c1"]
    )
    assert seen == [f"c1-{k}" for k in range(10)] + [
        "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=3]"
    ]


def test_consistent_hash_ring_ties_go_to_the_later_node_and_the_ring_wraps():
    q0, q1, q2, q3 = queues_of("broker-a", 4)
    points = {"a-0": 100, "b-0": 100, "c-0": 300}
    points |= {queue_key(q0): 50, queue_key(q1): 200, queue_key(q2): 400, queue_key(q3): 300}
    strategy = ConsistentHash(virtual_nodes=1, hash_function=points.__getitem__)
    assert shares(strategy, [q3, q2, q1, q0], ["c", "b", "a"]) == {
        "c": [q1, q3],  # 200 goes up to 300; 300 is exactly c's point
        "b": [q0, q2],  # b, sorted after a, took point 100; 400 wraps round to 100
        "a": [],
    }


# --- machine_room_nearby -------------------------------------------------------------------


class RoomBeforeSeparator:
    def broker_room(self, queue):
        return queue.broker_name.split("@")[0]

    def client_room(self, client_id):
        return client_id.split("-")[0]


def test_nearby_keeps_consumers_in_their_room_and_shares_rooms_without_consumers():
    hz, sh, bj = (
        queues_of("hz@broker-a", 4),
        queues_of("sh@broker-b", 2),
        queues_of("bj@broker-c", 3),
    )
    strategy = MachineRoomNearby(averagely, RoomBeforeSeparator())
    assert strategy.name == "machine_room_nearby-averagely"
    assert shares(strategy, hz + sh + bj, ["hz-client-1", "hz-client-2", "sh-client-1"]) == {
        "hz-client-1": [hz[0], hz[1], bj[0]],
        "hz-client-2": [hz[2], hz[3], bj[1]],
        "sh-client-1": [sh[0], sh[1], bj[2]],
    }


def test_nearby_refuses_an_empty_room():
    class NoRoomForSh(RoomBeforeSeparator):
        def broker_room(self, queue):
            return "" if queue.broker_name.startswith("sh") else super().broker_room(queue)

    strategy = MachineRoomNearby(averagely, NoRoomForSh())
    with pytest.raises(ValueError, match="no room for"):
        strategy(GROUP, "hz-client-1", queues_of("sh@broker-b", 1), ["hz-client-1"])


# --- arguments -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("current", "queues", "client_ids", "message"),
    [
        ("", queues_of("broker-a", 1), ["c0"], "current_client_id is empty"),
        ("c0", [], ["c0"], "queues is empty"),
        ("c0", queues_of("broker-a", 1), [], "client_ids is empty"),
        ("c0", queues_of("broker-a", 1), "c0", "not the string"),
        ("c0", queues_of("broker-a", 1), ["c0", "c0"], "'c0' appears more than once"),
        ("c0", queues_of("broker-a", 1) * 2, ["c0"], "appears more than once"),
    ],
)
def test_bad_arguments_are_refused(current, queues, client_ids, message):
    with pytest.raises(ValueError, match=message):
        Averagely()(GROUP, current, queues, client_ids)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="virtual_nodes must be at least 1"):
        ConsistentHash(virtual_nodes=0)
    with pytest.raises(ValueError, match="at least one consumer machine room"):
        ByMachineRoom([])
