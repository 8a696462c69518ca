"""The dead-letter pages: every %DLQ% topic, its messages, and resending one to the
group it died in (consumed directly by one of the group's consumers)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from rocketmq_core.protocol.constants import DLQ_GROUP_TOPIC_PREFIX

from ..web import InputError, admin_of, field, form_of, render, time_field
from .messages import message_url, messages_between


def group_of(dlq_topic: str) -> str:
    if not dlq_topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        raise InputError(f"{dlq_topic!r} is not a dead-letter topic (%DLQ%<group>)")
    return dlq_topic[len(DLQ_GROUP_TOPIC_PREFIX) :]


async def dlq_page(request: Request) -> Response:
    params = request.query_params
    topic = str(params.get("topic") or "").strip()
    context: dict = {"page": "dlq", "topic": topic, "params": params}
    async with admin_of(request) as admin:
        topics = await admin.list_topics()
        context["dlq_topics"] = [t for t in topics if t.startswith(DLQ_GROUP_TOPIC_PREFIX)]
        if topic:
            group_of(topic)
            begin, end = time_field(params, "begin"), time_field(params, "end")
            messages, more = await messages_between(admin, topic, begin, end)
            context.update(messages=messages, more=more, message_url=message_url)
    return render(request, "dlq.html", context)


async def resend(request: Request) -> Response:
    form = await form_of(request)
    topic, msg_id = field(form, "topic"), field(form, "id", "message id")
    group = group_of(topic)
    async with admin_of(request) as admin:
        result = await admin.consume_message_directly(group, None, msg_id, topic)
    context = {"page": "dlq", "result": result, "group": group, "msg_id": msg_id}
    return render(request, "resend_done.html", context)


routes = [
    Route("/dlq", dlq_page, name="dlq"),
    Route("/dlq/resend", resend, methods=["POST"]),
]
