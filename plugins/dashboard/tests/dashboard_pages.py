"""Reading the dashboard's pages in tests (this folder is on sys.path: pytest puts it
there for its test modules)."""

from __future__ import annotations

import re

import anyio
import httpx


def csrf_token(page: httpx.Response) -> str:
    """The CSRF token a page's forms carry."""
    found = re.search(r'name="csrftoken" value="([^"]+)"', page.text)
    assert found, f"no form with a CSRF token on {page.url}"
    return found.group(1)


def rows(page: httpx.Response, test: str) -> list[str]:
    """The opening tags of the rows marked ``data-test=test``."""
    return re.findall(rf'<tr data-test="{test}"[^>]*>', page.text)


def error_message(page: httpx.Response) -> str:
    found = re.search(r'id="error-message"[^>]*>([^<]*)<', page.text)
    return found.group(1) if found else ""


async def eventually(condition, timeout: float = 15.0, step: float = 0.05) -> None:
    with anyio.move_on_after(timeout):
        while not await condition():
            await anyio.sleep(step)
    assert await condition(), f"condition still false after {timeout} s"
