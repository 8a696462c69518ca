"""The producer page: the connections of a producer group on the brokers of a topic
(GET_PRODUCER_CONNECTION_LIST), as rocketmq-dashboard's producer tab shows them."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..web import admin_of, field, render


async def producers_page(request: Request) -> Response:
    params = request.query_params
    context: dict = {"page": "producers", "params": params}
    if params.get("group") or params.get("topic"):
        group, topic = field(params, "group", "producer group"), field(params, "topic")
        async with admin_of(request) as admin:
            context["topics"] = await admin.list_topics()
            context["result"] = await admin.producer_connections(group, topic)
    return render(request, "producers.html", context)


routes = [Route("/producers", producers_page, name="producers")]
