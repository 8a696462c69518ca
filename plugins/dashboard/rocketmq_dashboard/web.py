"""What every page shares: rendering a template (with the CSRF token and the login),
an Admin signed for whoever is logged in, reading form fields, and turning a failure
(a bad name server, a broker refusing) into a message on the page."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from rocketmq_core.acl.signing import Credentials
from rocketmq_core.cli.offset import parse_timestamp
from rocketmq_core.client.admin import Admin
from rocketmq_core.client.instance import ClientInstance
from rocketmq_core.client.producer import MQClientError
from rocketmq_core.errors import RocketMQError, found_in
from rocketmq_core.protocol.codes import ResponseCode

log = logging.getLogger("rocketmq.dashboard")

templates = Jinja2Templates(directory=Path(__file__).parent / "templates")


class InputError(RocketMQError):
    """A form field or query parameter a person must fix (the page answers 400)."""


def ms_time(ms: int | None) -> str:
    """Milliseconds since the epoch as local time, to the millisecond; "-" for none."""
    if not ms or ms <= 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


templates.env.filters["ms_time"] = ms_time


def render(
    request: Request, name: str, context: Mapping[str, Any] | None = None, status: int = 200
) -> Response:
    # a fault page is rendered outside the session and CSRF middleware: without either
    token = request.scope.get("csrftoken")
    logged_in = "session" in request.scope
    page = {
        "csrftoken": token() if token else "",
        "account": request.app.state.logins.account(request) if logged_in else None,
        "namesrv": request.app.state.settings.namesrv_addr,
        **(context or {}),
    }
    return templates.TemplateResponse(request, name, page, status_code=status)


@asynccontextmanager
async def admin_of(
    request: Request, credentials: Credentials | None = None
) -> AsyncIterator[Admin]:
    """An Admin on the dashboard's name servers, signing with ``credentials``, else the
    logged-in account's, else the dashboard's own; a failure inside comes out unwrapped."""
    state = request.app.state
    config = state.settings.client_config(credentials or state.logins.credentials(request))
    try:
        async with Admin(instance=ClientInstance(config, host=state.host)) as admin:
            yield admin
    except BaseExceptionGroup as group:
        found = found_in(group, (RocketMQError, MQClientError))
        if found is None:
            raise
        raise found from group


async def form_of(request: Request) -> FormData:
    return await request.form()


def field(values: Mapping[str, Any], name: str, label: str | None = None) -> str:
    """A required field, stripped; InputError naming it when empty."""
    value = str(values.get(name) or "").strip()
    if not value:
        raise InputError(f"{label or name} is empty: fill it in")
    return value


def int_field(values: Mapping[str, Any], name: str, low: int, high: int, default: int) -> int:
    text = str(values.get(name) or "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"{name} {text!r} is not a whole number") from None
    if not low <= value <= high:
        raise InputError(f"{name} {value} is out of range: give {low} to {high}")
    return value


def time_field(values: Mapping[str, Any], name: str) -> int | None:
    """A time a person typed (an HTML datetime-local value, ISO, ms, 'now') in ms."""
    text = str(values.get(name) or "").strip()
    if not text:
        return None
    try:
        return parse_timestamp(text, time.time_ns() // 1_000_000)
    except RocketMQError as exc:
        raise InputError(f"{name}: {exc}") from None


def refused_for_acl(exc: BaseException) -> bool:
    """Whether a broker or name server refused for want of an ACL account or permission."""
    code = getattr(exc, "code", None)
    return code == ResponseCode.NO_PERMISSION or "AclException" in str(exc)


async def failure_page(request: Request, exc: Exception) -> Response:
    """An error of the cluster or of the input, as a message on the page (no traceback)."""
    status = 400 if isinstance(exc, InputError) else 502
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    log.info("%s %s: %s", request.method, request.url.path, message)
    context = {"message": message, "needs_login": refused_for_acl(exc)}
    return render(request, "error.html", context, status)


async def unexpected_page(request: Request, exc: Exception) -> Response:
    """A fault of the dashboard itself: logged with its traceback, named on the page."""
    log.exception("%s %s failed", request.method, request.url.path)
    message = f"the dashboard failed on this page ({type(exc).__name__}: {exc}); see its log"
    return render(request, "error.html", {"message": message, "needs_login": False}, 500)
