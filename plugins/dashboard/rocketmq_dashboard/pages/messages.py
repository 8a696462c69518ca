"""The message pages: a topic's messages between two times, by key, or one by id; a
message's properties and body; resending it to a consumer group (consumed directly)."""

from __future__ import annotations

import base64
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rocketmq_core.client.admin import Admin
from rocketmq_core.client.message import ReceivedMessage
from rocketmq_core.protocol.heartbeat import MessageQueue

from ..web import InputError, admin_of, field, form_of, int_field, render, time_field

MAX_LISTED = 200  # messages one search lists
PREVIEW_BYTES = 4096  # of a body shown on the message page


async def messages_between(
    admin: Admin, topic: str, begin: int | None, end: int | None, limit: int = MAX_LISTED
) -> tuple[list[ReceivedMessage], bool]:
    """The messages of ``topic`` stored between ``begin`` and ``end`` (ms, either open),
    queue by queue, at most ``limit``; and whether more were left out."""
    found: list[ReceivedMessage] = []
    for queue_stats in (await admin.topic_stats(topic)).queues:
        queue = queue_stats.queue
        first, last = queue_stats.min_offset, queue_stats.max_offset  # last: exclusive
        if begin is not None:
            first = await admin.search_offset(queue, begin)
        if end is not None:
            last = await admin.search_offset(queue, end + 1)
        async for message in _read(admin, queue, first, last):
            if len(found) == limit:
                return _newest_first(found), True
            found.append(message)
    return _newest_first(found), False


def _newest_first(messages: list[ReceivedMessage]) -> list[ReceivedMessage]:
    return sorted(messages, key=lambda m: m.store_timestamp, reverse=True)


async def _read(admin: Admin, queue: MessageQueue, first: int, last: int):
    offset = first
    while offset < last:
        result = await admin.pull(queue, offset)
        for message in result.messages:
            if message.queue_offset < last:
                yield message
        if result.next_begin_offset <= offset:
            return  # the queue ends here (or was cleaned below)
        offset = result.next_begin_offset


def message_url(message: ReceivedMessage) -> str:
    # the offset id finds it wherever it is stored, without its topic
    return "/messages/view?" + urlencode({"id": message.offset_msg_id, "topic": message.topic})


def body_preview(body: bytes) -> tuple[str, str]:
    """(the first PREVIEW_BYTES of the body as text, else base64; how it is shown)."""
    head = body[:PREVIEW_BYTES]
    # a character the preview's end cuts in two is left out
    cuts = range(4) if len(body) > PREVIEW_BYTES else (0,)
    for cut in cuts:
        try:
            text, shown_as = head[: len(head) - cut].decode(), "text"
            break
        except UnicodeDecodeError:
            continue
    else:
        text, shown_as = base64.b64encode(head).decode(), "base64"
    if len(body) > PREVIEW_BYTES:
        shown_as += f", first {PREVIEW_BYTES} of {len(body)} bytes"
    return text, shown_as


async def search(request: Request) -> Response:
    params = request.query_params
    mode = params.get("mode", "")
    context: dict = {"page": "messages", "mode": mode or "topic", "params": params}
    if mode:
        async with admin_of(request) as admin:
            if mode == "topic":
                begin, end = time_field(params, "begin"), time_field(params, "end")
                if begin is not None and end is not None and begin > end:
                    raise InputError("begin is after end: swap them")
                limit = int_field(params, "limit", 1, MAX_LISTED, MAX_LISTED)
                messages, more = await messages_between(
                    admin, field(params, "topic"), begin, end, limit
                )
            elif mode == "key":
                topic, key = field(params, "topic"), field(params, "key")
                messages, more = await admin.query_message_by_key(topic, key, 64), False
            elif mode == "id":
                in_topic = str(params.get("topic") or "").strip() or None
                messages = [await admin.view_message(field(params, "id"), in_topic)]
                more = False
            else:
                raise InputError(f"search mode {mode!r}: use topic, key or id")
        context.update(messages=messages, more=more, message_url=message_url)
    return render(request, "messages.html", context)


async def view(request: Request) -> Response:
    msg_id = field(request.query_params, "id", "message id")
    topic = str(request.query_params.get("topic") or "").strip() or None
    async with admin_of(request) as admin:
        message = await admin.view_message(msg_id, topic)
        groups = await admin.topic_consumers(message.topic)
    body, shown_as = body_preview(message.body)
    context = {
        "page": "messages",
        "message": message,
        "body": body,
        "shown_as": shown_as,
        "groups": groups,
        "lookup_id": msg_id,
    }
    return render(request, "message_view.html", context)


async def resend(request: Request) -> Response:
    """Consume directly: one online consumer of the group runs its listener on it."""
    form = await form_of(request)
    msg_id, group = field(form, "id", "message id"), field(form, "group", "consumer group")
    topic = str(form.get("topic") or "").strip() or None
    client_id = str(form.get("client_id") or "").strip() or None
    async with admin_of(request) as admin:
        result = await admin.consume_message_directly(group, client_id, msg_id, topic)
    context = {"page": "messages", "result": result, "group": group, "msg_id": msg_id}
    return render(request, "resend_done.html", context)


routes = [
    Route("/messages", search, name="messages"),
    Route("/messages/view", view, name="message_view"),
    Route("/messages/resend", resend, methods=["POST"]),
]
