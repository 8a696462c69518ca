"""Every async test runs on both anyio backends (docs/design.md rule 10)."""

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param
