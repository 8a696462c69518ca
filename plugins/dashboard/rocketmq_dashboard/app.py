"""The dashboard as an ASGI app: its pages, their static files, and the middleware that
signs the session cookie and refuses a form without its CSRF token."""

from __future__ import annotations

from pathlib import Path

from asgi_csrf import asgi_csrf
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope, Send

from rocketmq_core.errors import RocketMQError
from rocketmq_core.plugins import PluginHost, load_plugins

from .logins import Logins
from .pages import cluster, dlq, groups, live, login, messages, producers, topics
from .settings import DashboardSettings
from .web import failure_page, unexpected_page

PAGES = (cluster, topics, groups, messages, dlq, producers, live, login)

CSRF_REFUSED = (
    '<!doctype html><title>Form refused</title><p id="csrf-refused">This form came'
    " without its security token, or with an old one (CSRF protection): reload the page"
    " and submit it again.</p>"
)
_HTML_HEADERS = [(b"content-type", b"text/html; charset=utf-8")]


async def _csrf_refused(scope: Scope, send: Send, reason: object) -> None:
    await send({"type": "http.response.start", "status": 403, "headers": _HTML_HEADERS})
    await send({"type": "http.response.body", "body": CSRF_REFUSED.encode()})


def create_app(settings: DashboardSettings, *, host: PluginHost | None = None) -> Starlette:
    routes: list = [route for page in PAGES for route in page.routes]
    static = Path(__file__).parent / "static"
    routes.append(Mount("/static/app", StaticFiles(directory=static), name="static"))
    # every form posts to a fixed path; those are checked even without any cookie (a page
    # on another site can post to a dashboard on localhost that has no login)
    form_paths = {r.path for r in routes if isinstance(r, Route) and "POST" in (r.methods or ())}
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=settings.allowed_hosts),
            Middleware(SessionMiddleware, secret_key=settings.secret, same_site="strict"),
            Middleware(
                asgi_csrf,
                signing_secret=settings.secret,
                always_protect=form_paths,
                send_csrf_failed=_csrf_refused,
            ),
        ],
        exception_handlers={
            RocketMQError: failure_page,  # MQClientError, AdminError, ConfigError, ...
            Exception: unexpected_page,
        },
    )
    app.state.settings = settings
    app.state.host = host or load_plugins()
    app.state.logins = Logins()
    return app
