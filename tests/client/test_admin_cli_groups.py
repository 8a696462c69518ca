"""``rocketmq group update|delete|consumers|producers``, ``broker-config``, ``cluster
status|stats`` and ``kv``, run in-process against a real cluster over TCP."""

from __future__ import annotations

import re
import time

import pytest

from rocketmq_core.cli import main
from rocketmq_core.client import sync
from rocketmq_core.client.message import Message


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster  # one cluster for the module: its tests use fresh names


def lines(text: str) -> list[list[str]]:
    """A table's rows, split on its column gaps."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.strip().splitlines()]


def until(check, timeout: float = 10.0):
    """Call ``check()`` until it returns something true; return that (fail after timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            assert result, f"still {result!r} after {timeout} s"
            return result
        time.sleep(0.05)


# --- group update / delete ---------------------------------------------------------------


def test_group_update_creates_then_changes_only_what_is_given(rocketmq, cluster, name):
    group = name("CG")
    code, text, _ = rocketmq("group", "update", "-g", group, "--retry-max-times", "3")
    assert code == 0
    assert text.startswith(f"updated subscription group {group} on {cluster.broker_address}\n")
    header, row = lines(text)[1:]
    assert header[:2] == ["BROKER", "CONSUME"] and header[-3:] == [
        "MAX RETRIES",
        "BROKER ID",
        "SLOW BROKER ID",
    ]
    assert row == [cluster.broker_address, "yes", "yes", "no", "1", "3", "0", "1"]
    held = cluster.broker.groups.table[group]
    assert (held.retry_max_times, held.consume_enable) == (3, True)

    code, document, _ = rocketmq(
        "group",
        "update",
        "-g",
        group,
        "-b",
        cluster.broker_address,
        "--consume-enable",
        "false",
        "--orderly",
        "true",
        "--retry-queues",
        "2",
        json=True,
    )
    assert code == 0 and document["group"] == group
    written = document["brokers"][cluster.broker_address]
    assert (written["consume_enable"], written["retry_queue_nums"]) == (False, 2)
    held = cluster.broker.groups.table[group]
    # what was not given keeps its value: the retry count set before
    assert (held.consume_enable, held.consume_message_orderly) == (False, True)
    assert (held.retry_queue_nums, held.retry_max_times) == (2, 3)
    code, groups, _ = rocketmq("group", "list", json=True)
    (listed,) = [g for g in groups if g["config"]["group_name"] == group]
    assert listed["config"]["retry_max_times"] == 3


def test_group_update_refuses_bad_values_as_usage(cluster, capsys, name):
    args = ["group", "update", "-g", name("CG"), "-n", cluster.namesrv_address]
    with pytest.raises(SystemExit) as exited:
        main([*args, "--broadcast", "maybe"])
    assert exited.value.code == 2
    assert "'maybe' is not true or false" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main([*args, "--retry-max-times", "-1"])
    assert exited.value.code == 2
    assert "'-1' is not a whole number >= 0" in capsys.readouterr().err


def test_group_delete_keeps_offsets_unless_asked(rocketmq, cluster, name):
    topic, group = name(), name("CG")
    cluster.create_topic(topic, 1)
    rocketmq("send", "--topic", topic, "--body", "x", "--count", "2")
    for remove in (False, True):
        assert rocketmq("group", "update", "-g", group)[0] == 0
        rocketmq("offset", "reset", "-g", group, "-t", topic, "-s", "now")
        assert cluster.broker.offsets.query(group, topic, 0) == 2
        args = ["group", "delete", "-g", group, *(["--remove-offsets"] if remove else [])]
        code, text, _ = rocketmq(*args)
        assert code == 0
        offsets = "and its offsets " if remove else ""
        assert text.strip() == (
            f"deleted subscription group {group} {offsets}from {cluster.broker_address}"
        )
        assert group not in cluster.broker.groups.table
        assert cluster.broker.offsets.query(group, topic, 0) == (-1 if remove else 2)
    code, document, _ = rocketmq("group", "delete", "-g", group, "-c", "DefaultCluster", json=True)
    assert document == {
        "group": group,
        "brokers": [cluster.broker_address],
        "offsets_removed": False,
    }


# --- who is connected --------------------------------------------------------------------


def test_group_consumers_lists_a_running_push_consumer(rocketmq, cluster, name):
    topic, group = name(), name("CG")
    cluster.create_topic(topic, 2)
    code, _, err = rocketmq("group", "consumers", "-g", group)
    assert code == 1 and err == (
        f"rocketmq group consumers: error: consumer group '{group}' has no online consumer"
        " (asked broker-a)\n"
    )
    consumer = sync.PushConsumer(group, cluster.namesrv_address, listener=lambda messages: None)
    consumer.subscribe(topic, "TagA || TagB")
    with consumer:
        client_id = consumer.instance.client_id
        code, text, _ = until(
            lambda: (r := rocketmq("group", "consumers", "-g", group))[0] == 0 and r
        )
        rows = lines(text)
        assert rows[0] == ["CLIENT ID", "CLIENT ADDRESS", "LANGUAGE", "VERSION"]
        assert rows[1][0] == client_id and rows[1][2] == "PYTHON"
        assert rows[1][1].startswith("127.0.0.1:")
        assert ["TOPIC", "SUBSCRIPTION"] in rows
        assert [topic, "TagA || TagB"] in rows
        assert rows[-1][0].startswith("consume type CONSUME_PASSIVELY, message model CLUSTERING")
        code, document, _ = rocketmq("group", "consumers", "-g", group, json=True)
        assert [c["client_id"] for c in document["connections"]] == [client_id]
        assert document["subscriptions"][topic] == "TagA || TagB"


def test_group_progress_without_a_group_has_a_line_for_each_group(rocketmq, cluster, name):
    topic, busy, idle = name(), name("CG"), name("CG")
    cluster.create_topic(topic, 1)
    assert rocketmq("send", "-t", topic, "--body", "m", "--count", "7")[0] == 0
    assert rocketmq("group", "update", "-g", idle)[0] == 0  # a group that consumed nothing
    consume = ("consume", "-t", topic, "--group", busy, "--from", "first", "--count", "3")
    assert rocketmq(*consume)[0] == 0
    consumer = sync.PushConsumer(busy, cluster.namesrv_address, listener=lambda messages: False)
    consumer.subscribe(topic, "*")
    with consumer:  # online, but every message it gets is given back: the lag stays
        code, document, _ = until(
            lambda: (
                (r := rocketmq("group", "progress", json=True))[0] == 0
                and any(g["group"] == busy and g["consumers"] for g in r[1])
                and r
            )
        )
        by_group = {row["group"]: row for row in document}
        assert by_group[busy]["consumers"] == 1
        assert by_group[busy]["message_model"] == "CLUSTERING"
        assert by_group[busy]["consume_tps"] > 0  # it pulled within the last minute
        assert by_group[idle]["consumers"] == 0 and by_group[idle]["total_lag"] == 0
        code, text, _ = rocketmq("group", "progress", "-t", topic)
    assert code == 0
    rows = lines(text)
    assert rows[0] == [
        "GROUP", "CONSUMERS", "VERSION", "TYPE", "MODEL", "CONSUME TPS", "TOTAL LAG"
    ]  # fmt: skip
    assert busy in [row[0] for row in rows[1:]]
    assert idle not in [row[0] for row in rows[1:]]  # -t: only the groups that consume it


def test_group_producers_lists_a_running_producer(rocketmq, cluster, name):
    topic, group = name(), name("PG")
    cluster.create_topic(topic, 1)
    code, _, err = rocketmq("group", "producers", "-g", group, "-t", topic)
    assert code == 1
    assert err.startswith(
        f"rocketmq group producers: error: producer group '{group}' has no online producer"
        f" on the brokers of '{topic}' (broker-a:"
    )
    assert err.count("\n") == 1
    with sync.Producer(group, cluster.namesrv_address) as producer:
        producer.send(Message(topic, b"hello"))
        client_id = producer.instance.client_id
        code, text, _ = until(
            lambda: (r := rocketmq("group", "producers", "-g", group, "-t", topic))[0] == 0 and r
        )
        rows = lines(text)
        assert rows[0] == ["CLIENT ID", "CLIENT ADDRESS", "LANGUAGE", "VERSION"]
        assert [row[0] for row in rows[1:]] == [client_id]
        code, document, _ = rocketmq("group", "producers", "-g", group, "-t", topic, json=True)
        assert (document["group"], document["topic"]) == (group, topic)
        assert [c["client_id"] for c in document["connections"]] == [client_id]


# --- broker-config -----------------------------------------------------------------------


def test_broker_config_get_and_update(rocketmq, cluster):
    address = cluster.broker_address
    code, text, _ = rocketmq("broker-config", "get", "-b", address)
    assert code == 0
    settings = {k: v.strip() for k, _, v in (line.partition(" =") for line in text.splitlines())}
    assert list(settings) == sorted(settings)
    assert settings["brokerName"] == "broker-a"
    before = cluster.broker.config.max_message_size
    try:
        code, text, _ = rocketmq(
            "broker-config", "update", "-k", "maxMessageSize", "-v", "65536", "-c", "DefaultCluster"
        )
        assert (code, text.strip()) == (
            0,
            f"updated maxMessageSize=65536 on {cluster.broker_address}",
        )
        assert cluster.broker.config.max_message_size == 65536
        code, document, _ = rocketmq("broker-config", "get", "-c", "DefaultCluster", json=True)
        assert document[cluster.broker_address]["maxMessageSize"] == "65536"
        code, text, _ = rocketmq("broker-config", "get", "-c", "DefaultCluster")
        assert text.splitlines()[0] == f"# broker-a {cluster.broker_address}"
    finally:
        rocketmq(
            "broker-config", "update", "-k", "maxMessageSize", "-v", str(before), "-b", address
        )
    assert cluster.broker.config.max_message_size == before


def test_broker_config_update_refuses_junk(rocketmq, cluster, capsys):
    address = cluster.broker_address
    prefix = "rocketmq broker-config update: error: updating broker config"
    code, _, err = rocketmq("broker-config", "update", "-k", "noSuchKey", "-v", "1", "-b", address)
    assert code == 1 and err.startswith(f"{prefix} noSuchKey failed on broker {address}:")
    assert "noSuchKey" in err.split("failed", 1)[1] and err.count("\n") == 1
    code, _, err = rocketmq(
        "broker-config", "update", "-k", "maxMessageSize", "-v", "lots", "-b", address
    )
    assert code == 1 and err.startswith(f"{prefix} maxMessageSize failed on broker {address}:")
    assert "lots" in err and err.count("\n") == 1
    assert cluster.broker.config.max_message_size != "lots"
    code, _, err = rocketmq("broker-config", "update", "-k", "brokerName", "-v", "x", "-b", address)
    assert code == 1 and "NO_PERMISSION" in err and cluster.broker.config.broker_name == "broker-a"
    with pytest.raises(SystemExit) as exited:
        main(["broker-config", "update", "-k", "a", "-v", "1\nb=2", "-b", address])
    assert exited.value.code == 2 and "give one line" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["broker-config", "get"])  # where: -b or -c
    assert exited.value.code == 2


