"""``rocketmq consume``: print a topic's messages as a consumer group receives them.

The group's offsets move only past what was printed: ``--count 1`` then ``--count 2``
print messages 0, then 1 and 2, whatever the consumer had pulled ahead.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

import anyio
import orjson

from ..client.admin import Admin
from ..client.pull_consumer import LitePullConsumer
from ..errors import ConfigError
from ..plugins import PluginHost
from ..protocol.heartbeat import MessageQueue
from .base import Output, add_common_options, add_topic_option, run_action
from .render import body_line, message_json
from .stopping import stop_on_signal

EPILOG = """\
output: one line per message on stdout (with --json, one JSON object per line: JSON
Lines); the summary, "N message(s)", goes to stderr.
offsets: the group commits, per queue, the offset after the last message printed, when
the command ends: at --count, at --idle, or on SIGINT/SIGTERM.
exit status: 0 at --count or --idle; 130 after SIGINT, 143 after SIGTERM (what was
printed is committed all the same); 1 when the topic does not exist, a broker fails, or
the offsets could not be committed.
"""


@dataclass
class Printed:
    count: int = 0
    offsets: dict[MessageQueue, int] = field(default_factory=dict)  # the offset after the last


class ConsumeCommand:
    help = "print the messages of a topic as a consumer group receives them"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.epilog = EPILOG
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
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
        add_common_options(parser, json_help="one JSON object per message (JSON Lines)")

    def run(self, args: argparse.Namespace, host: PluginHost) -> int:
        if args.count is not None and args.count < 1:
            raise ConfigError(f"--count must be at least 1, not {args.count}")
        if args.idle is not None and args.idle <= 0:
            raise ConfigError(f"--idle is a number of seconds above 0, not {args.idle}")
        return run_action(args, host, self.consume)

    async def consume(self, admin: Admin, args: argparse.Namespace) -> Output:
        await admin.topic_route(args.topic)  # no such topic: say so instead of waiting forever
        consumer = LitePullConsumer(
            args.group,
            instance=admin.instance,
            consume_from=args.start,
            poll_timeout=1.0,
            auto_commit=False,  # the consumer pulls ahead; only what was printed is committed
        )
        consumer.subscribe(args.topic, args.tags)
        printed = Printed()
        async with consumer, stop_on_signal() as stop:
            try:
                await self._print_messages(consumer, args, printed)
            finally:  # inside the signal handling: a second signal cannot cut the commit short
                with anyio.CancelScope(shield=True):
                    uncommitted = await consumer.commit(printed.offsets)
        summary = f"{printed.count} message(s)"
        if uncommitted:  # the next run would print them again: the user must know
            queues = ", ".join(f"{q.broker_name}#{q.queue_id}" for q in uncommitted)
            summary += f"; error: offsets not committed on {queues} (see the warnings above)"
            return Output(None, summary, status=1, streamed=True)
        return Output(None, summary, status=stop.status, streamed=True)

    async def _print_messages(
        self,
        consumer: LitePullConsumer,
        args: argparse.Namespace,
        printed: Printed,
    ) -> None:
        idle_since = time.monotonic()
        while args.count is None or printed.count < args.count:
            messages = await consumer.poll()
            if not messages:
                if args.idle is not None and time.monotonic() - idle_since >= args.idle:
                    return
                continue
            idle_since = time.monotonic()
            for message in messages[: None if args.count is None else args.count - printed.count]:
                line = (
                    orjson.dumps(message_json(message)).decode()
                    if args.json
                    else f"{message.msg_id} {message.queue.queue_id}:{message.queue_offset}"
                    f" tags={message.tags or ''} {body_line(message.body)}"
                )
                print(line, flush=True)
                # no await between printing and noting: a signal cannot fall in between
                printed.offsets[message.queue] = message.queue_offset + 1
                printed.count += 1
