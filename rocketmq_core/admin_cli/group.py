"""``rocketmq group``: subscription groups and a group's progress (lag per queue)."""

from __future__ import annotations

import argparse

from ..client.admin import Admin
from ..client.render import table, timestamp
from .base import AdminCommand, Output


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
