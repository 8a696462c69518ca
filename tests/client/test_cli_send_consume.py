"""``rocketmq send`` and ``rocketmq consume`` against a real cluster: the group's place is
kept (only printed messages are committed, signals included), output a program can read,
exit statuses, the consume rate, and QUIC with --tls-ca."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import time

import orjson
import pytest

from rocketmq_core.broker.pull_rates import PullRates
from rocketmq_core.cli import main
from rocketmq_core.client.config import TRUST_CERT_PATH_VARIABLE
from rocketmq_core.testing.cluster import EmbeddedCluster

from .conftest import TOPIC


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster  # one cluster for the module: its tests use fresh names


def spawn(cluster, *args: str) -> subprocess.Popen:
    """``rocketmq ARGS`` as a process of its own, its output piped to the test."""
    command = [sys.executable, "-m", "rocketmq_core.cli", *args, "-n", cluster.namesrv_address]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def committed(rocketmq, group: str, topic: str) -> dict[int, int]:
    """The group's committed offset per queue id, from the broker's consume stats."""
    code, out, _ = rocketmq("group", "progress", "-g", group, "-t", topic, "--json")
    assert code == 0
    return {q["queue"]["queue_id"]: q["consumer_offset"] for q in orjson.loads(out)["queues"]}


def printed_offsets(lines: list[str]) -> dict[int, int]:
    """Per queue id, the offset after the last message printed (``ID QUEUE:OFFSET ...``)."""
    after: dict[int, int] = {}
    for line in lines:
        queue_id, offset = map(int, line.split()[1].split(":"))
        after[queue_id] = max(after.get(queue_id, 0), offset + 1)
    return after


def test_consume_count_commits_only_what_it_printed(rocketmq, cluster, name):
    topic, group = name(), name("CG")
    cluster.create_topic(topic, queues=1)
    assert rocketmq("send", "-t", topic, "--body", "m", "--count", "40")[0] == 0
    consume = ("consume", "-t", topic, "--group", group, "--from", "first")
    code, out, err = rocketmq(*consume, "--count", "1")
    assert (code, err) == (0, "1 message(s)\n")
    assert [line.split()[1] for line in out.splitlines()] == ["0:0"]
    assert committed(rocketmq, group, topic) == {0: 1}  # not the 32 the consumer pulled
    code, out, err = rocketmq(*consume, "--count", "2")
    assert [line.split()[1] for line in out.splitlines()] == ["0:1", "0:2"]  # none skipped
    assert committed(rocketmq, group, topic) == {0: 3}


def test_consume_prints_one_line_per_message_whatever_the_body(rocketmq, cluster, name, tmp_path):
    topic = name()
    cluster.create_topic(topic, queues=1)
    body = tmp_path / "body.txt"
    body.write_bytes(b"line one\nline two\tend\r\n")
    assert rocketmq("send", "-t", topic, "--body-file", str(body), "--count", "2")[0] == 0
    code, out, _ = rocketmq(
        "consume", "-t", topic, "--group", name("CG"), "--from", "first", "--count", "2"
    )
    assert code == 0
    assert [line.split(" ", 3)[3] for line in out.splitlines()] == [
        "line one\\nline two\\tend\\r\\n"
    ] * 2


def test_consume_json_is_json_lines_and_the_summary_goes_to_stderr(rocketmq, cluster, name):
    topic = name()
    cluster.create_topic(topic, queues=2)
    rocketmq("send", "-t", topic, "--body", "hi", "--tags", "T", "--count", "5")
    code, out, err = rocketmq(
        "consume", "-t", topic, "--group", name("CG"), "--from", "first", "--count", "5", "--json"
    )
    assert code == 0 and err == "5 message(s)\n"
    messages = [orjson.loads(line) for line in out.splitlines()]
    assert len(messages) == 5 and {(m["body"], m["tags"]) for m in messages} == {("hi", "T")}


@pytest.mark.parametrize(
    "stop, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"]
)
def test_a_stopped_consumer_commits_what_it_printed(rocketmq, cluster, name, stop, status):
    topic, group = name(), name("CG")
    cluster.create_topic(topic, queues=2)
    rocketmq("send", "-t", topic, "--body", "m", "--count", "10")
    consumer = spawn(cluster, "consume", "-t", topic, "--group", group, "--from", "first")
    try:
        lines = [consumer.stdout.readline() for _ in range(10)]  # all printed; it waits on
        consumer.send_signal(stop)
        out, err = consumer.communicate(timeout=30)
    finally:
        consumer.kill()
    assert consumer.returncode == status and out == ""
    assert err.endswith("10 message(s)\n")
    assert committed(rocketmq, group, topic) == printed_offsets(lines) == {0: 5, 1: 5}


SIGNALLED_TWICE = """
import os, signal, sys
import anyio
from rocketmq_core.cli.stopping import stop_on_signal

