"""The topic pages: the list, one topic's route, queue offsets and consumers, and the
forms that create, update and delete (after a confirmation page) a topic."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from rocketmq_core.client.admin_types import AdminError, TopicExistsError
from rocketmq_core.protocol.codes import ResponseCode
from rocketmq_core.protocol.constants import PERM_RW
from rocketmq_core.protocol.topic_validation import is_system_topic, topic_problem

from ..web import InputError, admin_of, field, form_of, int_field, render

PERMS = {2: "W (write only)", 4: "R (read only)", 6: "RW (read and write)"}
HIDDEN_PREFIXES = ("%RETRY%", "%DLQ%")


def hidden_by_default(topic: str) -> bool:
    return topic.startswith(HIDDEN_PREFIXES) or is_system_topic(topic)


def topic_url(topic: str, **extra: str) -> str:
    return "/topics/detail?" + urlencode({"topic": topic, **extra})


async def topic_list(request: Request) -> Response:
    show_all = request.query_params.get("all") == "1"
    async with admin_of(request) as admin:
        topics = await admin.list_topics()
        clusters = list((await admin.cluster_info()).clusters)
    shown = [t for t in topics if show_all or not hidden_by_default(t)]
    context = {
        "page": "topics",
        "topics": shown,
        "hidden": len(topics) - len(shown),
        "show_all": show_all,
        "clusters": clusters,
        "perms": PERMS,
        "done": request.query_params.get("done"),
    }
    return render(request, "topics.html", context)


async def topic_detail(request: Request) -> Response:
    topic = field(request.query_params, "topic")
    async with admin_of(request) as admin:
        route = await admin.topic_route(topic)
        stats = await admin.topic_stats(topic)
        consumers = await admin.topic_consumers(topic)
    context = {
        "page": "topics",
        "topic": topic,
        "route": route,
        "stats": stats,
        "consumers": consumers,
        "perms": PERMS,
        "done": request.query_params.get("done"),
    }
    return render(request, "topic_detail.html", context)


def _perm(values) -> int:
    perm = int_field(values, "perm", 2, 6, int(PERM_RW))
    if perm not in PERMS:
        raise InputError(f"perm {perm}: give 2 (W), 4 (R) or 6 (RW)")
    return perm


def _topic_name(values) -> str:
    topic = field(values, "topic", "topic name")
    problem = topic_problem(topic)
    if problem is not None:
        raise InputError(problem)
    return topic


async def create_topic(request: Request) -> Response:
    form = await form_of(request)
    topic = _topic_name(form)
    write = int_field(form, "write_queues", 1, 1024, 4)
    read = int_field(form, "read_queues", 1, 1024, write)
    cluster = str(form.get("cluster") or "") or None
    async with admin_of(request) as admin:
        try:
            await admin.create_topic(
                topic,
                write,
                cluster=cluster,
                perm=_perm(form),
                order=form.get("order") == "on",
                read_queues=read,
                write_queues=write,
                exist_ok=False,  # the create form must not change a topic by accident
            )
        except TopicExistsError as exc:
            raise InputError(f"{exc}: change it on its own page") from None
    return RedirectResponse(topic_url(topic, done="created"), status_code=303)


async def update_topic(request: Request) -> Response:
    form = await form_of(request)
    topic = _topic_name(form)
    write = int_field(form, "write_queues", 1, 1024, 4)
    read = int_field(form, "read_queues", 1, 1024, write)
    async with admin_of(request) as admin:
        route = await admin.topic_route(topic)
        for broker in route.broker_datas:  # each broker that serves it, as it is
            if broker.master_addr:
                await admin.update_topic(
                    topic,
                    write,
                    broker_addr=broker.master_addr,
                    perm=_perm(form),
                    order=form.get("order") == "on",
                    read_queues=read,
                    write_queues=write,
                )
    return RedirectResponse(topic_url(topic, done="updated"), status_code=303)


async def confirm_delete(request: Request) -> Response:
    topic = field(request.query_params, "topic")
    async with admin_of(request) as admin:
        route = await admin.topic_route(topic)
    brokers = [broker.broker_name for broker in route.broker_datas]
    context = {"page": "topics", "topic": topic, "brokers": brokers}
    return render(request, "topic_delete.html", context)


async def delete_topic(request: Request) -> Response:
    form = await form_of(request)
    topic = field(form, "topic")
    if form.get("confirm") != topic:
        raise InputError(f"type the topic's name, {topic}, to confirm its deletion")
    async with admin_of(request) as admin:
        try:
            await admin.delete_topic(topic)
        except AdminError as exc:
            if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
            raise InputError(f"topic {topic!r} does not exist (deleted already?)") from None
    return RedirectResponse("/topics?" + urlencode({"done": f"deleted {topic}"}), 303)


routes = [
    Route("/topics", topic_list, name="topics"),
    Route("/topics/detail", topic_detail, name="topic_detail"),
    Route("/topics/create", create_topic, methods=["POST"]),
    Route("/topics/update", update_topic, methods=["POST"]),
    Route("/topics/delete", confirm_delete, methods=["GET"]),
    Route("/topics/delete", delete_topic, methods=["POST"]),
]
