"""Apache RocketMQ's scripts over our one implementation: ``mqadmin``, ``mqnamesrv`` and
``mqbroker`` read Apache's command names and options, translate them into ``rocketmq``
command words and options with the table below, and run ``rocketmq``.

    mqadmin updateTopic -c DefaultCluster -t Orders -r 4 -w 4
    ->  rocketmq topic update --queues 8 --cluster DefaultCluster --topic Orders
                              --read-queues 4 --write-queues 4

Each Apache option either maps onto one of ours, is accepted without effect (it only
steers something we do differently, said in ``mqadmin help CMD``), or is refused in one
line naming it. ``translate`` is pure: the tests check the whole table with it.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, NoReturn

from ..client.admin import TOOLS_GROUP
from ..errors import RocketMQError
from .rocketmq import main as rocketmq


class UsageError(RocketMQError):
    """Apache arguments that cannot be translated: an unknown command, a refused option."""


class How(Enum):
    VALUE = "value"  # -t X            -> --topic X
    SWITCH = "switch"  # -a            -> --active
    IF_TRUE = "if true"  # -o true|false  -> --order when true
    IF_FALSE = "if false"  # -f true|false -> --no-force when false
    IGNORED = "ignored"  # accepted, no effect (``why`` says why none is needed)
    REFUSED = "refused"  # a one-line error naming the option (``why`` says what to do)


@dataclass(frozen=True)
class Flag:
    short: str | None  # Apache's one-letter option ("t" for -t), None when it has none
    long: str  # Apache's long option ("topic" for --topic)
    how: How
    to: str | None = None  # our option (VALUE, SWITCH, IF_TRUE, IF_FALSE)
    why: str = ""  # IGNORED, REFUSED
    required: bool = False
    has_value: bool = True  # False: Apache's option is a switch (-l, not -l VALUE)

    @property
    def spelling(self) -> str:
        return "/".join(([f"-{self.short}"] if self.short else []) + [f"--{self.long}"])


def value(short: str | None, long: str, to: str, *, required: bool = False) -> Flag:
    return Flag(short, long, How.VALUE, to, required=required)


def switch(short: str | None, long: str, to: str) -> Flag:
    return Flag(short, long, How.SWITCH, to, has_value=False)


def if_true(short: str, long: str, to: str) -> Flag:
    return Flag(short, long, How.IF_TRUE, to)


def if_false(short: str, long: str, to: str) -> Flag:
    return Flag(short, long, How.IF_FALSE, to)


def ignored(short: str | None, long: str, why: str, *, has_value: bool = True) -> Flag:
    return Flag(short, long, How.IGNORED, why=why, has_value=has_value)


def refused(short: str | None, long: str, why: str, *, has_value: bool = True) -> Flag:
    return Flag(short, long, How.REFUSED, why=why, has_value=has_value)


@dataclass(frozen=True)
class Command:
    name: str  # Apache's name
    about: str
    words: tuple[str, ...]  # the ``rocketmq`` command it runs
    flags: tuple[Flag, ...]
    defaults: tuple[str, ...] = ()  # our options first, where Apache's defaults differ
    one_of: tuple[str, ...] = ()  # long names of options of which exactly one is needed
    # (long names of Apache options, the ``rocketmq`` command run instead when all are given)
    given_all: tuple[tuple[str, ...], tuple[str, ...]] | None = None


ROUTE_FROM_NAMESRV = "the route always comes from the name servers"
COMMON = (
    value("n", "namesrvAddr", "--namesrv"),
    switch(None, "json", "--json"),
)


def admin(name: str, about: str, words: str, *flags: Flag, **options) -> Command:
    return Command(name, about, tuple(words.split()), (*flags, *COMMON), **options)


TOPIC = value("t", "topic", "--topic", required=True)
TARGET_BROKER = value("b", "brokerAddr", "--broker")
TARGET_CLUSTER = value("c", "clusterName", "--cluster")

# Apache's commands in mqadmin's own order (that of ``mqadmin`` with no arguments).
COMMANDS = (
    admin(
        "updateTopic",
        "Create a topic, or change its queues, permission or order",
        "topic update",
        TARGET_BROKER,
        TARGET_CLUSTER,
        TOPIC,
        value("r", "readQueueNums", "--read-queues"),
        value("w", "writeQueueNums", "--write-queues"),
        value("p", "perm", "--perm"),
        if_true("o", "order", "--order"),
        refused("a", "attributes", "topics have no attributes here"),
        refused("u", "unit", "rocketmq-py has no unit topics"),
        refused("s", "hasUnitSub", "rocketmq-py has no unit topics"),
        defaults=("--queues", "8"),  # mqadmin makes 8 read and 8 write queues
        one_of=("brokerAddr", "clusterName"),
    ),
    admin(
        "deleteTopic",
        "Delete a topic from its brokers and the name servers",
        "topic delete",
        TOPIC,
        value("c", "clusterName", "--cluster", required=True),
    ),
    admin(
        "updateSubGroup",
        "Create a subscription group, or change its settings",
        "group update",
        TARGET_BROKER,
        TARGET_CLUSTER,
        value("g", "groupName", "--group", required=True),
        value("s", "consumeEnable", "--consume-enable"),
        refused("m", "consumeFromMinEnable", "the broker keeps no such group setting"),
        value("d", "consumeBroadcastEnable", "--broadcast"),
        value("o", "consumeMessageOrderly", "--orderly"),
        value("q", "retryQueueNums", "--retry-queues"),
        value("r", "retryMaxTimes", "--retry-max-times"),
        refused("p", "groupRetryPolicy", "groups have no retry policy here; -r sets the retries"),
        value("i", "brokerId", "--broker-id"),
        value("w", "whichBrokerWhenConsumeSlowly", "--slow-broker-id"),
        refused("a", "notifyConsumerIdsChanged", "the brokers always notify consumers"),
        refused(None, "attributes", "groups have no attributes here"),
        one_of=("brokerAddr", "clusterName"),
    ),
    admin(
        "deleteSubGroup",
        "Delete a subscription group (and, with -r true, its offsets)",
        "group delete",
        TARGET_BROKER,
        TARGET_CLUSTER,
        value("g", "groupName", "--group", required=True),
        if_true("r", "removeOffset", "--remove-offsets"),
    ),
    admin(
        "updateBrokerConfig",
        "Change a setting of a running broker, or of every broker of a cluster",
        "broker-config update",
        TARGET_BROKER,
        TARGET_CLUSTER,
        refused("a", "updateAllBroker", "-c CLUSTER updates every broker, slaves included"),
        value("k", "key", "--key", required=True),
        value("v", "value", "--value", required=True),
        one_of=("brokerAddr", "clusterName"),
    ),
    admin(
        "topicRoute",
        "Show the brokers and queues that serve a topic",
        "topic route",
        TOPIC,
        ignored("l", "list", "the route is always shown as a table", has_value=False),
    ),
    admin(
        "topicStatus",
        "Show each queue's min and max offset and last update",
        "topic stats",
        TOPIC,
        ignored("c", "cluster", ROUTE_FROM_NAMESRV),
    ),
    admin(
        "brokerStatus",
        "Show a broker's runtime info (every broker of a cluster with -c)",
        "cluster status",
        TARGET_BROKER,
        TARGET_CLUSTER,
        one_of=("brokerAddr", "clusterName"),
    ),
    admin(
        "queryMsgById",
        "Show a message by its id",
        "message query",
        TOPIC,
        value("i", "msgId", "--id", required=True),
        value("g", "consumerGroup", "--group"),
        value("d", "clientId", "--client-id"),
        refused("s", "sendMessage", "rocketmq-py does not resend a message"),
        refused("u", "unitName", "rocketmq-py has no unit topics"),
        refused("f", "bodyFormat", "bodies are shown as text, or base64 when binary"),
        ignored("c", "cluster", ROUTE_FROM_NAMESRV),
        # -g and -d: the message is pushed to that consumer, its listener's answer shown
        given_all=(("consumerGroup", "clientId"), ("message", "consume-directly")),
    ),
    admin(
        "queryMsgByKey",
        "Show the messages of a topic with a key",
        "message query",
        TOPIC,
        value("k", "msgKey", "--key", required=True),
        value("b", "beginTimestamp", "--begin"),
        value("e", "endTimestamp", "--end"),
        value("m", "maxNum", "--max-num"),
        ignored("c", "cluster", ROUTE_FROM_NAMESRV),
        defaults=("--max-num", "64"),  # mqadmin's default
    ),
    admin(
        "queryMsgByOffset",
        "Show the message at an offset of a queue",
        "message query",
        TOPIC,
        value("b", "brokerName", "--broker-name", required=True),
        value("i", "queueId", "--queue", required=True),
        value("o", "offset", "--offset", required=True),
        refused("f", "bodyFormat", "bodies are shown as text, or base64 when binary"),
    ),
    admin(
        "printMsg",
        "Print every message of a topic stored between two times",
        "message print",
        TOPIC,
        value("c", "charsetName", "--charset"),
        value("s", "subExpression", "--tags"),
        value("b", "beginTimestamp", "--begin"),
        value("e", "endTimestamp", "--end"),
        if_false("d", "printBody", "--no-body"),
        refused("l", "lmqParentTopic", "rocketmq-py has no light message queues (LMQ)"),
    ),
    admin(
        "producerConnection",
        "Show the online producers of a producer group",
        "group producers",
        value("g", "producerGroup", "--group", required=True),
        TOPIC,
    ),
    admin(
        "consumerConnection",
        "Show the online consumers of a group and their subscriptions",
        "group consumers",
        value("g", "consumerGroup", "--group", required=True),
        refused("b", "brokerAddr", "every broker is asked; leave -b out"),
    ),
    admin(
        "consumerProgress",
        "Show a group's offsets and lag per queue",
        "group progress",
        value("g", "groupName", "--group"),  # without it: a line for each group
        value("t", "topicName", "--topic"),
        refused("s", "showClientIP", "the consumer of each queue is not shown"),
        ignored("c", "cluster", ROUTE_FROM_NAMESRV),
    ),
    admin(
        "clusterList",
        "List clusters and their brokers",
        "cluster list",
        refused("m", "moreStats", "use mqadmin statsAll for traffic", has_value=False),
        refused("i", "interval", "the list is printed once"),
        refused("c", "clusterName", "every cluster is listed"),
    ),
    admin(
        "topicList",
        "List every topic the name servers route",
        "topic list",
        refused("c", "clusterModel", "topics are listed without clusters", has_value=False),
    ),
    admin(
        "updateKvConfig",
        "Put a key and value in a name server KV namespace",
        "kv update",
        value("s", "namespace", "--namespace", required=True),
        value("k", "key", "--key", required=True),
        value("v", "value", "--value", required=True),
    ),
    admin(
        "deleteKvConfig",
        "Delete a key from a name server KV namespace",
        "kv delete",
        value("s", "namespace", "--namespace", required=True),
        value("k", "key", "--key", required=True),
    ),
    admin(
        "resetOffsetByTime",
        "Move a group's offsets on a topic to a point in time",
        "offset reset",
        value("g", "group", "--group", required=True),
        TOPIC,
        value("s", "timestamp", "--timestamp", required=True),
        if_false("f", "force", "--no-force"),
        ignored("c", "cluster", ROUTE_FROM_NAMESRV),
        refused("b", "broker", "offsets are reset on every broker of the topic"),
        refused("q", "queue", "offsets are reset on every queue of the topic"),
        refused("o", "offset", "give a time with -s; offsets are found from it"),
    ),
    admin(
        "statsAll",
        "Show the traffic of every topic and consumer group",
        "cluster stats",
        switch("a", "activeTopic", "--active"),
        value("t", "topic", "--topic"),
    ),
    admin(
        "getBrokerConfig",
        "Show the settings of a running broker, or of every broker of a cluster",
        "broker-config get",
        TARGET_BROKER,
        TARGET_CLUSTER,
        one_of=("brokerAddr", "clusterName"),
    ),
    admin(
        "sendMessage",
        "Send a message",
        "send",
        TOPIC,
        value("p", "body", "--body", required=True),
        value("k", "key", "--keys"),
        value("c", "tags", "--tags"),
        refused("b", "broker", "the producer picks the broker; -i picks the queue id"),
        value("i", "qid", "--queue"),
        refused("m", "msgTraceEnable", "rocketmq-py has no message traces"),
    ),
    admin(
        "consumeMessage",
        "Print the messages of a topic, from its oldest",
        "consume",
        TOPIC,
        refused("b", "brokerName", "every queue of the topic is read"),
        refused("i", "queueId", "every queue of the topic is read"),
        refused("o", "offset", "a group new to the topic starts from the oldest message"),
        value("g", "consumerGroup", "--group"),
        refused("s", "beginTimestamp", "use mqadmin printMsg -b to read from a time"),
        refused("e", "endTimestamp", "use mqadmin printMsg -e to read up to a time"),
        value("c", "MessageNumber", "--count"),
        # mqadmin reads up to 128 messages from the oldest, then stops
        defaults=("--group", TOOLS_GROUP, "--from", "first", "--count", "128", "--idle", "3"),
    ),
    admin(
        "updateAclConfig",
        "Create an ACL account in the brokers' plain_acl.yml, or change it",
        "acl update",
        TARGET_BROKER,
        TARGET_CLUSTER,
        value("a", "accessKey", "--account", required=True),
        value("s", "secretKey", "--secret", required=True),
        value("w", "whiteRemoteAddress", "--white-address"),
        value("i", "defaultTopicPerm", "--default-topic-perm"),
        value("u", "defaultGroupPerm", "--default-group-perm"),
        value("t", "topicPerms", "--topic-perms"),
        value("g", "groupPerms", "--group-perms"),
        value("m", "admin", "--admin"),
        one_of=("brokerAddr", "clusterName"),
    ),
    admin(
        "deleteAclConfig",
        "Delete an ACL account from the brokers' plain_acl.yml",
        "acl delete",
        TARGET_BROKER,
        TARGET_CLUSTER,
        value("a", "accessKey", "--account", required=True),
        one_of=("brokerAddr", "clusterName"),
    ),
    admin(
        "updateGlobalWhiteAddr",
        "Replace the global white list of a broker's ACL file",
        "acl white",
        TARGET_BROKER,
        TARGET_CLUSTER,
        value("g", "globalWhiteRemoteAddresses", "--addresses", required=True),
        value("p", "aclFileFullPath", "--acl-file"),
        one_of=("brokerAddr", "clusterName"),
    ),
    admin(
        "clusterAclConfigVersion",
        "Show the version of each ACL file of the brokers",
        "acl version",
        TARGET_BROKER,
        TARGET_CLUSTER,
        one_of=("brokerAddr", "clusterName"),
    ),
    admin(
        "getAclConfig",
        "Show the brokers' global white lists and ACL accounts",
        "acl get",
        TARGET_BROKER,
        TARGET_CLUSTER,
        one_of=("brokerAddr", "clusterName"),
    ),
)

MQNAMESRV = Command(
    "mqnamesrv",
    "Start a name server",
    ("namesrv",),
    (
        value("c", "configFile", "--config-file"),
        switch("p", "printConfigItem", "--print-config-item"),
        ignored("n", "namesrvAddr", "a name server needs no name server address"),
    ),
)
MQBROKER = Command(
    "mqbroker",
    "Start a broker",
    ("broker",),
    (
        value("c", "configFile", "--config-file"),
        value("n", "namesrvAddr", "--namesrv-addr"),
        switch("p", "printConfigItem", "--print-config-item"),
        refused("m", "printImportantConfig", "-p prints every setting", has_value=False),
    ),
)

_BY_NAME = {command.name.lower(): command for command in COMMANDS}  # mqadmin ignores case


def find(name: str) -> Command:
    """The mqadmin command ``name`` (any case); UsageError with a suggestion if none."""
    command = _BY_NAME.get(name.lower())
    if command is not None:
        return command
    close = difflib.get_close_matches(name.lower(), _BY_NAME, n=1, cutoff=0.6)
    hint = f"; did you mean {_BY_NAME[close[0]].name}?" if close else ""
    raise UsageError(f"no command {name!r}{hint} ('mqadmin help' lists them)")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} ('{self.prog} -h' lists the options)")


def build_parser(command: Command, prog: str | None = None) -> argparse.ArgumentParser:
    """Apache's options of ``command``, each helped with what it becomes."""
    parser = _Parser(
        prog=prog or f"mqadmin {command.name}",
        description=f"{command.about}. Runs: rocketmq {' '.join(command.words + command.defaults)}",
        allow_abbrev=False,
    )
    required_group = parser.add_mutually_exclusive_group(required=True) if command.one_of else None
    for flag in command.flags:
        where = required_group if required_group and flag.long in command.one_of else parser
        names = ([f"-{flag.short}"] if flag.short else []) + [f"--{flag.long}"]
        options: dict[str, Any] = {"dest": flag.long, "help": _flag_help(flag)}
        if flag.has_value:
            where.add_argument(*names, metavar="VALUE", required=flag.required, **options)
        else:
            where.add_argument(*names, action="store_true", **options)
    return parser