def test_broker_unreachable_is_one_line(rocketmq):
    code, _, err = rocketmq("cluster", "status", "-b", "127.0.0.1:1")
    assert code == 1 and err.count("\n") == 1
    assert err.startswith(
        "rocketmq cluster status: error: reading the runtime info failed:"
        " broker 127.0.0.1:1 did not answer"
    )


# --- cluster status / stats --------------------------------------------------------------


def test_cluster_status(rocketmq, cluster):
    code, text, _ = rocketmq("cluster", "status", "-b", cluster.broker_address)
    assert code == 0
    rows = lines(text)
    assert rows[0] == ["KEY", "VALUE"]
    keys = [row[0] for row in rows[1:]]
    assert keys == sorted(keys) and ["brokerVersionDesc", "V4_9_4"] in rows
    code, document, _ = rocketmq("cluster", "status", json=True)  # the only cluster
    assert document[cluster.broker_address]["brokerVersionDesc"] == "V4_9_4"
    assert set(keys) == set(document[cluster.broker_address])  # every key, as in JSON
    assert {"putTps", "msgPutTotalTodayNow", "commitLogMaxOffset"} <= set(keys)
    code, text, _ = rocketmq("cluster", "status", "-c", "DefaultCluster")
    rows = lines(text)
    assert rows[0] == ["ADDRESS", "KEY", "VALUE"]
    assert [cluster.broker_address, "brokerActive", "true"] in rows
    code, _, err = rocketmq("cluster", "status", "-c", "Nowhere")
    assert code == 1 and "cluster 'Nowhere' is not known to the name server" in err


