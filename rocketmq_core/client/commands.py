"""The admin commands of ``rocketmq``: topic, cluster, group, message, offset and send.

Each action takes ``-n/--namesrv`` (else NAMESRV_ADDR, else 127.0.0.1:9876) and
``--json``; it prints an aligned table, or one JSON document with ``--json``. A failure
prints one line to stderr saying what failed where, and exits 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from ..errors import RocketMQError, found_in
from ..plugins import PluginHost
from ..protocol.constants import PERM_RW, Perm
from ..runtime import run
from .admin import Admin
from .config import ClientConfig
from .instance import ClientInstance
from .message import Message
from .producer import MQClientError, Producer
from .pull import LitePullConsumer
from .render import body_text, message_json, table, timestamp, to_json

DEFAULT_NAMESRV = "127.0.0.1:9876"


class CommandError(Exception):
    """Input a command cannot use (a timestamp it cannot read, ...)."""


@dataclass
class Output:
    document: Any  # what --json writes
    text: str  # what a person reads


Action = Callable[[Admin, argparse.Namespace], Awaitable[Output]]


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-n",
        "--namesrv",
        metavar="ADDR",
        help=f"name servers, 'host:port;host:port' (default: NAMESRV_ADDR, else {DEFAULT_NAMESRV})",
    )
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")


def _topic(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", required=True, help="the topic")


def _target(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "-c", "--cluster", help="every master of this cluster (default: the only one)"
    )
    where.add_argument("-b", "--broker", metavar="ADDR", help="only this broker (host:port)")


class AdminCommand:
    """A command with actions (``rocketmq topic create``): subclasses list them and
    implement each as ``do_<action>(admin, args) -> Output``."""

    help = ""
    actions: dict[str, str] = {}  # action -> help

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", metavar="ACTION")
        for action, text in self.actions.items():
            sub = actions.add_parser(action, help=text, description=text)
            self.add_action_arguments(action, sub)
            _common(sub)

    def add_action_arguments(self, action: str, parser: argparse.ArgumentParser) -> None:
        pass

    def run(self, args: argparse.Namespace, host: PluginHost) -> int:
        if getattr(args, "action", None) not in self.actions:
            choices = "|".join(self.actions)
            print(f"usage: rocketmq {args.command} {{{choices}}} [options]", file=sys.stderr)
            return 2
        return run_action(args, host, getattr(self, "do_" + args.action))


def run_action(args: argparse.Namespace, host: PluginHost, action: Action) -> int:
    """Run ``action`` with an Admin on the chosen name servers; print its output."""
    name = " ".join(filter(None, ["rocketmq", args.command, getattr(args, "action", None)]))
    namesrv = args.namesrv or os.environ.get("NAMESRV_ADDR") or DEFAULT_NAMESRV

    async def main() -> Output:
        instance = ClientInstance(ClientConfig(namesrv_addr=namesrv), host=host)
        async with Admin(instance=instance) as admin:
            return await action(admin, args)

    try:
        output = run(main)
    except (RocketMQError, MQClientError, CommandError, BaseExceptionGroup) as exc:
        found = found_in(exc, (RocketMQError, MQClientError, CommandError))
        if found is None:
            raise
        print(f"{name}: error: {found}", file=sys.stderr)
        return 1
    sys.stdout.write(to_json(output.document) if args.json else output.text.rstrip() + "\n")
    return 0


# --- topic -----------------------------------------------------------------------------------


class TopicCommand(AdminCommand):
    help = "create, update, delete, list topics; show a topic's route and queue stats"
    actions = {
        "create": "create a topic on every master of a cluster, or on one broker",
        "update": "change a topic's queues or permission (the same request as create)",
        "delete": "delete a topic from its brokers and the name servers",
        "list": "list every topic the name servers route",
        "route": "show which brokers serve a topic, with how many queues",
        "stats": "show each queue's min and max offset and last store time",
    }

    def add_action_arguments(self, action: str, parser: argparse.ArgumentParser) -> None:
        if action != "list":
            _topic(parser)
        if action in ("create", "update"):
            _target(parser)
            parser.add_argument("-q", "--queues", type=int, default=4, help="queues (default 4)")
            parser.add_argument("-r", "--read-queues", type=int, help="read queues (default -q)")
            parser.add_argument("-w", "--write-queues", type=int, help="write queues (default -q)")
            parser.add_argument(
                "-p", "--perm", type=int, default=int(PERM_RW), help="2 W, 4 R, 6 RW (default 6)"
            )
            parser.add_argument("-o", "--order", action="store_true", help="an orderly topic")
        if action == "delete":
            parser.add_argument("-c", "--cluster", help="only the masters of this cluster")

    async def do_create(self, admin: Admin, args: argparse.Namespace) -> Output:
        return await self._write(admin, args, "created")

    async def do_update(self, admin: Admin, args: argparse.Namespace) -> Output:
        return await self._write(admin, args, "updated")

    async def _write(self, admin: Admin, args: argparse.Namespace, verb: str) -> Output:
        addresses = await admin.create_topic(
            args.topic,
            args.queues,
            cluster=args.cluster,
            broker_addr=args.broker,
            perm=args.perm,
            order=args.order,
            read_queues=args.read_queues,
            write_queues=args.write_queues,
        )
        route = await admin.topic_route(args.topic)
        document = {"topic": args.topic, "brokers": addresses, "route": route.to_json()}
        text = f"{verb} topic {args.topic} on {', '.join(addresses)}\n" + _route_table(route)
        return Output(document, text)

    async def do_delete(self, admin: Admin, args: argparse.Namespace) -> Output:
        addresses = await admin.delete_topic(args.topic, cluster=args.cluster)
        text = f"deleted topic {args.topic} from {', '.join(addresses) or 'no broker'}"
        return Output({"topic": args.topic, "brokers": addresses}, text + " and the name servers")

    async def do_list(self, admin: Admin, args: argparse.Namespace) -> Output:
        topics = await admin.list_topics()
        return Output(topics, table(["TOPIC"], [[topic] for topic in topics]))

    async def do_route(self, admin: Admin, args: argparse.Namespace) -> Output:
        route = await admin.topic_route(args.topic)
        return Output(route.to_json(), _route_table(route))

    async def do_stats(self, admin: Admin, args: argparse.Namespace) -> Output:
        stats = await admin.topic_stats(args.topic)
        rows = [
            [
                q.queue.broker_name,
                q.queue.queue_id,
                q.min_offset,
                q.max_offset,
                q.messages,
                timestamp(q.last_update_timestamp),
            ]
            for q in stats.queues
        ]
        headers = ["BROKER", "QUEUE", "MIN OFFSET", "MAX OFFSET", "MESSAGES", "LAST UPDATED"]
        text = table(headers, rows) + f"\n{stats.total_messages} messages in {args.topic}"
        return Output(stats, text)


def _route_table(route: Any) -> str:
    members = {broker.broker_name: broker for broker in route.broker_datas}
    rows = []
    for queues in sorted(route.queue_datas, key=lambda q: q.broker_name):
        broker = members.get(queues.broker_name)
        addresses = (
            " ".join(f"{i}={a}" for i, a in sorted(broker.broker_addrs.items())) if broker else ""
        )
        rows.append(
            [
                broker.cluster if broker else "",
                queues.broker_name,
                addresses,
                queues.read_queue_nums,
                queues.write_queue_nums,
                Perm.render(queues.perm),
            ]
        )
    return table(["CLUSTER", "BROKER", "ADDRESSES (ID=ADDR)", "READ", "WRITE", "PERM"], rows)


# --- cluster ---------------------------------------------------------------------------------


class ClusterCommand(AdminCommand):
    help = "show clusters, their brokers and each broker's version and load"
    actions = {"list": "list clusters and brokers with runtime info"}

    async def do_list(self, admin: Admin, args: argparse.Namespace) -> Output:
        summary = await admin.cluster_info()
        rows, runtime = [], {}
        for cluster, names in summary.clusters.items():
            for name in names:
                broker = summary.brokers.get(name)
                for broker_id, address in sorted((broker.addresses if broker else {}).items()):
                    try:
                        info = await admin.broker_runtime_info(address)
                    except RocketMQError as exc:
                        info = {"error": str(exc)}
                    runtime[address] = info
                    rows.append(
                        [
                            cluster,
                            name,
                            broker_id,
                            address,
                            info.get("brokerVersionDesc", "-"),
                            info.get("msgPutTotalTodayNow", "-"),
                            info.get("runtime", "unreachable"),
                        ]
                    )
        headers = ["CLUSTER", "BROKER", "ID", "ADDRESS", "VERSION", "PUT TODAY", "UPTIME"]
        document = {"clusters": summary.clusters, "brokers": summary.brokers, "runtime": runtime}
        return Output(document, table(headers, rows))


# --- group -----------------------------------------------------------------------------------


class GroupCommand(AdminCommand):
    help = "list consumer groups; show a group's progress (lag per queue)"
    actions = {
        "list": "list subscription groups of every broker",
        "progress": "a group's consumer offsets and lag per queue, and the total",
    }

    def add_action_arguments(self, action: str, parser: argparse.ArgumentParser) -> None:
        if action == "progress":
            parser.add_argument("-g", "--group", required=True, help="the consumer group")
            parser.add_argument("-t", "--topic", help="only this topic")

    async def do_list(self, admin: Admin, args: argparse.Namespace) -> Output:
        groups = await admin.list_groups()
        rows = [
            [
                info.name,
                ",".join(info.brokers),
                info.config.consume_enable,
                info.config.consume_broadcast_enable,
                info.config.consume_message_orderly,
                info.config.retry_queue_nums,
                info.config.retry_max_times,
            ]
            for info in groups
        ]
        headers = [
            "GROUP",
            "BROKERS",
            "CONSUME",
            "BROADCAST",
            "ORDERLY",
            "RETRY QUEUES",
            "MAX RETRIES",
        ]
        return Output(groups, table(headers, rows))

    async def do_progress(self, admin: Admin, args: argparse.Namespace) -> Output:
        stats = await admin.consume_stats(args.group, args.topic)
        if not stats.queues:
            where = f" on {args.topic}" if args.topic else ""
            return Output(stats, f"group {args.group} has no offsets{where}: nothing consumed yet")
        rows = [
            [
                q.queue.topic,
                q.queue.broker_name,
                q.queue.queue_id,
                q.broker_offset,
                q.consumer_offset,
                q.lag,
                timestamp(q.last_timestamp),
            ]
            for q in stats.queues
        ]
        headers = [
            "TOPIC",
            "BROKER",
            "QUEUE",
            "BROKER OFFSET",
            "CONSUMER OFFSET",
            "LAG",
            "LAST CONSUMED",
        ]
        text = table(headers, rows) + (
            f"\ntotal lag {stats.total_lag} (consume TPS {stats.consume_tps:.2f})"
        )
        return Output(stats, text)


# --- message ---------------------------------------------------------------------------------


class MessageCommand(AdminCommand):
    help = "find messages by key, or one message by its id"
    actions = {"query": "messages of a topic by key (--key), or one message by id (--id)"}

    def add_action_arguments(self, action: str, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-t", "--topic", help="the topic (needed with --key and client ids)")
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("-k", "--key", help="a key the producer set (KEYS)")
        which.add_argument("-i", "--id", help="a message id: the client's (UNIQ_KEY) or offset id")
        parser.add_argument("--max-num", type=int, default=32, help="at most this many (32)")

    async def do_query(self, admin: Admin, args: argparse.Namespace) -> Output:
        if args.id:
            message = await admin.view_message(args.id, args.topic)
            return Output(message_json(message), _message_detail(message))
        if not args.topic:
            raise CommandError("a query by key needs the topic: add --topic")
        found = await admin.query_message_by_key(args.topic, args.key, args.max_num)
        if not found:
            return Output([], f"no message with key {args.key!r} in {args.topic}")
        rows = [
            [
                m.msg_id,
                m.queue.broker_name,
                m.queue.queue_id,
                m.queue_offset,
                timestamp(m.store_timestamp),
                m.tags,
                " ".join(m.keys),
                len(m.body),
            ]
            for m in found
        ]
        headers = ["MSG ID", "BROKER", "QUEUE", "OFFSET", "STORED", "TAGS", "KEYS", "BYTES"]
        return Output([message_json(m) for m in found], table(headers, rows))


def _message_detail(message: Any) -> str:
    text, encoded = body_text(message.body)
    fields = [
        ["topic", message.topic],
        ["msg id", message.msg_id],
        ["offset msg id", message.offset_msg_id],
        ["queue", f"{message.queue.broker_name} #{message.queue.queue_id}"],
        ["queue offset", message.queue_offset],
        ["tags", message.tags],
        ["keys", " ".join(message.keys) or None],
        ["born", f"{timestamp(message.born_timestamp)} from {message.born_host}"],
        ["stored", f"{timestamp(message.store_timestamp)} on {message.store_host}"],
        ["reconsume times", message.reconsume_times],
        ["properties", " ".join(f"{k}={v}" for k, v in sorted(message.properties.items()))],
        ["body (base64)" if encoded else "body", text],
    ]
    return table(["FIELD", "VALUE"], [[name, str(value)] for name, value in fields])


# --- offset ----------------------------------------------------------------------------------


class OffsetCommand(AdminCommand):
    help = "move a consumer group's offsets"
    actions = {"reset": "move a group's offsets on a topic to a point in time"}

    def add_action_arguments(self, action: str, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-g", "--group", required=True, help="the consumer group")
        _topic(parser)
        parser.add_argument(
            "-s",
            "--timestamp",
            required=True,
            help="milliseconds, an ISO date-time (local time unless it has a zone),"
            " yyyy-MM-dd#HH:mm:ss:SSS, or 'now'",
        )
        parser.add_argument(
            "--no-force", action="store_true", help="only move offsets back, never forward"
        )

    async def do_reset(self, admin: Admin, args: argparse.Namespace) -> Output:
        when = parse_timestamp(args.timestamp, time.time_ns() // 1_000_000)
        result = await admin.reset_offset_by_time(
            args.group, args.topic, when, force=not args.no_force
        )
        rows = [
            [
                o.queue.broker_name,
                o.queue.queue_id,
                o.offset,
                "told online consumers" if o.online else "committed (group offline)",
            ]
            for o in result.offsets
        ]
        text = table(["BROKER", "QUEUE", "OFFSET", "HOW"], rows)
        return Output(result, f"offsets of {args.group} on {args.topic} at {when}:\n{text}")


def parse_timestamp(text: str, now_ms: int) -> int:
    """Milliseconds since the epoch from what a person types."""
    value = text.strip()
    if value.lower() == "now":
        return now_ms
    if value.lstrip("-").isdigit():
        return int(value)
    if "#" in value:  # mqadmin's yyyy-MM-dd#HH:mm:ss:SSS
        day, _, clock = value.partition("#")
        hms, _, millis = clock.rpartition(":") if clock.count(":") == 3 else (clock, "", "0")
        value = f"{day}T{hms}.{int(millis or 0):03d}"
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(
            f"cannot read timestamp {text!r}: give milliseconds, an ISO date-time"
            " such as 2024-05-01T10:30:00, or 'now'"
        ) from None
    return int(moment.timestamp() * 1000)


# --- send ------------------------------------------------------------------------------------


class SendCommand:
    help = "send messages to a topic (one, or --count of them)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        _topic(parser)
        parser.add_argument("--body", required=True, help="the message body (text)")
        parser.add_argument("--tags", help="the message tag")
        parser.add_argument("--keys", help="keys to find it by, space separated")
        parser.add_argument("--count", type=int, default=1, help="send it this many times (1)")
        parser.add_argument(
            "--group", default="rocketmq-cli-producer", help="the producer group to send as"
        )
        _common(parser)

    def run(self, args: argparse.Namespace, host: PluginHost) -> int:
        return run_action(args, host, self.send)

    async def send(self, admin: Admin, args: argparse.Namespace) -> Output:
        if args.count < 1:
            raise CommandError(f"--count must be at least 1, not {args.count}")
        results = []
        async with Producer(args.group, instance=admin.instance) as producer:
            for _ in range(args.count):
                message = Message(args.topic, args.body.encode(), tags=args.tags, keys=args.keys)
                results.append(await producer.send(message))
        rows = [
            [
                r.status.value,
                r.msg_id,
                r.offset_msg_id,
                r.queue.broker_name,
                r.queue.queue_id,
                r.queue_offset,
            ]
            for r in results
        ]
        headers = ["STATUS", "MSG ID", "OFFSET MSG ID", "BROKER", "QUEUE", "QUEUE OFFSET"]
        return Output(results, table(headers, rows))


# --- consume ---------------------------------------------------------------------------------


class ConsumeCommand:
    help = "print the messages of a topic as a consumer group receives them"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        _topic(parser)
        parser.add_argument("--group", required=True, help="the consumer group to read as")
        parser.add_argument(
            "--from",
            dest="start",
            choices=("first", "last"),
            default="last",
            help="where a group new to the topic starts (last)",
        )
        parser.add_argument("--tags", default="*", help="tag expression, like 'A || B' (*)")
        parser.add_argument("--count", type=int, help="stop after this many messages")
        parser.add_argument(
            "--idle", type=float, help="stop when no message came for this many seconds"
        )
        _common(parser)

    def run(self, args: argparse.Namespace, host: PluginHost) -> int:
        return run_action(args, host, self.consume)

    async def consume(self, admin: Admin, args: argparse.Namespace) -> Output:
        if args.count is not None and args.count < 1:
            raise CommandError(f"--count must be at least 1, not {args.count}")
        consumer = LitePullConsumer(
            args.group, instance=admin.instance, consume_from=args.start, poll_timeout=1.0
        )
        consumer.subscribe(args.topic, args.tags)
        received = 0
        idle_since = time.monotonic()
        async with consumer:
            while args.count is None or received < args.count:
                messages = await consumer.poll()
                if not messages:
                    if args.idle is not None and time.monotonic() - idle_since >= args.idle:
                        break
                    continue
                idle_since = time.monotonic()
                for message in messages[: None if args.count is None else args.count - received]:
                    received += 1
                    line = (
                        orjson.dumps(message_json(message)).decode()  # one line per message
                        if args.json
                        else f"{message.msg_id} {message.queue.queue_id}:{message.queue_offset}"
                        f" tags={message.tags or ''} {body_text(message.body)[0]}"
                    )
                    print(line, flush=True)
            await consumer.commit()
        return Output({"received": received}, f"{received} message(s)")
