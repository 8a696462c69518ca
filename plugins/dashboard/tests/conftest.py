"""What the dashboard's tests share: a real cluster, the app on it, and fresh names."""

from __future__ import annotations

import itertools
import uuid

import httpx
import pytest
from rocketmq_dashboard.app import create_app
from rocketmq_dashboard.settings import DashboardSettings

from rocketmq_core.testing.cluster import EmbeddedCluster

_names = itertools.count()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One name server and broker shared by a module's tests (they keep apart by names);
    the CommitLog on disk, so that messages are found by key and by id."""
    with EmbeddedCluster(tmp_path_factory.mktemp("cluster"), store="mmap") as running:
        yield running


@pytest.fixture
def name():
    run = uuid.uuid4().hex[:6]
    return lambda prefix="T": f"{prefix}-{run}-{next(_names)}"


@pytest.fixture
async def dashboard(cluster):
    """An HTTP client of the dashboard app on ``cluster`` (its cookies kept)."""
    app = create_app(DashboardSettings(cluster.namesrv_address), host=cluster.host)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client
