"""An embedded cluster (the public ``rocketmq_cluster`` fixture) with topic Orders."""

from __future__ import annotations

import itertools
import uuid

import anyio
import pytest

from rocketmq_core.testing.cluster import EmbeddedCluster

TOPIC = "Orders"
_names = itertools.count()


@pytest.fixture
def cluster(rocketmq_cluster):
    rocketmq_cluster.create_topic(TOPIC, queues=4)
    return rocketmq_cluster


@pytest.fixture
def namesrv(cluster) -> str:
    return cluster.namesrv_address


async def eventually(condition, timeout: float = 10.0, step: float = 0.02) -> None:
    """Wait until ``condition()`` is true; fail the test with what it was after ``timeout``."""
    with anyio.move_on_after(timeout):
        while not condition():
            await anyio.sleep(step)
    assert condition(), f"condition still false after {timeout} s"


@pytest.fixture(scope="module")
def module_cluster(tmp_path_factory):
    """One cluster shared by a module's tests (they keep apart by fresh names)."""
    with EmbeddedCluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


@pytest.fixture
def name():
    """A fresh topic or group name per call (tests run once per backend)."""
    run = uuid.uuid4().hex[:6]
    return lambda prefix="T": f"{prefix}-{run}-{next(_names)}"
