"""``rocketmq message``: find messages by key, by id or by queue offset; print a topic's
messages between two times."""

from __future__ import annotations

import argparse
import base64
import codecs
import time
from typing import Any

import orjson

from ..client.admin import Admin
from ..client.message import ReceivedMessage
from ..protocol.bodies import CMResult
from ..protocol.heartbeat import MessageQueue
from .base import AdminCommand, CommandError, Output
from .offset import parse_timestamp
from .render import body_text, message_json, table, timestamp

TIMESTAMP_HELP = "milliseconds, an ISO date-time, yyyy-MM-dd#HH:mm:ss:SSS, or 'now'"


class MessageCommand(AdminCommand):
    help = "find messages by key, id or queue offset; print a topic's messages"
    actions = {
        "query": "messages of a topic by key (--key); one message by id (--id) or by"
        " queue offset (--offset with --broker-name and --queue)",
        "print": "every message of a topic stored between two times, queue by queue",
        "consume-directly": "hand one stored message to one consumer of a group, whose"
        " listener takes it once, committing nothing (redrives a message of the"
        " group's dead-letter topic); exits 1 unless the listener succeeded",
    }

    def add_action_arguments(self, action: str, parser: argparse.ArgumentParser) -> None:
        if action == "consume-directly":
            parser.add_argument("-g", "--group", required=True, help="the consumer group")
            parser.add_argument(
                "-d",
                "--client-id",
                help="the consumer, as `rocketmq group consumers` lists it (default: the"
                " group's first online consumer)",
            )
            parser.add_argument(
                "-i",
                "--id",
                required=True,
                help="a message id: the client's (UNIQ_KEY) or offset id",
            )
            parser.add_argument(
                "-t", "--topic", help="the topic (needed unless --id is an offset message id)"
            )
            return
        if action == "print":
            parser.add_argument("-t", "--topic", required=True, help="the topic")
            parser.add_argument("--begin", help=f"stored at or after this: {TIMESTAMP_HELP}")
            parser.add_argument("--end", help=f"stored at or before this: {TIMESTAMP_HELP}")
            parser.add_argument("--tags", default="*", help="tag expression, like 'A || B' (*)")
            parser.add_argument(
                "--charset", default="utf-8", help="the bodies' text encoding (utf-8)"
            )
            parser.add_argument("--no-body", action="store_true", help="leave the bodies out")
            return
        parser.add_argument(
            "-t", "--topic", help="the topic (needed unless --id is an offset message id)"
        )
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("-k", "--key", help="a key the producer set (KEYS)")
        which.add_argument("-i", "--id", help="a message id: the client's (UNIQ_KEY) or offset id")
        which.add_argument(
            "--offset", type=int, help="a queue offset (with --broker-name, --queue)"
        )
        parser.add_argument("--broker-name", help="the broker of the queue (with --offset)")
        parser.add_argument("--queue", type=int, help="the queue id (with --offset)")
        parser.add_argument("--max-num", type=int, default=32, help="at most this many (32)")
        parser.add_argument("--begin", help=f"by key: stored at or after this: {TIMESTAMP_HELP}")
        parser.add_argument("--end", help=f"by key: stored at or before this: {TIMESTAMP_HELP}")

    async def do_query(self, admin: Admin, args: argparse.Namespace) -> Output:
        if args.id:
            message = await admin.view_message(args.id, args.topic)
            return Output(message_json(message), message_detail(message))
        if args.offset is not None:
            return await self._query_offset(admin, args)
        if not args.topic:
            raise CommandError("a query by key needs the topic: add --topic")
        begin, end = _time_range(args)
        found = await admin.query_message_by_key(
            args.topic, args.key, args.max_num, begin=begin or 0, end=end
        )
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

    async def do_consume_directly(self, admin: Admin, args: argparse.Namespace) -> Output:
        result = await admin.consume_message_directly(
            args.group, args.client_id, args.id, args.topic
        )
        outcome = result.consume_result.value if result.consume_result else None
        document = {
            "consume_result": outcome,
            "order": result.order,
            "auto_commit": result.auto_commit,
            "remark": result.remark,
            "spent_time_ms": result.spent_time_mills,
        }
        rows = [[name, "" if value is None else str(value)] for name, value in document.items()]
        status = 0 if outcome == CMResult.CR_SUCCESS.value else 1
        return Output(document, table(["FIELD", "VALUE"], rows), status=status)

    async def _query_offset(self, admin: Admin, args: argparse.Namespace) -> Output:
        missing = [
            option
            for option, value in (
                ("--topic", args.topic),
                ("--broker-name", args.broker_name),
                ("--queue", args.queue),
            )
            if value is None
        ]
        if missing:
            raise CommandError(f"a query by offset names the queue: add {' and '.join(missing)}")
        queue = MessageQueue(args.topic, args.broker_name, args.queue)
        message = await admin.message_at(queue, args.offset)
        return Output(message_json(message), message_detail(message))

    async def do_print(self, admin: Admin, args: argparse.Namespace) -> Output:
        _check_charset(args.charset)
        begin, end = _time_range(args)
        stats = await admin.topic_stats(args.topic)
        printed = 0
        for queue_stats in stats.queues:
            queue = queue_stats.queue
            first = queue_stats.min_offset
            if begin is not None:
                first = await admin.search_offset(queue, begin)
            last = queue_stats.max_offset  # exclusive
            if end is not None:
                last = await admin.search_offset(queue, end + 1)  # the first one after end
            rows = []
            async for message in _messages(admin, queue, first, last, args.tags):
                printed += 1
                if args.json:  # JSON Lines: one message a line, as it is read
                    document = message_json(message)
                    _set_body(document, None if args.no_body else message.body, args.charset)
                    print(orjson.dumps(document).decode(), flush=True)
                else:
                    rows.append(_print_row(message, args))
            if not args.json:
                heading = (
                    f"{queue.broker_name} queue {queue.queue_id}:"
                    f" offsets [{first}, {last}), {len(rows)} message(s)"
                )
                headers = ["OFFSET", "MSG ID", "STORED", "TAGS", "KEYS"]
                headers += [] if args.no_body else ["BODY"]
                print(heading + ("\n" + table(headers, rows) if rows else ""), flush=True)
        return Output(None, f"{printed} message(s) in {args.topic}", streamed=True)


