"""``rocketmq offset``: move a consumer group's offsets; the timestamps people type."""

from __future__ import annotations

import argparse
import time
from datetime import datetime

from ..client.admin import Admin
from .base import AdminCommand, CommandError, Output, add_topic_option
from .render import table


class OffsetCommand(AdminCommand):
    help = "move a consumer group's offsets"
    actions = {"reset": "move a group's offsets on a topic to a point in time"}

    def add_action_arguments(self, action: str, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-g", "--group", required=True, help="the consumer group")
        add_topic_option(parser)
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
