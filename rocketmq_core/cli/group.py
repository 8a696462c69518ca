"""``rocketmq group``: subscription groups (list, update, delete), a group's progress
(lag per queue), and who is connected (consumers, producers)."""

from __future__ import annotations

import argparse

from ..client.admin import Admin
from ..client.admin_types import AdminError, Connection, ConsumerConnections, GroupConfig
from ..protocol.codes import ResponseCode
from .base import AdminCommand, CommandError, Output, add_target_options
from .render import table, timestamp

# ``group update`` option -> the GroupConfig field it sets
_SETTINGS = {
    "consume_enable": "consume_enable",
    "broadcast": "consume_broadcast_enable",
    "orderly": "consume_message_orderly",
    "retry_queues": "retry_queue_nums",
    "retry_max_times": "retry_max_times",
    "broker_id": "broker_id",
    "slow_broker_id": "which_broker_when_consume_slowly",
}


class GroupCommand(AdminCommand):
    help = "list, update, delete consumer groups; a group's progress and its clients"
    actions = {
        "list": "list subscription groups of every broker",
        "progress": "a group's consumer offsets and lag per queue, and the total",
        "update": "create or update a subscription group on every master of a cluster,"
        " or on one broker (settings not given keep their value)",
        "delete": "delete a subscription group from every master of a cluster, or one broker",
        "consumers": "a group's online consumers (client id, address, language, version)"
        " and their subscriptions",
        "producers": "a producer group's online producers on the brokers of a topic",
    }

    def add_action_arguments(self, action: str, parser: argparse.ArgumentParser) -> None:
        if action == "progress":
            parser.add_argument("-g", "--group", help="the group (default: a line for each group)")
            parser.add_argument("-t", "--topic", help="only this topic")
        elif action != "list":
            parser.add_argument("-g", "--group", required=True, help="the group")
        if action in ("update", "delete"):
            add_target_options(parser)
        if action == "update":
            for flag, text in (
                ("--consume-enable", "may the group consume (default for a new group: true)"),
                ("--broadcast", "may it consume in broadcasting mode (default: true)"),
                ("--orderly", "does it consume orderly (default: false)"),
            ):
                parser.add_argument(flag, type=_boolean, metavar="true|false", help=text)
            for flag, text in (
                ("--retry-queues", "retry queues (default: 1)"),
                ("--retry-max-times", "redeliveries before the dead-letter queue (default: 16)"),
                ("--broker-id", "the broker id to consume from (default: 0, the master)"),
                ("--slow-broker-id", "the broker id to consume from when slow (default: 1)"),
            ):
                parser.add_argument(flag, type=_count, metavar="N", help=text)
        if action == "delete":
            parser.add_argument(
                "--remove-offsets",
                action="store_true",
                help="also delete the group's committed offsets (default: keep them)",
            )
        if action == "producers":
            parser.add_argument(
                "-t", "--topic", required=True, help="a topic it sends to (names the brokers)"
            )

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
        if args.group is None:
            return await self._every_group_progress(admin, args.topic)
        stats = await admin.consume_stats(args.group, args.topic)
        offsets_found = bool(stats.queues) and not args.topic  # with a topic: every queue
        if not await _group_exists(admin, args.group, has_offsets=offsets_found):
            raise CommandError(
                f"consumer group {args.group!r} does not exist: no broker has its subscription"
                " group or offsets (`rocketmq group list` shows the groups)"
            )
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

    async def _every_group_progress(self, admin: Admin, topic: str | None) -> Output:
        """One line per subscription group, as mqadmin consumerProgress without -g: its
        online consumers, how they consume, the rate and the total lag."""
        rows, document = [], []
        consumers_of_topic = set(await admin.topic_consumers(topic)) if topic else None
        for info in await admin.list_groups():
            if consumers_of_topic is not None and info.name not in consumers_of_topic:
                continue  # asked about one topic: only the groups that consume it
            stats = await admin.consume_stats(info.name, topic)
            try:
                clients = await admin.group_connections(info.name)
            except AdminError as exc:
                if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                    raise
                clients = ConsumerConnections(info.name)
            versions = sorted({c.version for c in clients.connections})
            row = {
                "group": info.name,
                "consumers": len(clients.connections),
                "versions": versions,
                "consume_type": clients.consume_type,
                "message_model": clients.message_model,
                "consume_tps": stats.consume_tps,
                "total_lag": stats.total_lag,
            }
            document.append(row)
            rows.append(
                [
                    info.name,
                    row["consumers"],
                    ",".join(map(str, versions)) or "-",
                    clients.consume_type or "-",
                    clients.message_model or "-",
                    round(stats.consume_tps, 2),
                    stats.total_lag,
                ]
            )
        headers = ["GROUP", "CONSUMERS", "VERSION", "TYPE", "MODEL", "CONSUME TPS", "TOTAL LAG"]
        return Output(document, table(headers, rows))

    async def do_update(self, admin: Admin, args: argparse.Namespace) -> Output:
        changes = {
            field: getattr(args, option)
            for option, field in _SETTINGS.items()
            if getattr(args, option) is not None
        }
        written = await admin.configure_group(
            args.group, changes, cluster=args.cluster, broker_addr=args.broker
        )
        rows = [[address, *_settings_row(config)] for address, config in written.items()]
        headers = [
            "BROKER",
            "CONSUME",
            "BROADCAST",
            "ORDERLY",
            "RETRY QUEUES",
            "MAX RETRIES",
            "BROKER ID",
            "SLOW BROKER ID",
        ]
        text = f"updated subscription group {args.group} on {', '.join(written)}\n"
        return Output({"group": args.group, "brokers": written}, text + table(headers, rows))

    async def do_delete(self, admin: Admin, args: argparse.Namespace) -> Output:
        addresses = await admin.delete_group(
            args.group,
            cluster=args.cluster,
            broker_addr=args.broker,
            clean_offset=args.remove_offsets,
        )
        offsets = "and its offsets " if args.remove_offsets else ""
        text = f"deleted subscription group {args.group} {offsets}from {', '.join(addresses)}"
        document = {
            "group": args.group,
            "brokers": addresses,
            "offsets_removed": args.remove_offsets,
        }
        return Output(document, text)

    async def do_consumers(self, admin: Admin, args: argparse.Namespace) -> Output:
        found = await admin.group_connections(args.group)
        subscriptions = table(
            ["TOPIC", "SUBSCRIPTION"], [[topic, e] for topic, e in found.subscriptions.items()]
        )
        text = (
            _connection_table(found.connections)
            + "\n\n"
            + subscriptions
            + f"\n\nconsume type {found.consume_type}, message model {found.message_model},"
            f" consume from {found.consume_from_where}"
        )
        return Output(found, text)

    async def do_producers(self, admin: Admin, args: argparse.Namespace) -> Output:
        found = await admin.producer_connections(args.group, args.topic)
        return Output(found, _connection_table(found.connections))


def _settings_row(config: GroupConfig) -> list[object]:
    return [
        config.consume_enable,
        config.consume_broadcast_enable,
        config.consume_message_orderly,
        config.retry_queue_nums,
        config.retry_max_times,
        config.broker_id,
        config.which_broker_when_consume_slowly,
    ]


def _connection_table(connections: list[Connection]) -> str:
    rows = [[c.client_id, c.client_addr, c.language, c.version] for c in connections]
    return table(["CLIENT ID", "CLIENT ADDRESS", "LANGUAGE", "VERSION"], rows)


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"{text!r} is not true or false")
    return text.lower() == "true"


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return value


async def _group_exists(admin: Admin, group: str, *, has_offsets: bool) -> bool:
    """A broker holds its subscription group, or offsets of it (brokers report every
    queue of a topic asked about, so offsets are asked for without one)."""
    if has_offsets or group in {info.name for info in await admin.list_groups()}:
        return True
    return bool((await admin.consume_stats(group)).queues)
