"""``rocketmq message``: find messages by key, or one message by its id."""

from __future__ import annotations

import argparse
from typing import Any

from ..client.admin import Admin
from ..client.render import body_text, message_json, table, timestamp
from .base import AdminCommand, CommandError, Output


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
