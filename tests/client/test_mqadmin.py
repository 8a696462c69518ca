"""Apache's scripts over ``rocketmq``: ``mqadmin``'s translation table (pure), mqadmin and
rocketmq run side by side against a real cluster, ``rocketmq message query --offset`` and
``message print`` on real messages, and ``mqnamesrv``/``mqbroker`` as real processes."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sysconfig
import time

import orjson
import pytest

from rocketmq_core.cli import main
from rocketmq_core.cli import mqadmin as table
from rocketmq_core.cli.mqadmin import How, UsageError, mqadmin, translate
from rocketmq_core.cli.rocketmq import build_parser
from rocketmq_core.client import sync
from rocketmq_core.client.message import Message
from rocketmq_core.errors import RocketMQError
from rocketmq_core.plugins import load_plugins
from rocketmq_core.protocol.heartbeat import MessageQueue

# --- the translation table ----------------------------------------------------------------

# (mqadmin arguments, the rocketmq arguments they become): every command, every option
# that maps onto one of ours
TRANSLATIONS = [
    (
        "updateTopic -c DefaultCluster -t T -r 4 -w 2 -p 6 -o true",
        "topic update --queues 8 --cluster DefaultCluster --topic T"
        " --read-queues 4 --write-queues 2 --perm 6 --order",
    ),
    (
        "updateTopic --brokerAddr h:1 --topic T -o false",
        "topic update --queues 8 --broker h:1 --topic T",
    ),
    ("deleteTopic -t T -c C", "topic delete --topic T --cluster C"),
    (
        "updateSubGroup -c C -g G -s true -d false -o true -q 2 -r 3 -i 0 -w 1",
        "group update --cluster C --group G --consume-enable true --broadcast false"
        " --orderly true --retry-queues 2 --retry-max-times 3 --broker-id 0 --slow-broker-id 1",
    ),
    (
        "deleteSubGroup -b h:1 -g G -r true",
        "group delete --broker h:1 --group G --remove-offsets",
    ),
    ("updateSubGroup -b h:1 -g G", "group update --broker h:1 --group G"),
    ("deleteSubGroup -c C -g G -r false", "group delete --cluster C --group G"),
    (
        "updateBrokerConfig -c C -k maxMessageSize -v 65536",
        "broker-config update --cluster C --key maxMessageSize --value 65536",
    ),
    ("getBrokerConfig -c C", "broker-config get --cluster C"),
    (
        "updateBrokerConfig -b h:1 -k maxMessageSize -v 65536",
        "broker-config update --broker h:1 --key maxMessageSize --value 65536",
    ),
    ("topicRoute -t T -l", "topic route --topic T"),
    ("topicStatus -t T -c C", "topic stats --topic T"),
    ("brokerStatus -c C", "cluster status --cluster C"),
    ("brokerStatus -b h:1", "cluster status --broker h:1"),
    ("queryMsgById -t T -i ID", "message query --topic T --id ID"),
    (
        "queryMsgById -t T -i ID -g G -d C",
        "message consume-directly --topic T --id ID --group G --client-id C",
    ),
    (
        "queryMsgByKey -t T -k K -b 0 -e now -m 5",
        "message query --max-num 64 --topic T --key K --begin 0 --end now --max-num 5",
    ),
    (
        "queryMsgByOffset -t T -b broker-a -i 1 -o 7",
        "message query --topic T --broker-name broker-a --queue 1 --offset 7",
    ),
    (
        "printMsg -t T -c gbk -s A -b 2026-11-22#08:00:00:000 -e now -d false",
        "message print --topic T --charset gbk --tags A --begin 2026-11-22#08:00:00:000"
        " --end now --no-body",
    ),
    ("producerConnection -g PG -t T", "group producers --group PG --topic T"),
    ("consumerConnection -g G", "group consumers --group G"),
    ("consumerProgress -g G -t T -c C", "group progress --group G --topic T"),
    ("consumerProgress", "group progress"),
    ("clusterList", "cluster list"),
    ("topicList -n h:9876", "topic list --namesrv h:9876"),
    (
        "updateKvConfig -s NS -k K -v V",
        "kv update --namespace NS --key K --value V",
    ),
    ("deleteKvConfig -s NS -k K", "kv delete --namespace NS --key K"),
    (
        "resetOffsetByTime -g G -t T -s now -f false -c C",
        "offset reset --group G --topic T --timestamp now --no-force",
    ),
    ("resetOffsetByTime -g G -t T -s 0 -f true", "offset reset --group G --topic T --timestamp 0"),
    ("statsAll -a -t T", "cluster stats --active --topic T"),
    ("getBrokerConfig -b h:1 --json", "broker-config get --broker h:1 --json"),
    (
        "sendMessage -t T -p hi -k K1 -c A -i 2",
        "send --topic T --body hi --keys K1 --tags A --queue 2",
    ),
    (
        "consumeMessage -t T -g G -c 5",
        "consume --group TOOLS_CONSUMER --from first --count 128 --idle 3"
        " --topic T --group G --count 5",
    ),
    ("UPDATEtopic -c C -t T", "topic update --queues 8 --cluster C --topic T"),  # any case
    (
        "updateAclConfig -b B -a RocketMQ2 -s 12345678 -w 10.0.0.* -i PUB -u SUB"
        " -t T=PUB,U=SUB -g G=SUB -m true",
        "acl update --broker B --account RocketMQ2 --secret 12345678 --white-address 10.0.0.*"
        " --default-topic-perm PUB --default-group-perm SUB --topic-perms T=PUB,U=SUB"
        " --group-perms G=SUB --admin true",
    ),
    (
        "updateAclConfig -c C -a RocketMQ2 -s 12345678",
        "acl update --cluster C --account RocketMQ2 --secret 12345678",
    ),
    ("deleteAclConfig -c C -a RocketMQ2", "acl delete --cluster C --account RocketMQ2"),
    ("deleteAclConfig -b B -a RocketMQ2", "acl delete --broker B --account RocketMQ2"),
    ("updateGlobalWhiteAddr -c C -g 10.*", "acl white --cluster C --addresses 10.*"),
    ("clusterAclConfigVersion -b B", "acl version --broker B"),
    ("getAclConfig -c C", "acl get --cluster C"),
    (
        "updateGlobalWhiteAddr -b B -g 10.10.*.*,192.168.0.* -p /home/conf/acl/x.yml",
        "acl white --broker B --addresses 10.10.*.*,192.168.0.* --acl-file /home/conf/acl/x.yml",
    ),
    ("clusterAclConfigVersion -c C", "acl version --cluster C"),
    ("getAclConfig -b B", "acl get --broker B"),
]


@pytest.fixture(scope="module")
def rocketmq_parser():
    return build_parser(load_plugins())


@pytest.mark.parametrize(("apache", "ours"), TRANSLATIONS, ids=[t[0] for t in TRANSLATIONS])
def test_translation(apache, ours, rocketmq_parser):
    translated = translate(apache.split())
    assert translated == ours.split()
    rocketmq_parser.parse_args(translated)  # rocketmq has that command and those options


def test_the_table_covers_every_command_and_each_mapped_option():
    commands = {apache.split()[0].lower() for apache, _ in TRANSLATIONS}
    assert commands == {command.name.lower() for command in table.COMMANDS}
    assert len(table.COMMANDS) == 29
    for command in table.COMMANDS:
        cases = [ours for apache, ours in TRANSLATIONS if apache.split()[0] == command.name]
        for flag in command.flags:
            if flag.how in (How.VALUE, How.SWITCH, How.IF_TRUE, How.IF_FALSE):
                if flag.long in ("namesrvAddr", "json"):
                    continue  # common to all: shown by topicList and getBrokerConfig
                assert any(flag.to in ours.split() for ours in cases), (command.name, flag)


def required_argv(command: table.Command) -> list[str]:
    argv = [command.name]
    for flag in command.flags:
        if flag.required or flag.long in command.one_of[:1]:
            argv += [f"--{flag.long}", "X"]
    return argv


REFUSED = [
    (command, flag)
    for command in (*table.COMMANDS, table.MQNAMESRV, table.MQBROKER)
    for flag in command.flags
    if flag.how is How.REFUSED
]


@pytest.mark.parametrize(
    ("command", "flag"), REFUSED, ids=[f"{c.name} {f.spelling}" for c, f in REFUSED]
)
def test_a_refused_option_is_one_error_naming_it(command, flag):
    argv = required_argv(command)[1:] + [f"--{flag.long}"] + (["x"] if flag.has_value else [])
    with pytest.raises(UsageError) as error:
        table.translate_with(command, argv)
    message = str(error.value)
    assert message.startswith(f"{flag.spelling} is not supported: ") and "\n" not in message
    assert isinstance(error.value, RocketMQError)  # the one base a caller catches


IGNORED = [
    (command, flag)
    for command in (*table.COMMANDS, table.MQNAMESRV)
    for flag in command.flags
    if flag.how is How.IGNORED
]


@pytest.mark.parametrize(
    ("command", "flag"), IGNORED, ids=[f"{c.name} {f.spelling}" for c, f in IGNORED]
)
def test_an_ignored_option_changes_nothing(command, flag):
    argv = required_argv(command)[1:]
    extra = [f"-{flag.short}"] + (["x"] if flag.has_value else [])
    assert table.translate_with(command, argv + extra) == table.translate_with(command, argv)


def test_usage_errors(capsys):
    assert mqadmin(["updateTopc", "-t", "T"]) == 2
    assert capsys.readouterr().err == (
        "mqadmin: error: no command 'updateTopc'; did you mean updateTopic?"
        " ('mqadmin help' lists them)\n"
    )
    assert mqadmin(["help", "nothingLikeIt"]) == 2
    assert "did you mean" not in capsys.readouterr().err
    for argv, expected in [
        (["updateTopic", "-t", "T"], "one of the arguments -b/--brokerAddr -c/--clusterName"),
        (["updateTopic", "-c", "C", "-t", "T", "-u", "true"], "-u/--unit is not supported"),
        (["updateTopic", "-c", "C", "-t", "T", "-o", "yes"], "-o/--order takes true or false"),
        (["topicList", "-x"], "unrecognized arguments: -x"),
        (["consumerConnection"], "the following arguments are required: -g/--consumerGroup"),
    ]:
        assert mqadmin(argv) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err.startswith(f"mqadmin {argv[0]}: error: {expected}")
        assert captured.err.count("\n") == 1 and "Traceback" not in captured.err


def test_help_lists_commands_and_shows_options(capsys):
    for argv in ([], ["help"]):
        assert mqadmin(argv) == 0
        listing = capsys.readouterr().out
        names = re.findall(r"^   (\S+) ", listing, re.MULTILINE)
        assert names == [command.name for command in table.COMMANDS]
        assert "See 'mqadmin help <command>'" in listing
    assert mqadmin(["help", "queryMsgByOffset"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: mqadmin queryMsgByOffset")
    assert "Runs: rocketmq message query" in text
    for option in ("--brokerName", "--queueId", "--offset", "--bodyFormat", "--namesrvAddr"):
        assert option in text
    assert "not supported: bodies are shown as text" in " ".join(text.split())
    assert mqadmin(["printMsg", "-h"]) == 0
    assert "--printBody" in capsys.readouterr().out


# --- mqadmin and rocketmq side by side, on a real cluster --------------------------------


@pytest.fixture(scope="module")
def cluster(module_cluster):
    return module_cluster  # one cluster for the module: its tests use fresh names


@pytest.fixture
def run(cluster, capsys):
    """``run(mqadmin_args, rocketmq_args)``: both against the cluster; each result is
    (exit code, stdout); ``json=True`` adds --json to both and parses stdout."""

    def invoke(script, args: str | list[str], json: bool = False):
        argv = args.split() if isinstance(args, str) else args
        code = script([*argv, "-n", cluster.namesrv_address, *(["--json"] if json else [])])
        out = capsys.readouterr().out
        return code, (orjson.loads(out) if json and code == 0 else out)

    def both(apache, ours, json: bool = False):
        return invoke(mqadmin, apache, json), invoke(main, ours, json)

    both.mqadmin = lambda args, json=False: invoke(mqadmin, args, json)
    both.rocketmq = lambda args, json=False: invoke(main, args, json)
    return both


def test_reading_commands_print_what_rocketmq_prints(run, cluster, name):
    topic = name()
    cluster.create_topic(topic, 2)
    apache, ours = run("topicList", "topic list", json=True)
    assert apache == ours and apache[0] == 0 and topic in apache[1]
    apache, ours = run(f"topicRoute -t {topic}", f"topic route -t {topic}")
    assert apache == ours and apache[0] == 0 and "broker-a" in apache[1]
    apache, ours = run(f"topicStatus -t {topic}", f"topic stats -t {topic}")
    assert apache == ours and apache[1].split()[:4] == ["BROKER", "QUEUE", "MIN", "OFFSET"]
    (code, listed), (_, ours) = run("clusterList", "cluster list", json=True)
    assert code == 0 and listed["clusters"] == ours["clusters"] == {"DefaultCluster": ["broker-a"]}
    address = cluster.broker_address
    apache, ours = run(f"getBrokerConfig -b {address}", f"broker-config get -b {address}", True)
    assert apache == ours and apache[1][address]["brokerName"] == "broker-a"
    (code, status), (_, ours) = run(f"brokerStatus -b {address}", f"cluster status -b {address}")
    assert code == 0 and "brokerVersionDesc" in status and "brokerVersionDesc" in ours
    apache, ours = run(f"statsAll -t {topic}", f"cluster stats -t {topic}")
    assert apache == ours and apache[1].split()[-4:] == ["0.00", "-", "0", "NO_CONSUMER"]


def test_topic_create_update_delete(run, name):
    topic = name()
    code, text = run.mqadmin(f"updateTopic -c DefaultCluster -t {topic}")
    assert code == 0 and text.startswith(f"updated topic {topic} on ")
    code, route = run.rocketmq(f"topic route -t {topic}", json=True)
    queues = route["queueDatas"][0]
    assert (queues["readQueueNums"], queues["writeQueueNums"], queues["perm"]) == (8, 8, 6)
    assert run.mqadmin(f"updateTopic -c DefaultCluster -t {topic} -r 4 -w 4 -p 4")[0] == 0
    code, route = run.rocketmq(f"topic route -t {topic}", json=True)
    queues = route["queueDatas"][0]
    assert (queues["readQueueNums"], queues["writeQueueNums"], queues["perm"]) == (4, 4, 4)
    code, text = run.mqadmin(f"deleteTopic -t {topic} -c DefaultCluster")
    assert code == 0 and text.startswith(f"deleted topic {topic}")
    assert topic not in run.rocketmq("topic list", json=True)[1]


def test_subscription_groups_and_kv_config(run, name):
    group = name("CG")
    assert run.mqadmin(f"updateSubGroup -c DefaultCluster -g {group} -r 3 -o true")[0] == 0
    code, groups = run.rocketmq("group list", json=True)
    config = {g["config"]["group_name"]: g["config"] for g in groups}[group]
    assert (config["retry_max_times"], config["consume_message_orderly"]) == (3, True)
    assert run.mqadmin(f"deleteSubGroup -c DefaultCluster -g {group} -r true")[0] == 0
    code, groups = run.rocketmq("group list", json=True)
    assert group not in {g["config"]["group_name"] for g in groups}

    namespace = name("NS")
    assert run.mqadmin(f"updateKvConfig -s {namespace} -k color -v blue")[0] == 0
    code, text = run.rocketmq(f"kv get -s {namespace} -k color")
    assert code == 0 and "blue" in text
    assert run.mqadmin(f"deleteKvConfig -s {namespace} -k color")[0] == 0
    code, text = run.rocketmq(f"kv get -s {namespace} -k color")
    assert "blue" not in text


def test_broker_config_update(run, cluster):
    address = cluster.broker_address
    code, before = run.rocketmq(f"broker-config get -b {address}", json=True)
    old = before[address]["maxMessageSize"]
    try:
        code, _ = run.mqadmin(f"updateBrokerConfig -b {address} -k maxMessageSize -v 65536")
        assert code == 0
        code, after = run.mqadmin(f"getBrokerConfig -b {address}", json=True)
        assert after[address]["maxMessageSize"] == "65536"
    finally:
        run.rocketmq(f"broker-config update -b {address} -k maxMessageSize -v {old}")


def test_messages_send_query_print_consume_progress_reset(run, cluster, name):
    topic, group = name(), name("CG")
    cluster.create_topic(topic, 1)
    sent = []
    for i in range(3):
        code, text = run.mqadmin(f"sendMessage -t {topic} -p body-{i} -k key-{i} -c Tag{i}")
        assert code == 0 and "SEND_OK" in text
        sent.append(run.rocketmq(f"message query -t {topic} -k key-{i}", json=True)[1][0])
    assert [m["body"] for m in sent] == ["body-0", "body-1", "body-2"]

    apache, ours = run(f"queryMsgByKey -t {topic} -k key-1", f"message query -t {topic} -k key-1")
    assert apache == ours and apache[0] == 0 and sent[1]["msg_id"] in apache[1]
    offset_id = sent[2]["offset_msg_id"]
    apache, ours = run(f"queryMsgById -t {topic} -i {offset_id}", f"message query -i {offset_id}")
    assert apache == ours and "body-2" in apache[1]
    apache, ours = run(
        f"queryMsgByOffset -t {topic} -b broker-a -i 0 -o 1",
        f"message query -t {topic} --broker-name broker-a --queue 0 --offset 1",
        json=True,
    )
    assert apache == ours and (apache[1]["msg_id"], apache[1]["body"]) == (
        sent[1]["msg_id"],
        "body-1",
    )
    apache, ours = run(
        f"printMsg -t {topic} -s Tag0||Tag2",
        ["message", "print", "-t", topic, "--tags", "Tag0||Tag2"],
    )
    assert apache == ours and "body-0" in apache[1] and "body-1" not in apache[1]

    code, text = run.mqadmin(f"consumeMessage -t {topic} -g {group} -c 2")
    assert code == 0 and re.findall(r"body-\d", text) == ["body-0", "body-1"]
    apache, ours = run(
        f"consumerProgress -g {group} -t {topic}",
        f"group progress -g {group} -t {topic}",
        json=True,
    )
    assert apache == ours and [q["consumer_offset"] for q in apache[1]["queues"]] == [2]

    code, _ = run.mqadmin(f"resetOffsetByTime -g {group} -t {topic} -s 0")
    assert code == 0
    code, progress = run.rocketmq(f"group progress -g {group} -t {topic}", json=True)
    assert [q["consumer_offset"] for q in progress["queues"]] == [0]

    code, text = run.mqadmin(f"statsAll -t {topic}")
    assert code == 0 and topic in text


def test_connections_of_online_clients(run, cluster, name):
    topic, consumers, producers = name(), name("CG"), name("PG")
    cluster.create_topic(topic, 1)
    consumer = sync.PushConsumer(consumers, cluster.namesrv_address, listener=lambda _: None)
    consumer.subscribe(topic, "*")
    with consumer, sync.Producer(producers, cluster.namesrv_address) as producer:
        producer.send(Message(topic, b"hello"))
        for apache, ours in [
            (f"consumerConnection -g {consumers}", f"group consumers -g {consumers}"),
            (
                f"producerConnection -g {producers} -t {topic}",
                f"group producers -g {producers} -t {topic}",
            ),
        ]:
            deadline = time.monotonic() + 10
            while run.rocketmq(ours)[0] != 0 and time.monotonic() < deadline:
                time.sleep(0.05)  # until the client's heartbeat reached the broker
            by_mqadmin, by_rocketmq = run(apache, ours, json=True)
            assert by_mqadmin == by_rocketmq and by_mqadmin[0] == 0
            assert len(by_mqadmin[1]["connections"]) == 1


# --- rocketmq message query --offset and message print, on real messages -----------------


@pytest.fixture(scope="module")
def stored(module_cluster):
    """Topic with two queues: queue 0 holds a0, a1 (tag A) then, after ``middle``, b0
    (tag B) and a binary body; queue 1 holds c0. Returns (topic, middle ms, sent)."""
    topic = "PrintMe"
    module_cluster.create_topic(topic, 2)
    sent = {}
    q0, q1 = MessageQueue(topic, "broker-a", 0), MessageQueue(topic, "broker-a", 1)
    with sync.Producer("PG-print", module_cluster.namesrv_address) as producer:
        for body in ("a0", "a1"):
            sent[body] = producer.send(Message(topic, body.encode(), tags="A", keys=body), queue=q0)
        time.sleep(0.05)
        middle = int(time.time() * 1000)
        time.sleep(0.05)
        sent["b0"] = producer.send(Message(topic, b"b0", tags="B", keys="b0"), queue=q0)
        sent["bin"] = producer.send(Message(topic, b"\xff\x00", tags="B"), queue=q0)
        sent["c0"] = producer.send(Message(topic, b"c0", tags="A", keys="c0"), queue=q1)
    return topic, middle, sent


def test_query_by_offset(run, stored):
    topic, _, sent = stored
    code, message = run.rocketmq(
        f"message query -t {topic} --broker-name broker-a --queue 0 --offset 2", json=True
    )
    assert code == 0
    assert (message["msg_id"], message["body"], message["queue_offset"]) == (
        sent["b0"].msg_id,
        "b0",
        2,
    )
    code, text = run.rocketmq(
        f"message query -t {topic} --broker-name broker-a --queue 1 --offset 0"
    )
    fields = {line.split()[0]: line for line in text.splitlines()}
    assert code == 0 and fields["body"].split() == ["body", "c0"]


def test_query_by_offset_errors(cluster, stored, capsys):
    topic = stored[0]
    base = ["message", "query", "-t", topic, "-n", cluster.namesrv_address]
    for extra, expected in [
        (
            ["--broker-name", "broker-a", "--queue", "0", "--offset", "9"],
            f"no message at offset 9 of {topic}@broker-a#0: it holds offsets 0 to 3",
        ),
        (["--offset", "0"], "a query by offset names the queue: add --broker-name and --queue"),
        (
            ["--broker-name", "broker-z", "--queue", "0", "--offset", "0"],
            f"broker 'broker-z' does not serve topic '{topic}'",
        ),
    ]:
        assert main(base + extra) == 1
        err = capsys.readouterr().err
        assert err == f"rocketmq message query: error: {expected}\n"


def test_print_every_message_queue_by_queue(run, stored):
    topic = stored[0]
    code, text = run.rocketmq(f"message print -t {topic}")
    assert code == 0
    blocks = text.strip().split("\n")
    assert blocks[0] == "broker-a queue 0: offsets [0, 4), 4 message(s)"
    assert blocks[1].split() == ["OFFSET", "MSG", "ID", "STORED", "TAGS", "KEYS", "BODY"]
    assert [line.split()[-1] for line in blocks[2:6]] == ["a0", "a1", "b0", "base64:/wA="]
    assert blocks[6] == "broker-a queue 1: offsets [0, 1), 1 message(s)"
    assert blocks[8].split()[-1] == "c0"


def test_print_between_times_by_tag_as_json_lines(run, stored):
    topic, middle, sent = stored

    def printed(args: str) -> list[dict]:
        code, text = run.rocketmq(f"message print -t {topic} --json {args}")
        assert code == 0
        return [orjson.loads(line) for line in text.splitlines()]  # JSON Lines

    after = printed(f"--begin {middle}")
    assert [m.get("body", m.get("body_base64")) for m in after] == ["b0", "/wA=", "c0"]
    assert "body_base64" in after[1]
    before = printed(f"--end {middle}")
    assert [m["body"] for m in before] == ["a0", "a1"]
    assert [m["body"] for m in printed("--tags A")] == ["a0", "a1", "c0"]
    no_body = printed("--tags B --no-body")
    assert [m["msg_id"] for m in no_body] == [sent["b0"].msg_id, sent["bin"].msg_id]
    assert not {"body", "body_base64"} & set(no_body[0])
    # mqadmin's time format and a charset
    day = time.strftime("%Y-%m-%d#%H:%M:%S", time.localtime(middle // 1000))
    stamp = f"{day}:{middle % 1000:03d}"
    code, text = run.mqadmin(["printMsg", "-t", topic, "-b", stamp, "-c", "latin-1", "--json"])
    assert code == 0
    assert [orjson.loads(line)["body"] for line in text.splitlines()] == ["b0", "\xff\x00", "c0"]


def test_print_errors(cluster, capsys):
    base = ["message", "print", "-n", cluster.namesrv_address]
    for extra, expected in [
        (["-t", "PrintMe", "--charset", "klingon"], "unknown --charset 'klingon'"),
        (["-t", "PrintMe", "--begin", "5", "--end", "4"], "--begin 5 is after --end 4"),
        (["-t", "NoSuchTopic"], "topic 'NoSuchTopic' has no route"),
    ]:
        assert main(base + extra) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"rocketmq message print: error: {expected}")
        assert err.count("\n") == 1


# --- the scripts, as real processes ------------------------------------------------------


def script(name: str) -> str:
    found = shutil.which(name, path=sysconfig.get_path("scripts"))
    assert found, f"no {name} script: install the package (pip install -e .) to get it"
    return found


def start(*argv: str, cwd) -> subprocess.Popen:
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd
    )


def ready_line(process: subprocess.Popen, pattern: str, timeout: float = 30.0) -> re.Match:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        seen.append(line)
        if match := re.search(pattern, line):
            return match
    process.kill()
    raise AssertionError("no ready line; stderr was:\n" + "".join(seen))


def stop(process: subprocess.Popen) -> str:
    try:
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert "Traceback" not in err
    return err


def test_mqnamesrv_and_mqbroker_serve_until_sigterm(tmp_path):
    namesrv_conf = tmp_path / "namesrv.conf"
    namesrv_conf.write_text(
        f"listenPort=0\nkvConfigPath={tmp_path / 'kv.json'}\n"
        f"configStorePath={tmp_path / 'namesrv.properties'}\n"
    )
    broker_conf = tmp_path / "broker.conf"
    broker_conf.write_text(
        f"brokerName=broker-mq\nlistenPort=0\nbrokerIP1=127.0.0.1\n"
        f"storePathRootDir={tmp_path / 'store'}\n"
    )
    namesrv = start(script("mqnamesrv"), "-c", str(namesrv_conf), cwd=tmp_path)
    try:
        port = ready_line(namesrv, r"The Name Server boot success\. .*listening on \S+:(\d+)")[1]
        address = f"127.0.0.1:{port}"
        broker = start(script("mqbroker"), "-c", str(broker_conf), "-n", address, cwd=tmp_path)
        try:
            match = ready_line(
                broker, r"The broker\[broker-mq, (\S+)\] boot success\. .* name server is (\S+)"
            )
            assert match[2] == address
            listed = subprocess.run(
                [script("mqadmin"), "clusterList", "-n", address, "--json"],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
            assert orjson.loads(listed.stdout)["brokers"]["broker-mq"]["addresses"] == {
                "0": match[1]
            }
        finally:
            stop(broker)
    finally:
        stop(namesrv)


def test_mqbroker_prints_its_config_and_refuses_m(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-p\nbrokerClusterName=Blue\n")
    done = subprocess.run(
        [script("mqbroker"), "-c", str(conf), "-n", "10.0.0.1:9876", "-p"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert {"brokerName=broker-p", "brokerClusterName=Blue", "namesrvAddr=10.0.0.1:9876"} <= set(
        lines
    )
    done = subprocess.run([script("mqbroker"), "-m"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert (
        done.stderr
        == "mqbroker: error: -m/--printImportantConfig is not supported: -p prints every setting\n"
    )
    done = subprocess.run(
        [script("mqnamesrv"), "-p", "-n", "ignored:1"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "listenPort=9876" in done.stdout.splitlines()