def _flag_help(flag: Flag) -> str:
    match flag.how:
        case How.VALUE | How.SWITCH:
            return f"-> {flag.to}"
        case How.IF_TRUE:
            return f"true|false; true -> {flag.to}"
        case How.IF_FALSE:
            return f"true|false; false -> {flag.to}"
        case How.IGNORED:
            return f"accepted, no effect: {flag.why}"
    return f"not supported: {flag.why}"


def translate_with(command: Command, argv: Sequence[str], prog: str | None = None) -> list[str]:
    """``command``'s Apache options ``argv`` as ``rocketmq`` argv."""
    args = build_parser(command, prog).parse_args(list(argv))
    words = [*command.words, *command.defaults]
    if command.given_all is not None:
        options, instead = command.given_all
        given = [name for name in options if getattr(args, name) is not None]
        if given and len(given) < len(options):
            spellings = [f.spelling for f in command.flags if f.long in options]
            raise UsageError(f"{' and '.join(spellings)} go together: give both or neither")
        if given:
            words = list(instead)
    for flag in command.flags:
        given = getattr(args, flag.long)
        if given is not None and given is not False:
            words += _our_words(flag, given)
    return words


def _our_words(flag: Flag, given: str | bool) -> list[str]:
    """What one Apache option given on the command line becomes."""
    match flag.how:
        case How.VALUE:
            return [str(flag.to), str(given).strip()]
        case How.SWITCH:
            return [str(flag.to)]
        case How.IF_TRUE | How.IF_FALSE:
            wanted = _boolean(flag, str(given)) is (flag.how is How.IF_TRUE)
            return [str(flag.to)] if wanted else []
        case How.IGNORED:
            return []
    raise UsageError(f"{flag.spelling} is not supported: {flag.why}")


