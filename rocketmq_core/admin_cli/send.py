"""``rocketmq send``: send messages to a topic."""

from __future__ import annotations

import argparse

from ..client.admin import Admin
from ..client.message import Message
from ..client.producer import Producer
from ..client.render import table
from ..plugins import PluginHost
from .base import CommandError, Output, add_common_options, add_topic_option, run_action


class SendCommand:
    help = "send messages to a topic (one, or --count of them)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_topic_option(parser)
        parser.add_argument("--body", required=True, help="the message body (text)")
        parser.add_argument("--tags", help="the message tag")
        parser.add_argument("--keys", help="keys to find it by, space separated")
        parser.add_argument("--count", type=int, default=1, help="send it this many times (1)")
        parser.add_argument(
            "--group", default="rocketmq-cli-producer", help="the producer group to send as"
        )
        add_common_options(parser)

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
