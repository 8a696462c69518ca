"""The admin commands of ``rocketmq``, run in-process against a real cluster over TCP."""

from __future__ import annotations

import re
import time
from datetime import datetime

import orjson
import pytest

from rocketmq_core.broker.groups import SubscriptionGroupConfig
from rocketmq_core.cli import main
from rocketmq_core.cli.base import CommandError
from rocketmq_core.cli.offset import parse_timestamp
from rocketmq_core.cli.render import table, timestamp
from rocketmq_core.errors import RocketMQError


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster  # one cluster for the module: its tests use fresh names


@pytest.fixture
def rocketmq(cluster, capsys):
    """``rocketmq ARGS -n <the cluster>``: (exit code, stdout); ``json=True`` parses it."""

    def invoke(*args: str, json: bool = False):
        code = main([*args, "-n", cluster.namesrv_address, *(["--json"] if json else [])])
        out = capsys.readouterr().out
        return code, orjson.loads(out) if json else out

    return invoke


def lines(text: str) -> list[list[str]]:
    """A table's rows, split on its column gaps."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.splitlines()]


def test_cluster_list(rocketmq, cluster):
    code, text = rocketmq("cluster", "list")
    assert code == 0
    header, row = lines(text)
    assert header[:5] == ["CLUSTER", "BROKER", "ID", "ADDRESS", "VERSION"]
    assert row[:5] == [
        "DefaultCluster",
        "broker-a",
        "0",
        cluster.broker_address,
        "V4_9_4",
    ]
    code, document = rocketmq("cluster", "list", json=True)
    assert code == 0
    assert document["clusters"] == {"DefaultCluster": ["broker-a"]}
    assert document["brokers"]["broker-a"]["addresses"] == {"0": cluster.broker_address}
    assert document["runtime"][cluster.broker_address]["brokerVersionDesc"] == "V4_9_4"


def test_topic_create_update_list_route_stats_delete(rocketmq, cluster, name):
    topic, other = name(), name()
    code, text = rocketmq("topic", "create", "-t", topic, "-q", "2")
    assert code == 0
    assert text.startswith(f"created topic {topic} on {cluster.broker_address}\n")
    assert lines(text)[-1][1:] == ["broker-a", f"0={cluster.broker_address}", "2", "2", "RW-"]
    code, document = rocketmq(
        "topic", "create", "-t", other, "-b", cluster.broker_address, "-p", "4", json=True
    )
    assert (code, document["topic"], document["brokers"]) == (0, other, [cluster.broker_address])
    assert document["route"]["queueDatas"][0]["perm"] == 4
    code, text = rocketmq(
        "topic", "update", "-t", topic, "-c", "DefaultCluster", "-r", "2", "-w", "3"
    )
    assert code == 0 and text.startswith(f"updated topic {topic}")
    code, text = rocketmq("topic", "list")
    assert lines(text)[0] == ["TOPIC"] and [topic] in lines(text) and [other] in lines(text)
    code, document = rocketmq("topic", "list", json=True)
    assert {topic, other} <= set(document)
    code, text = rocketmq("topic", "route", "-t", topic)
    assert lines(text)[1][-3:] == ["2", "3", "RW-"]  # read 2, write 3
    code, document = rocketmq("topic", "route", "-t", topic, json=True)
    assert document["queueDatas"][0]["writeQueueNums"] == 3
    assert document["brokerDatas"][0]["brokerAddrs"] == {"0": cluster.broker_address}
    rocketmq("send", "--topic", topic, "--body", "x", "--count", "4")
    code, text = rocketmq("topic", "stats", "-t", topic)
    assert code == 0
    assert lines(text)[0] == [
        "BROKER",
        "QUEUE",
        "MIN OFFSET",
        "MAX OFFSET",
        "MESSAGES",
        "LAST UPDATED",
    ]
    assert text.rstrip().endswith(f"4 messages in {topic}")
    code, document = rocketmq("topic", "stats", "-t", topic, json=True)
    assert document["total_messages"] == 4
    assert [q["queue"]["queue_id"] for q in document["queues"]] == [0, 1, 2]
    code, text = rocketmq("topic", "delete", "-t", topic)
    assert (code, text.strip()) == (
        0,
        f"deleted topic {topic} from {cluster.broker_address} and the name servers",
    )
    code, document = rocketmq("topic", "delete", "-t", other, "-c", "DefaultCluster", json=True)
    assert document == {"topic": other, "brokers": [cluster.broker_address]}
    code, document = rocketmq("topic", "list", json=True)
    assert topic not in document and other not in document


def test_send_then_query_by_key_and_by_id(rocketmq, cluster, name):
    topic = name()
    cluster.create_topic(topic, 2)
    code, text = rocketmq("send", "--topic", topic, "--body", "hello", "--keys", "k1 k2")
    assert code == 0
    header, row = lines(text)
    assert header == ["STATUS", "MSG ID", "OFFSET MSG ID", "BROKER", "QUEUE", "QUEUE OFFSET"]
    assert row[0] == "SEND_OK"
    again = f"send --topic {topic} --body again --tags TagA --keys k1 --count 2 --json"
    code, out = rocketmq(*again.split())
    sent = [orjson.loads(line) for line in out.splitlines()]  # JSON Lines: one per message
    assert code == 0 and [r["status"] for r in sent] == ["SEND_OK", "SEND_OK"]
    code, text = rocketmq("message", "query", "--topic", topic, "--key", "k1")
    rows = lines(text)
    assert rows[0] == ["MSG ID", "BROKER", "QUEUE", "OFFSET", "STORED", "TAGS", "KEYS", "BYTES"]
    assert len(rows) == 4
    code, found = rocketmq("message", "query", "--topic", topic, "--key", "k2", json=True)
    assert [(m["body"], m["keys"]) for m in found] == [("hello", ["k1", "k2"])]
    code, text = rocketmq("message", "query", "--topic", topic, "--key", "none")
    assert text.strip() == f"no message with key 'none' in {topic}"
    first = sent[0]
    code, text = rocketmq("message", "query", "--id", first["offset_msg_id"])
    fields = {row[0]: row[1:] for row in lines(text)}
    assert fields["msg id"] == [first["msg_id"]]
    assert fields["tags"] == ["TagA"] and fields["body"] == ["again"]
    assert fields["stored"][0].endswith(f"on {cluster.broker_address}")
    code, message = rocketmq("message", "query", "--id", first["msg_id"], "-t", topic, json=True)
    assert (message["offset_msg_id"], message["body"]) == (first["offset_msg_id"], "again")


def test_group_list_and_progress(rocketmq, cluster, name):
    topic, group = name(), name("CG")
    cluster.create_topic(topic, 2)

    async def create_group():
        cluster.broker.groups.update(SubscriptionGroupConfig(group, retry_max_times=5))

    cluster.call(create_group)
    code, text = rocketmq("group", "list")
    assert code == 0
    assert lines(text)[0][:3] == ["GROUP", "BROKERS", "CONSUME"]
    row = next(row for row in lines(text) if row[0] == group)
    assert row[1:4] == ["broker-a", "yes", "yes"] and row[-1] == "5"
    code, groups = rocketmq("group", "list", json=True)
    (listed,) = [g for g in groups if g["config"]["group_name"] == group]
    assert listed["brokers"] == ["broker-a"] and listed["config"]["retry_max_times"] == 5
    code, text = rocketmq("group", "progress", "-g", group, "-t", topic)
    assert code == 0  # no message yet: every queue at 0
    rocketmq("send", "--topic", topic, "--body", "x", "--count", "3")
    rocketmq("offset", "reset", "-g", group, "-t", topic, "-s", "0")
    code, text = rocketmq("group", "progress", "-g", group)
    rows = lines(text)
    assert rows[0] == [
        "TOPIC",
        "BROKER",
        "QUEUE",
        "BROKER OFFSET",
        "CONSUMER OFFSET",
        "LAG",
        "LAST CONSUMED",
    ]
    assert [row[0] for row in rows[1:3]] == [topic, topic]
    assert rows[-1] == ["total lag 3 (consume TPS 0.00)"]
    code, stats = rocketmq("group", "progress", "-g", group, "-t", topic, json=True)
    assert (stats["total_lag"], stats["broker_offset_total"]) == (3, 3)
    assert [q["lag"] for q in stats["queues"]] == [
        q["broker_offset"] - q["consumer_offset"] for q in stats["queues"]
    ]
    code, text = rocketmq("group", "progress", "-g", group)
    assert code == 0 and "has no offsets" not in text
    unknown = name("CG")
    assert rocketmq("group", "progress", "-g", unknown) == (1, "")  # stderr names it


def test_offset_reset_by_time(rocketmq, cluster, name):
    topic, group = name(), name("CG")
    cluster.create_topic(topic, 1)
    rocketmq("send", "--topic", topic, "--body", "x", "--count", "2")
    code, text = rocketmq("offset", "reset", "-g", group, "-t", topic, "-s", "now")
    assert code == 0
    assert lines(text)[-1] == ["broker-a", "0", "2", "committed (group offline)"]
    code, result = rocketmq(
        "offset", "reset", "-g", group, "-t", topic, "-s", "1970-01-02", json=True
    )
    assert [(o["queue"]["queue_id"], o["offset"], o["online"]) for o in result["offsets"]] == [
        (0, 0, False)
    ]
    assert result["timestamp"] == int(datetime(1970, 1, 2).timestamp() * 1000)


def test_namesrv_comes_from_the_environment(cluster, capsys, monkeypatch):
    monkeypatch.setenv("NAMESRV_ADDR", cluster.namesrv_address)
    assert main(["topic", "list", "--json"]) == 0
    assert "TBW102" in orjson.loads(capsys.readouterr().out)


def test_errors_are_one_line_on_stderr_and_exit_1(cluster, capsys, name):
    def rocketmq(*args):
        code = main([*args, "-n", cluster.namesrv_address])
        return code, capsys.readouterr()

    code = main(["topic", "list", "-n", "127.0.0.1:1"])
    captured = capsys.readouterr()
    assert code == 1 and captured.out == ""
    assert captured.err.startswith("rocketmq topic list: error: listing topics failed:")
    assert "127.0.0.1:1" in captured.err and captured.err.count("\n") == 1
    missing = name()
    code, captured = rocketmq("topic", "stats", "-t", missing)
    assert code == 1 and captured.err == (
        f"rocketmq topic stats: error: topic '{missing}' has no route:"
        f" No topic route info in name server for the topic: {missing}\n"
    )
    code, captured = rocketmq("offset", "reset", "-g", "G", "-t", missing, "-s", "yesterday")
    assert code == 1 and "cannot read timestamp 'yesterday'" in captured.err
    code, captured = rocketmq("message", "query", "--key", "k")
    assert code == 1 and "needs the topic" in captured.err
    assert main(["topic"]) == 2  # no action: usage
    assert "usage: rocketmq topic {create|update" in capsys.readouterr().err


def test_parse_timestamp_and_render_helpers():
    now = 1_700_000_000_000
    assert parse_timestamp("now", now) == now
    assert parse_timestamp("1234", now) == 1234
    assert parse_timestamp("-1", now) == -1
    assert parse_timestamp("2024-05-01T10:30:00Z", now) == 1_714_559_400_000
    assert parse_timestamp("2024-05-01T10:30:00.250+00:00", now) == 1_714_559_400_250
    local = int(datetime(2024, 5, 1, 10, 30, 0, 123_000).timestamp() * 1000)
    assert parse_timestamp("2024-05-01#10:30:00:123", now) == local
    assert parse_timestamp("2024-05-01 10:30:00.123", now) == local
    with pytest.raises(CommandError) as error:
        parse_timestamp("soon", now)
    assert isinstance(error.value, RocketMQError)  # the one base a caller catches
    assert table(["A", "NUMBER"], [["x", 5], ["long", 10]]) == (
        "A     NUMBER\nx          5\nlong      10"
    )
    assert timestamp(0) == "-"
    assert timestamp(int(time.time() * 1000)).count(":") == 2


def test_consume_prints_what_send_sent_and_commits(rocketmq, cluster, name, capsys):
    topic = name()
    cluster.create_topic(topic, queues=1)
    assert rocketmq("send", "--topic", topic, "--body", "hi", "--tags", "T", "--count", "3")[0] == 0
    code, out = rocketmq(
        "consume", "--topic", topic, "--group", name("G"), "--from", "first", "--count", "2"
    )
    assert code == 0
    printed = out.splitlines()  # the summary, "2 message(s)", went to stderr
    assert len(printed) == 2
    assert printed[0].endswith(" 0:0 tags=T hi") and printed[1].endswith(" 0:1 tags=T hi")
    group = name("G")
    code = main(
        [
            "consume",
            "--topic",
            topic,
            "--group",
            group,
            "--from",
            "first",
            "--idle",
            "0.5",
            "--json",
            "-n",
            cluster.namesrv_address,
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert [orjson.loads(line)["queue_offset"] for line in out] == [0, 1, 2]
    # the group committed: run again, nothing new
    code = main(
        [
            "consume",
            "--topic",
            topic,
            "--group",
            group,
            "--idle",
            "0.5",
            "-n",
            cluster.namesrv_address,
        ]
    )
    captured = capsys.readouterr()
    assert code == 0 and (captured.out, captured.err) == ("", "0 message(s)\n")
