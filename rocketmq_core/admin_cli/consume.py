"""``rocketmq consume``: print a topic's messages as a consumer group receives them."""

from __future__ import annotations

import argparse
import time

import orjson

from ..client.admin import Admin
from ..client.pull import LitePullConsumer
from ..client.render import body_text, message_json
from ..plugins import PluginHost
from .base import CommandError, Output, add_common_options, add_topic_option, run_action


class ConsumeCommand:
    help = "print the messages of a topic as a consumer group receives them"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_topic_option(parser)
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
        add_common_options(parser)

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
