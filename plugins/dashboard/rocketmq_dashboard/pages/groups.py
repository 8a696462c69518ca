"""The consumer group pages: every group with its lag and consumers; one group's lag
per queue, its connections and subscriptions, and resetting its offsets by time."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rocketmq_core.client.admin import LATEST, Admin
from rocketmq_core.client.admin_types import AdminError, ConsumerConnections, ConsumeStats
from rocketmq_core.protocol.codes import ResponseCode

from ..web import InputError, admin_of, form_of, render, time_field
from ..web import field as form_field


@dataclass
class GroupRow:
    name: str
    brokers: list[str]
    lag: int = 0
    consume_tps: float = 0.0
    consumers: int = 0
    orderly: bool = False
    broadcast: bool = False
    problems: list[str] = field(default_factory=list)


async def connections_or_none(admin: Admin, group: str) -> ConsumerConnections | None:
    """The group's online consumers; None when it has none."""
    try:
        return await admin.group_connections(group)
    except AdminError as exc:
        if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:
            return None
        raise


async def group_list(request: Request) -> Response:
    rows = []
    async with admin_of(request) as admin:
        for info in await admin.list_groups():
            config = info.config
            row = GroupRow(
                info.name,
                info.brokers,
                orderly=config.consume_message_orderly,
                broadcast=config.consume_broadcast_enable,
            )
            try:  # as rocketmq-dashboard does, a group whose stats fail shows zeros
                stats = await admin.consume_stats(info.name)
                row.lag, row.consume_tps = stats.total_lag, stats.consume_tps
            except AdminError as exc:
                row.problems.append(str(exc).splitlines()[0])
            connections = await connections_or_none(admin, info.name)
            row.consumers = len(connections.connections) if connections else 0
            rows.append(row)
    return render(request, "groups.html", {"page": "groups", "groups": rows})


async def _stats_or_none(admin: Admin, group: str) -> ConsumeStats | None:
    try:
        return await admin.consume_stats(group)
    except AdminError as exc:
        if exc.code in (
            ResponseCode.CONSUMER_NOT_ONLINE,
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        ):
            return None
        raise


async def group_detail(request: Request) -> Response:
    group = form_field(request.query_params, "group")
    async with admin_of(request) as admin:
        stats = await _stats_or_none(admin, group)
        connections = await connections_or_none(admin, group)
    topics = sorted(
        {q.queue.topic for q in (stats.queues if stats else [])}
        | set(connections.subscriptions if connections else {})
    )
    context = {
        "page": "groups",
        "group": group,
        "stats": stats,
        "connections": connections,
        "topics": [t for t in topics if not t.startswith("%RETRY%")],
    }
    return render(request, "group_detail.html", context)


async def reset_offsets(request: Request) -> Response:
    form = await form_of(request)
    group, topic = form_field(form, "group"), form_field(form, "topic")
    timestamp = LATEST if form.get("to") == "latest" else time_field(form, "timestamp")
    if timestamp is None:
        raise InputError("timestamp is empty: pick the time to consume again from")
    async with admin_of(request) as admin:
        result = await admin.reset_offset_by_time(group, topic, timestamp)
    context = {
        "page": "groups",
        "result": result,
        "back": "/groups/detail?" + urlencode({"group": group}),
    }
    return render(request, "reset_done.html", context)


routes = [
    Route("/groups", group_list, name="groups"),
    Route("/groups/detail", group_detail, name="group_detail"),
    Route("/groups/reset-offset", reset_offsets, methods=["POST"]),
]