async def main():
    async with stop_on_signal() as stop:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                os.kill(os.getpid(), signal.SIGTERM)  # again, while the work cleans up
                await anyio.sleep(0.1)
                print("cleaned up", flush=True)
    return stop.status

sys.exit(anyio.run(main, backend=sys.argv[1]))
"""


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_second_signal_does_not_cut_the_cleanup_short(backend):
    command = [sys.executable, "-c", SIGNALLED_TWICE, backend]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (143, "cleaned up\n", "")


def test_send_output_bodies_and_queue(rocketmq, cluster, name, tmp_path, monkeypatch):
    topic = name()
    cluster.create_topic(topic, queues=4)
    code, out, err = rocketmq("send", "-t", topic, "--body", "x", "--count", "50")
    assert (code, out) == (0, "")  # above 20 messages: the summary only, on stderr
    assert err.startswith("sent 50, failed 0 in ")
    code, out, err = rocketmq("send", "-t", topic, "--body", "x", "--count", "30", "--json")
    results = [orjson.loads(line) for line in out.splitlines()]
    assert code == 0 and len(results) == 30 and {r["status"] for r in results} == {"SEND_OK"}
    body = tmp_path / "body.bin"
    body.write_bytes(b"\x00\x01 from a file")
    code, out, _ = rocketmq("send", "-t", topic, "--body-file", str(body), "--queue", "3")
    (header, row) = out.splitlines()
    assert code == 0 and header.split()[:2] == ["STATUS", "MSG"] and row.split()[-2] == "3"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"from stdin")))
    code, out, _ = rocketmq(
        "send", "-t", topic, "--body", "-", "--keys", "k1 k2", "--tags", "T", "--json"
    )
    (result,) = [orjson.loads(line) for line in out.splitlines()]
    code, out, _ = rocketmq("message", "query", "--id", result["msg_id"], "-t", topic, "--json")
    message = orjson.loads(out)
    assert (message["body"], message["tags"], message["keys"]) == ("from stdin", "T", ["k1", "k2"])
    code, out, _ = rocketmq("message", "query", "--id", results[0]["msg_id"], "-t", topic)
    assert code == 0
    code, _, err = rocketmq("send", "-t", topic, "--body", "x", "--queue", "7")
    assert code == 1 and "--queue 7" in err and "0, 1, 2, 3" in err
    assert main(["send", "-t", topic, "--body-file", str(tmp_path / "none")]) == 2


def test_send_stopped_by_sigterm_says_what_it_sent(rocketmq, cluster, name):
    topic = name()
    cluster.create_topic(topic, queues=4)
    sender = spawn(
        cluster, "send", "-t", topic, "--body", "x", "--count", "10000000", "--concurrency", "4"
    )
    try:
        deadline = time.monotonic() + 30
        # more stored than can be in flight (the first, then 4 at a time): some were confirmed
        while stored(rocketmq, topic) <= 1 + 4 and time.monotonic() < deadline:
            time.sleep(0.2)
        sender.send_signal(signal.SIGTERM)
        out, err = sender.communicate(timeout=30)
    finally:
        sender.kill()
    assert sender.returncode == 143 and out == ""
    assert err.startswith("stopped by SIGTERM: sent ") and err.count("\n") == 1
    sent = int(err.split("sent ")[1].split(",")[0])
    assert 0 < sent <= stored(rocketmq, topic)


def stored(rocketmq, topic: str) -> int:
    out = rocketmq("topic", "stats", "-t", topic, "--json")[1]
    return orjson.loads(out)["total_messages"]


def test_no_such_group_or_topic_exits_1_naming_it(rocketmq, cluster, name):
    group, topic = name("CG"), name()
    code, out, err = rocketmq("group", "progress", "-g", group)
    assert (code, out) == (1, "") and f"consumer group '{group}' does not exist" in err
    cluster.create_topic(topic, queues=1)
    code, _, err = rocketmq("group", "progress", "-g", group, "-t", topic)
    assert code == 1 and f"'{group}' does not exist" in err and err.count("\n") == 1
    missing = name()
    for command in (
        ("topic", "route", "-t", missing),
        ("consume", "-t", missing, "--group", group, "--idle", "1"),
    ):
        code, out, err = rocketmq(*command)
        assert (code, out) == (1, "") and f"topic '{missing}' has no route" in err, command


def test_bad_consume_options_exit_2_before_connecting(capsys):
    nowhere = ["-n", "127.0.0.1:1"]  # nothing listens: the options are refused first
    assert main(["consume", "-t", "T", "--group", "G", "--count", "0", *nowhere]) == 2
    assert capsys.readouterr().err == "rocketmq consume: error: --count must be at least 1, not 0\n"
    assert main(["consume", "-t", "T", "--group", "G", "--idle", "-1", *nowhere]) == 2
    assert "--idle is a number of seconds above 0, not -1.0" in capsys.readouterr().err


def test_send_to_a_missing_topic_follows_the_broker(rocketmq, name):
    # this module's broker creates topics on first send (autoCreateTopicEnable=true)
    topic = name()
    code, _, err = rocketmq("send", "-t", topic, "--body", "x")
    assert code == 0 and err.startswith(f"rocketmq send: topic '{topic}' does not exist")


@pytest.mark.rocketmq(auto_create_topic_enable=False)
def test_send_to_a_missing_topic_fails_where_brokers_do_not_create_it(rocketmq_cluster, capsys):
    code = main(["send", "-t", "Nowhere", "--body", "x", "-n", rocketmq_cluster.namesrv_address])
    err = capsys.readouterr().err.splitlines()
    assert code == 1 and err[-1].startswith("rocketmq send: error: topic 'Nowhere' does not exist")


def test_group_progress_shows_the_consume_rate(rocketmq, cluster, name):
    topic, group = name(), name("CG")
    cluster.create_topic(topic, queues=2)
    rocketmq("send", "-t", topic, "--body", "m", "--count", "30")
    rocketmq("consume", "-t", topic, "--group", group, "--from", "first", "--count", "30")
    code, out, _ = rocketmq("group", "progress", "-g", group, "-t", topic, "--json")
    assert code == 0
    assert orjson.loads(out)["consume_tps"] == pytest.approx(30 / 60)  # 30 in the last minute
    out = rocketmq("group", "progress", "-g", group)[1]
    assert out.splitlines()[-1] == "total lag 0 (consume TPS 0.50)"


def test_pull_rates_is_a_moving_rate_over_the_last_minute():
    now = [1000.0]
    rates = PullRates(clock=lambda: now[0])
    rates.record("G", "A", 60)
    rates.record("G", "A", 0)
    now[0] += 30
    rates.record("G", "A", 60)
    rates.record("G", "B", 6)
    rates.record("Other", "A", 600)
    assert rates.tps("G", ["A"]) == 2.0
    assert rates.tps("G", ["A", "B", "C"]) == 2.1
    now[0] += 30.5  # the first 60 left the window
    assert rates.tps("G", ["A", "B"]) == 1.1
    now[0] += 60
    assert rates.tps("G", ["A", "B"]) == 0.0


def test_admin_commands_reach_quic_with_tls_ca(quic_cluster, quic_certificate, capsys, monkeypatch):
    monkeypatch.delenv(TRUST_CERT_PATH_VARIABLE, raising=False)
    quic = ["-n", quic_cluster.namesrv_endpoint("quic")]
    ca = ["--tls-ca", str(quic_certificate.cert_file)]
    assert main(["send", "-t", TOPIC, "--body", "over quic", *quic, *ca]) == 0
    consume = ["consume", "-t", TOPIC, "--group", "CG", "--from", "first", "--count", "1"]
    assert main([*consume, *quic, *ca]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith(" over quic")
    assert quic_cluster.broker.server.accepted["quic"] >= 2
    assert main(["topic", "route", "-t", TOPIC, *quic]) == 1  # the server is not trusted
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and TRUST_CERT_PATH_VARIABLE in err and "--tls-ca" in err
    assert main(["topic", "route", "-t", TOPIC, *quic, "--tls-ca", "/no/such.pem"]) == 2
    assert "--tls-ca /no/such.pem: no such file" in capsys.readouterr().err


def test_a_consumer_that_cannot_commit_says_so_and_exits_1(tmp_path):
    with EmbeddedCluster(tmp_path / "rocketmq", store="memory") as own:
        own.create_topic("Lost", queues=1)
        assert (
            main(["send", "-t", "Lost", "--body", "m", "--count", "3", "-n", own.namesrv_address])
            == 0
        )
        consumer = spawn(own, "consume", "-t", "Lost", "--group", "CG-lost", "--from", "first")
        try:
            lines = [consumer.stdout.readline() for _ in range(3)]
            own.stop_broker()  # the commit has nowhere to go
            consumer.send_signal(signal.SIGTERM)
            _out, err = consumer.communicate(timeout=60)
        finally:
            consumer.kill()
    assert len(lines) == 3 and all(lines)
    assert consumer.returncode == 1
    assert "3 message(s); error: offsets not committed on" in err
    assert "Traceback" not in err