async def _messages(admin: Admin, queue: MessageQueue, first: int, last: int, tags: str):
    """The messages of ``queue`` from offset ``first`` up to ``last`` (exclusive)."""
    offset = first
    while offset < last:
        result = await admin.pull(queue, offset, expression=tags)
        for message in result.messages:
            if message.queue_offset < last:
                yield message
        if result.next_begin_offset <= offset:
            return  # nothing further to read (the queue ends, or was cleaned below)
        offset = result.next_begin_offset


def _time_range(args: argparse.Namespace) -> tuple[int | None, int | None]:
    now = time.time_ns() // 1_000_000
    begin = parse_timestamp(args.begin, now) if args.begin else None
    end = parse_timestamp(args.end, now) if args.end else None
    if begin is not None and end is not None and begin > end:
        raise CommandError(f"--begin {args.begin} is after --end {args.end}: swap them")
    return begin, end


def _check_charset(charset: str) -> None:
    try:
        codecs.lookup(charset)
    except LookupError:
        raise CommandError(f"unknown --charset {charset!r}: give one like utf-8 or gbk") from None


def _body(body: bytes, charset: str) -> tuple[str, bool]:
    """(text, is_base64): the body decoded with ``charset``, else in base64."""
    try:
        return body.decode(charset), False
    except UnicodeDecodeError:
        return base64.b64encode(body).decode(), True


def _set_body(document: dict[str, Any], body: bytes | None, charset: str) -> None:
    """The body decoded with ``charset`` in ``document``; none with ``body`` None."""
    document.pop("body", None)
    document.pop("body_base64", None)
    if body is not None:
        text, encoded = _body(body, charset)
        document["body_base64" if encoded else "body"] = text


def _print_row(message: ReceivedMessage, args: argparse.Namespace) -> list[Any]:
    row: list[Any] = [
        message.queue_offset,
        message.msg_id,
        timestamp(message.store_timestamp),
        message.tags,
        " ".join(message.keys) or None,
    ]
    if not args.no_body:
        text, encoded = _body(message.body, args.charset)
        row.append(("base64:" if encoded else "") + text.replace("\n", "\\n"))
    return row


def message_detail(message: ReceivedMessage) -> str:
    text, encoded = body_text(message.body)
    fields: list[list[object]] = [
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
