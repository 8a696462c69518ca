"""Live charts: a page that polls ``/api/live`` (each broker's In/Out TPS, each group's
lag) and draws them with plotly.js, which the plotly wheel ships and this page serves."""

from __future__ import annotations

import functools
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rocketmq_core.client.admin import TOOLS_GROUP
from rocketmq_core.client.admin_types import AdminError
from rocketmq_core.errors import RocketMQError

from ..web import admin_of, render
from .cluster import broker_rows

# each costs one GET_CONSUME_STATS per broker per poll; the admin tools' own group is left out
MAX_CHARTED_GROUPS = 20


@functools.cache
def plotly_js() -> bytes:
    import plotly.offline

    return plotly.offline.get_plotlyjs().encode()


async def plotly_script(request: Request) -> Response:
    return Response(
        plotly_js(),
        media_type="text/javascript",
        headers={"Cache-Control": "public, max-age=86400"},
    )


async def live_page(request: Request) -> Response:
    return render(request, "live.html", {"page": "live"})


async def live_sample(request: Request) -> Response:
    """One sample: {time, brokers: [{broker, address, in_tps, out_tps}], groups: [{group,
    lag}]}; ``error`` instead when the cluster cannot be read, so the page keeps polling."""
    try:
        return JSONResponse(await _sample(request))
    except RocketMQError as exc:
        return JSONResponse({"error": str(exc).splitlines()[0]}, status_code=502)


async def _sample(request: Request) -> dict:
    sample: dict = {"time": time.time_ns() // 1_000_000, "brokers": [], "groups": []}
    async with admin_of(request) as admin:
        for row in await broker_rows(admin):
            sample["brokers"].append(
                {
                    "broker": f"{row.name}/{row.broker_id}",
                    "address": row.address,
                    "in_tps": _number(row.in_tps),
                    "out_tps": _number(row.out_tps),
                }
            )
        groups = [g for g in await admin.list_groups() if g.name != TOOLS_GROUP]
        for info in groups[:MAX_CHARTED_GROUPS]:
            try:
                stats = await admin.consume_stats(info.name)
            except AdminError:
                continue  # a group without offsets has no lag to draw
            sample["groups"].append({"group": info.name, "lag": stats.total_lag})
    return sample


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


routes = [
    Route("/live", live_page, name="live"),
    Route("/api/live", live_sample, name="live_sample"),
    Route("/static/plotly.min.js", plotly_script, name="plotly_js"),
]
