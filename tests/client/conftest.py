"""An embedded cluster (the public ``rocketmq_cluster`` fixture) with topic Orders."""

from __future__ import annotations

import anyio
import pytest

TOPIC = "Orders"


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
