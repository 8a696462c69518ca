"""``rocketmq topic``: create, update, delete, list topics; routes and queue stats."""

from __future__ import annotations

import argparse
from typing import Any

from ..client.admin import Admin
from ..client.admin_types import TopicExistsError
from ..protocol.constants import PERM_RW, Perm
from .base import AdminCommand, CommandError, Output, add_target_options, add_topic_option
from .render import table, timestamp


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
            add_topic_option(parser)
        if action in ("create", "update"):
            add_target_options(parser)
            parser.add_argument("-q", "--queues", type=int, default=4, help="queues (default 4)")
            parser.add_argument("-r", "--read-queues", type=int, help="read queues (default -q)")
            parser.add_argument("-w", "--write-queues", type=int, help="write queues (default -q)")
            parser.add_argument(
                "-p",
                "--perm",
                type=topic_perm,
                default=int(PERM_RW),
                help="who may use it: 2 W (write only), 4 R (read only), 6 RW (default),"
                " 0 nobody; add 1 (X) to make it an auto-create template: 0-7 as Java accepts",
            )
            parser.add_argument("-o", "--order", action="store_true", help="an orderly topic")
        if action == "delete":
            parser.add_argument("-c", "--cluster", help="only the masters of this cluster")

    async def do_create(self, admin: Admin, args: argparse.Namespace) -> Output:
        try:
            return await self._write(admin, args, "created", exist_ok=False)
        except TopicExistsError as exc:
            raise CommandError(f"{exc}: use `rocketmq topic update` to change it") from None

    async def do_update(self, admin: Admin, args: argparse.Namespace) -> Output:
        return await self._write(admin, args, "updated", exist_ok=True)

    async def _write(
        self, admin: Admin, args: argparse.Namespace, verb: str, *, exist_ok: bool
    ) -> Output:
        addresses = await admin.create_topic(
            args.topic,
            args.queues,
            cluster=args.cluster,
            broker_addr=args.broker,
            perm=args.perm,
            order=args.order,
            read_queues=args.read_queues,
            write_queues=args.write_queues,
            exist_ok=exist_ok,
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


def topic_perm(text: str) -> int:
    """``-p``: a topic permission as PermName accepts it (0-7: read 4, write 2, inherit 1)."""
    try:
        perm = int(text)
    except ValueError:
        perm = -1
    if not 0 <= perm <= 7:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a topic permission: use 2 (W), 4 (R) or 6 (RW), 0 for none,"
            " plus 1 for an auto-create template (0-7)"
        )
    return perm


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
