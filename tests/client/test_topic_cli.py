"""``rocketmq topic create|update|delete`` refusals, run in-process against a real cluster:
existing topics, system topics, permissions."""

from __future__ import annotations

import pytest

from rocketmq_core.cli import main
from rocketmq_core.client.admin import Admin
from rocketmq_core.client.admin_types import AdminError


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster  # one cluster for the module: its tests use fresh names


def test_create_refuses_an_existing_topic_and_update_changes_it(rocketmq, cluster, name):
    topic = name()
    code, out, _ = rocketmq("topic", "create", "-t", topic, "-q", "2")
    assert code == 0 and out.startswith(f"created topic {topic}")
    code, out, err = rocketmq("topic", "create", "-t", topic, "-q", "8")
    assert (code, out) == (1, "")
    assert err == (
        f"rocketmq topic create: error: topic {topic} exists on broker-a:"
        " use `rocketmq topic update` to change it\n"
    )
    assert cluster.broker.topics.get(topic).write_queue_nums == 2  # untouched
    code, out, _ = rocketmq("topic", "update", "-t", topic, "-q", "8")
    assert code == 0 and out.startswith(f"updated topic {topic}")
    assert cluster.broker.topics.get(topic).write_queue_nums == 8


def test_update_creates_a_topic_that_does_not_exist(rocketmq, cluster, name):
    topic = name()
    code, out, _ = rocketmq("topic", "update", "-t", topic, "-q", "3")
    assert code == 0 and out.startswith(f"updated topic {topic}")
    assert cluster.broker.topics.get(topic).write_queue_nums == 3


@pytest.mark.parametrize("action", ["create", "update"])
def test_tbw102_cannot_be_changed_and_auto_creation_keeps_working(rocketmq, cluster, name, action):
    before = cluster.broker.topics.get("TBW102").to_json()
    code, out, err = rocketmq("topic", action, "-t", "TBW102", "-p", "6")
    assert (code, out) == (1, "")
    assert err.count("\n") == 1  # one line
    assert err.startswith(f"rocketmq topic {action}: error: ")
    assert "The topic[TBW102] is a system topic" in err
    assert cluster.broker.topics.get("TBW102").to_json() == before
    auto_created = name("Auto")
    code, out, err = rocketmq("send", "--topic", auto_created, "--body", "x")
    assert code == 0, err
    assert "SEND_OK" in out


@pytest.mark.parametrize("topic", ["SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "broker-a"])
def test_system_topics_cannot_be_deleted(rocketmq, cluster, topic):
    code, _, err = rocketmq("topic", "delete", "-t", topic, "-c", "DefaultCluster")
    assert code == 1
    assert err.count("\n") == 1
    assert f"The topic[{topic}] is a system topic" in err
    assert cluster.broker.topics.get(topic) is not None


@pytest.mark.parametrize("perm", ["9", "-1", "RW"])
def test_a_bad_permission_is_bad_usage(rocketmq, name, perm):
    with pytest.raises(SystemExit) as exited:
        rocketmq("topic", "create", "-t", name(), "-p", perm)
    assert exited.value.code == 2


def test_a_bad_permission_says_which_values_work(cluster, capsys, name):
    with pytest.raises(SystemExit):
        main(["topic", "create", "-t", name(), "-p", "9", "-n", cluster.namesrv_address])
    err = capsys.readouterr().err
    assert "'9' is not a topic permission: use 2 (W), 4 (R) or 6 (RW)" in err


def test_perm_help_lists_every_value(capsys):
    with pytest.raises(SystemExit):
        main(["topic", "create", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for value in ("2 W", "4 R", "6 RW", "0 nobody", "add 1 (X)", "0-7"):
        assert value in text


@pytest.mark.anyio
async def test_admin_refuses_a_bad_permission_before_asking_a_broker(cluster, name):
    topic = name()
    async with Admin(cluster.namesrv_address) as admin:
        with pytest.raises(AdminError, match=r"permission 8 is invalid: use 2 \(W\)"):
            await admin.create_topic(topic, perm=8)
    assert cluster.broker.topics.get(topic) is None