def _boolean(flag: Flag, text: str) -> bool:
    word = text.strip().lower()
    if word not in ("true", "false"):
        raise UsageError(f"{flag.spelling} takes true or false, not {text!r}")
    return word == "true"


def translate(argv: Sequence[str]) -> list[str]:
    """``mqadmin CMD OPTIONS`` (without ``mqadmin``) as ``rocketmq`` argv."""
    if not argv:
        raise UsageError("name a command ('mqadmin help' lists them)")
    return translate_with(find(argv[0]), argv[1:])


def commands_text() -> str:
    """What ``mqadmin`` with no arguments, or ``mqadmin help``, prints."""
    width = max(len(command.name) for command in COMMANDS) + 2
    lines = ["The mqadmin commands (each runs a rocketmq command):"]
    lines += [f"   {c.name:<{width}} {c.about}" for c in COMMANDS]
    lines += ["", "See 'mqadmin help <command>' for its options."]
    return "\n".join(lines)


def _fail(prog: str, exc: UsageError) -> int:
    print(f"{prog}: error: {exc}", file=sys.stderr)
    return 2


def mqadmin(argv: Sequence[str] | None = None) -> int:
    """The ``mqadmin`` script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv == ["help"]:
        print(commands_text())
        return 0
    asks_help = argv[0] == "help" or bool({"-h", "--help"} & set(argv[1:]))
    name = argv[1] if argv[0] == "help" else argv[0]
    try:
        command = find(name)
    except UsageError as exc:
        return _fail("mqadmin", exc)
    if asks_help:
        print(build_parser(command).format_help().rstrip())
        return 0
    try:
        rocketmq_argv = translate_with(command, argv[1:])
    except UsageError as exc:
        return _fail(f"mqadmin {command.name}", exc)
    return rocketmq(rocketmq_argv)


def _server_script(command: Command, argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if {"-h", "--help"} & set(argv):
        print(build_parser(command, command.name).format_help().rstrip())
        return 0
    try:
        rocketmq_argv = translate_with(command, argv, command.name)
    except UsageError as exc:
        return _fail(command.name, exc)
    return rocketmq(rocketmq_argv)


def mqnamesrv(argv: Sequence[str] | None = None) -> int:
    """The ``mqnamesrv`` script: ``rocketmq namesrv``."""
    return _server_script(MQNAMESRV, argv)


def mqbroker(argv: Sequence[str] | None = None) -> int:
    """The ``mqbroker`` script: ``rocketmq broker``."""
    return _server_script(MQBROKER, argv)