STATS_HEADER = [
    *("TOPIC", "CONSUMER GROUP", "ACCUMULATION", "IN TPS", "OUT TPS"),
    *("IN MSG 24H", "OUT MSG 24H"),
]


def test_cluster_stats_shows_what_the_brokers_counted(rocketmq, cluster, name):
    topic, quiet, reader, idle = name(), name(), name("CG"), name("CG")
    cluster.create_topic(topic, 2)
    cluster.create_topic(quiet, 1)
    assert rocketmq("send", "--topic", topic, "--body", "x", "--count", "5")[0] == 0
    consume = ("consume", "-t", topic, "--group", reader, "--from", "first", "--count", "5")
    assert rocketmq(*consume)[0] == 0
    rocketmq("offset", "reset", "-g", idle, "-t", topic, "-s", "0")  # lags by 5, never pulls

    # items the brokers never counted answer "not exist": 0, as mqadmin counts them
    code, text, _ = rocketmq("cluster", "stats", "-t", quiet)
    assert code == 0
    assert lines(text) == [STATS_HEADER, [quiet, "-", "0", "0.00", "-", "0", "NO_CONSUMER"]]
    assert lines(rocketmq("cluster", "stats", "-t", quiet, "--active")[1]) == [STATS_HEADER]

    async def next_minute_sample():
        cluster.broker.stats.tick(int(time.time() * 1000) + 10_000)

    cluster.call(next_minute_sample)
    stats = cluster.broker.stats
    put = stats.data("TOPIC_PUT_NUMS", topic).stats_minute
    got = stats.data("GROUP_GET_NUMS", f"{topic}@{reader}").stats_minute
    assert (put.sum, got.sum) == (5, 5) and put.tps > 0 and got.tps > 0
    code, document, _ = rocketmq("cluster", "stats", "-t", topic, json=True)
    assert code == 0
    by_group = {row.pop("group"): row for row in document}
    assert by_group == {
        reader: {
            **{"topic": topic, "accumulation": 0, "in_tps": put.tps, "out_tps": got.tps},
            **{"in_msg_24h": 5, "out_msg_24h": 5},  # the minute's sums until hours pass
        },
        idle: {
            **{"topic": topic, "accumulation": 5, "in_tps": put.tps, "out_tps": 0.0},
            **{"in_msg_24h": 5, "out_msg_24h": 0},
        },
    }
    code, text, _ = rocketmq("cluster", "stats", "-t", topic, "--active")
    rows = lines(text)
    assert rows[0] == STATS_HEADER
    assert sorted(rows[1:]) == [
        [topic, group, lag, f"{put.tps:.2f}", f"{out:.2f}", "5", str(pulled)]
        for group, lag, out, pulled in sorted([(reader, "0", got.tps, 5), (idle, "5", 0.0, 0)])
    ]

    code, document, _ = rocketmq("cluster", "stats", json=True)  # every topic
    assert {row["topic"] for row in document} >= {topic, quiet}
    assert not [row for row in document if row["topic"].startswith(("%RETRY%", "%DLQ%"))]
    code, _, err = rocketmq("cluster", "stats", "-t", name())
    assert code == 1 and "has no route" in err and err.count("\n") == 1


