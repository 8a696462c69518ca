"""``rocketmq send``: send messages to a topic, one or many (a bounded number in flight)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson
from tqdm import tqdm

from ..client.admin import Admin
from ..client.admin_types import AdminError
from ..client.message import Message, SendResult
from ..client.producer import MQClientError, Producer
from ..client.selectors import QueueSelector
from ..errors import ConfigError, RocketMQError
from ..plugins import PluginHost
from ..protocol.codes import ResponseCode
from ..protocol.heartbeat import MessageQueue
from .base import CommandError, Output, add_common_options, add_topic_option, run_action
from .render import table
from .stopping import stop_on_signal

TABLE_ROWS_MAX = 20  # up to this --count, one table row per message; above, the summary only

EPILOG = f"""\
output: up to --count {TABLE_ROWS_MAX}, a table of the send results on stdout; with --json,
one JSON object per message (JSON Lines), whatever the count. The summary (sent, failed,
msg/s) goes to stderr. On a terminal a progress bar shows on stderr.
exit status: 0 when every message was sent; 1 when one failed (the first error is in the
summary) or the topic cannot take messages; 130 after SIGINT, 143 after SIGTERM (the
summary says how many were sent before).
"""


@dataclass
class Tally:
    started: int = 0
    sent: int = 0
    failed: int = 0
    first_error: str | None = None
    results: list[tuple[int, SendResult]] = field(default_factory=list)  # kept for the table


class SendCommand:
    help = "send messages to a topic (one, or --count of them)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.epilog = EPILOG
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        add_topic_option(parser)
        body = parser.add_mutually_exclusive_group(required=True)
        body.add_argument("--body", help="the message body (text); '-' reads it from stdin")
        body.add_argument("--body-file", metavar="PATH", help="the message body: this file")
        parser.add_argument("--tags", help="the message tag")
        parser.add_argument("--keys", help="keys to find it by, space separated")
        parser.add_argument(
            "--queue", type=int, metavar="ID", help="send to this queue id (of the first broker)"
        )
        parser.add_argument("--count", type=int, default=1, help="send it this many times (1)")
        parser.add_argument(
            "--concurrency",
            type=int,
            default=32,
            metavar="N",
            help="at most this many sends in flight (32)",
        )
        parser.add_argument(
            "--group", default="rocketmq-cli-producer", help="the producer group to send as"
        )
        add_common_options(parser, json_help="one JSON object per message sent (JSON Lines)")

    def run(self, args: argparse.Namespace, host: PluginHost) -> int:
        for option in ("count", "concurrency"):
            if getattr(args, option) < 1:
                raise ConfigError(f"--{option} must be at least 1, not {getattr(args, option)}")
        if args.queue is not None and args.queue < 0:
            raise ConfigError(f"--queue is a queue id, 0 or more, not {args.queue}")
        args.body_bytes = read_body(args.body, args.body_file)
        return run_action(args, host, self.send)

    async def send(self, admin: Admin, args: argparse.Namespace) -> Output:
        selector = None if args.queue is None else queue_with_id(args.queue)
        await note_missing_topic(admin, args.topic)
        tally = Tally()
        began = time.monotonic()
        show_progress = args.count > 1 and sys.stdout.isatty() and sys.stderr.isatty()
        with tqdm(total=args.count, unit="msg", disable=not show_progress, leave=False) as bar:

            def sent(index: int, result: SendResult) -> None:
                tally.sent += 1
                bar.update()
                if args.json:
                    print(orjson.dumps(result).decode())
                elif args.count <= TABLE_ROWS_MAX:
                    tally.results.append((index, result))

            async def send_one(index: int) -> None:
                message = Message(args.topic, args.body_bytes, tags=args.tags, keys=args.keys)
                sent(index, await producer.send(message, selector=selector))

            async def sender() -> None:
                while tally.started < args.count:
                    index, tally.started = tally.started, tally.started + 1
                    try:
                        await send_one(index)
                    except (RocketMQError, MQClientError) as exc:
                        tally.failed += 1
                        bar.update()
                        tally.first_error = tally.first_error or str(exc)

            async with Producer(args.group, instance=admin.instance) as producer:
                async with stop_on_signal() as stop:
                    # the first alone: a topic that cannot take messages fails the command
                    tally.started = 1
                    await send_one(0)
                    async with anyio.create_task_group() as senders:
                        for _ in range(min(args.concurrency, args.count - 1)):
                            senders.start_soon(sender)
        if args.count <= TABLE_ROWS_MAX and not args.json and tally.results:
            print(result_table([result for _, result in sorted(tally.results)]))
        status = stop.status or (1 if tally.failed else 0)
        text = summary(tally, time.monotonic() - began, stop.signal)
        return Output(None, text, status=status, streamed=True)


async def note_missing_topic(admin: Admin, topic: str) -> None:
    """A topic without route is created by the first send when a broker auto-creates
    topics; else the send fails. Either way, a typo in the name should not go unseen."""
    try:
        await admin.topic_route(topic)
    except AdminError as exc:
        if exc.code != ResponseCode.TOPIC_NOT_EXIST:
            raise
        print(
            f"rocketmq send: topic {topic!r} does not exist: sending creates it where brokers"
            " have autoCreateTopicEnable=true",
            file=sys.stderr,
        )


def read_body(body: str | None, body_file: str | None) -> bytes:
    if body_file is not None:
        try:
            return Path(body_file).read_bytes()
        except OSError as exc:
            raise ConfigError(f"--body-file {body_file}: cannot read it: {exc.strerror}") from None
    assert body is not None  # argparse requires one of the two
    return sys.stdin.buffer.read() if body == "-" else body.encode()


def queue_with_id(queue_id: int) -> QueueSelector:
    """A selector of the writable queue ``queue_id`` (of the first broker that has it)."""

    def select(queues: Sequence[MessageQueue], message: Message, arg: Any) -> MessageQueue:
        for queue in queues:
            if queue.queue_id == queue_id:
                return queue
        ids = sorted({queue.queue_id for queue in queues})
        raise CommandError(
            f"--queue {queue_id}: {message.topic} has no such writable queue"
            f" (its queue ids: {', '.join(map(str, ids))})"
        )

    return select


def result_table(results: list[SendResult]) -> str:
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
    return table(headers, rows)


def summary(tally: Tally, seconds: float, stopped_by: Any) -> str:
    rate = tally.sent / seconds if seconds > 0 else 0.0
    text = f"sent {tally.sent}, failed {tally.failed} in {seconds:.2f} s ({rate:.0f} msg/s)"
    if stopped_by is not None:
        in_flight = tally.started - tally.sent - tally.failed
        text = f"stopped by {stopped_by.name}: {text}; {in_flight} in flight not confirmed"
    if tally.first_error:
        text += f"; first failure: {tally.first_error}"
    return text
