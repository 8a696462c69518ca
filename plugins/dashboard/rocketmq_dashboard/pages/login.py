"""Logging in with an ACL account (brokers with aclEnable=true refuse unsigned admin
requests): the keys are checked against a broker before they are kept."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from rocketmq_core.acl.signing import Credentials

from ..web import admin_of, field, form_of, render


async def login_form(request: Request) -> Response:
    return render(request, "login.html", {"page": "login"})


async def log_in(request: Request) -> Response:
    form = await form_of(request)
    credentials = Credentials(
        field(form, "access_key", "access key"), field(form, "secret_key", "secret key")
    )
    # a request every master checks: an unknown key or a wrong secret fails here (a read:
    # an account without admin: true logs in, and the brokers refuse its changes)
    async with admin_of(request, credentials) as admin:
        await admin.list_groups()
    request.app.state.logins.log_in(request, credentials)
    return RedirectResponse("/", status_code=303)


async def log_out(request: Request) -> Response:
    request.app.state.logins.log_out(request)
    return RedirectResponse("/", status_code=303)


routes = [
    Route("/login", login_form, methods=["GET"], name="login"),
    Route("/login", log_in, methods=["POST"]),
    Route("/logout", log_out, methods=["POST"], name="logout"),
]