# --- kv ----------------------------------------------------------------------------------


def test_kv_update_get_delete(rocketmq, cluster, name):
    namespace = name("NS")
    code, text, _ = rocketmq("kv", "update", "-s", namespace, "-k", "alpha", "-v", "1;2")
    assert (code, text.strip()) == (0, f"put {namespace} alpha = 1;2")
    assert cluster.namesrv.kv.get(namespace, "alpha") == "1;2"
    rocketmq("kv", "update", "--namespace", namespace, "--key", "beta", "--value", "b")
    code, text, _ = rocketmq("kv", "get", "-s", namespace, "-k", "alpha")
    assert (code, text.strip()) == (0, "1;2")
    code, text, _ = rocketmq("kv", "get", "-s", namespace)
    assert lines(text) == [["KEY", "VALUE"], ["alpha", "1;2"], ["beta", "b"]]
    code, document, _ = rocketmq("kv", "get", "-s", namespace, json=True)
    assert document == {"alpha": "1;2", "beta": "b"}
    code, text, _ = rocketmq("kv", "delete", "-s", namespace, "-k", "alpha")
    assert (code, text.strip()) == (0, f"deleted {namespace} alpha")
    assert cluster.namesrv.kv.get(namespace, "alpha") is None
    code, _, err = rocketmq("kv", "get", "-s", namespace, "-k", "alpha")
    assert code == 1 and err == (
        f"rocketmq kv get: error: the name server has no key 'alpha' in namespace '{namespace}'\n"
    )
    rocketmq("kv", "delete", "-s", namespace, "-k", "beta")
    code, text, _ = rocketmq("kv", "get", "-s", namespace)
    assert (code, text.strip()) == (0, f"namespace {namespace} has no keys")
