"""Logging in with an ACL account: the keys stay in this process, keyed by a random
session id; the browser holds only that id, in a signed cookie (SessionMiddleware)."""

from __future__ import annotations

import secrets

from starlette.requests import Request

from rocketmq_core.acl.signing import Credentials

SESSION_KEY = "login"


class Logins:
    def __init__(self, default: Credentials | None = None) -> None:
        self.default = default
        self._by_session: dict[str, Credentials] = {}

    def credentials(self, request: Request) -> Credentials | None:
        """The logged-in account's keys, else None (the dashboard's own, if any, apply)."""
        return self._by_session.get(request.session.get(SESSION_KEY, ""))

    def account(self, request: Request) -> str | None:
        """The access key shown in the page header."""
        credentials = self.credentials(request)
        if credentials is not None:
            return credentials.access_key
        return None

    def log_in(self, request: Request, credentials: Credentials) -> None:
        self.log_out(request)
        session_id = secrets.token_urlsafe(24)
        self._by_session[session_id] = credentials
        request.session[SESSION_KEY] = session_id

    def log_out(self, request: Request) -> None:
        self._by_session.pop(request.session.pop(SESSION_KEY, ""), None)
