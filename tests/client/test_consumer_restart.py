"""A consumer process killed with SIGKILL mid-stream, and its successor in the group.

Offsets are committed to the broker (with every pull and every
``persist_offset_interval``), never on acknowledgement; so the successor must get every
message the first did not commit (at-least-once), and the only ones delivered twice are
those the first consumed in the last commit window before it died.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from rocketmq_core.client.message import Message
from rocketmq_core.client.producer import Producer
from rocketmq_core.testing.cluster import EmbeddedCluster

pytestmark = pytest.mark.anyio

HELPER = Path(__file__).with_name("consumer_process.py")
TOPIC = "RestartTopic"
GROUP = "CG-restart"
TOTAL = 2000
QUEUES = 4
# the first half is sent at most this fast (10 messages every 20 ms), so that the first
# process consumes for longer than the redelivery window before it is killed
PACE = (10, 0.02)
KILL_AFTER = 600  # messages the first process consumes before it is killed
PERSIST_INTERVAL = 0.2
# A message the first process consumed at time t is committed by the next pull of its
# queue or at the latest by the persist tick that follows (PERSIST_INTERVAL later); the
# broker reads that request before it sees the connection close. So only what it
# consumed in the last PERSIST_INTERVAL before the kill can come again, plus slack for
# a tick that fires late on a busy machine.
REDELIVERY_WINDOW = PERSIST_INTERVAL + 0.5


@pytest.fixture
def cluster(tmp_path):
    with EmbeddedCluster(tmp_path / "cluster") as running:
        running.create_topic(TOPIC, queues=QUEUES)
        yield running


@contextmanager
def consumer_process(cluster: EmbeddedCluster, output: Path) -> Iterator[subprocess.Popen]:
    with output.with_suffix(".log").open("ab") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                str(HELPER),
                cluster.namesrv_address,
                GROUP,
                TOPIC,
                str(output),
                str(PERSIST_INTERVAL),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def pulling_every_queue(cluster: EmbeddedCluster) -> bool:
    """Whether one consumer has a pull held on each queue of the topic: it is running."""

    async def held() -> dict[object, set[int]]:
        return cluster.broker.pulls.held_queues(TOPIC)

    return any(len(queues) == QUEUES for queues in cluster.call(held).values())


def consumed(output: Path) -> list[tuple[str, float]]:
    """(body, time consumed) for each line the process wrote, in order."""
    if not output.exists():
        return []
    lines = output.read_text(encoding="ascii").split("\n")[:-1]  # whole lines only
    return [(body, float(at)) for body, _, at in (line.partition(" ") for line in lines)]


async def wait_for(condition, process: subprocess.Popen, log: Path, timeout: float) -> None:
    with anyio.move_on_after(timeout):
        while not condition():
            if process.poll() is not None:
                pytest.fail(f"the consumer process exited:\n{log.read_text()}")
            await anyio.sleep(0.02)
    if not condition():
        pytest.fail(f"timed out after {timeout} s; the consumer's log:\n{log.read_text()}")


# the consumers are child processes and the broker an EmbeddedCluster, both on asyncio
# whatever the test's backend: a trio run would only repeat the producer, which
# test_producer covers on both
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_killed_consumer_process_is_succeeded_without_loss_and_few_duplicates(
    cluster, tmp_path
):
    first_output, second_output = tmp_path / "first.txt", tmp_path / "second.txt"
    bodies = [f"message-{n:05d}" for n in range(TOTAL)]
    killed = anyio.Event()

    async def produce(sender: Producer) -> None:
        for n, body in enumerate(bodies):
            if n < TOTAL // 2 and n % PACE[0] == 0:
                await anyio.sleep(PACE[1])
            if n == TOTAL // 2:
                await killed.wait()  # the kill comes while half is still to be sent
            await sender.send(Message(TOPIC, body.encode()))

    async with (
        Producer("PG-restart", cluster.namesrv_address) as sender,
        anyio.create_task_group() as producing,
    ):
        with consumer_process(cluster, first_output) as first:
            first_log = first_output.with_suffix(".log")
            # no backlog: the first process consumes at the producer's pace from the start
            await wait_for(lambda: pulling_every_queue(cluster), first, first_log, timeout=20)
            producing.start_soon(produce, sender)
            await wait_for(
                lambda: len(consumed(first_output)) >= KILL_AFTER,
                first,
                first_log,
                timeout=20,
            )
            killed_at = time.time()
            first.send_signal(signal.SIGKILL)
            assert first.wait() == -signal.SIGKILL
        killed.set()
        before = consumed(first_output)

        with consumer_process(cluster, second_output) as second:
            seen = {body for body, _ in before}
            await wait_for(
                lambda: seen.union(body for body, _ in consumed(second_output)) >= set(bodies),
                second,
                second_output.with_suffix(".log"),
                timeout=30,
            )
    after = consumed(second_output)

    # at-least-once: each message was consumed by one of the two processes
    assert {body for body, _ in before + after} == set(bodies)
    assert KILL_AFTER <= len(before) < TOTAL
    counts = Counter(body for body, _ in before + after)
    assert set(counts.values()) <= {1, 2}
    assert all(count == 1 for count in Counter(body for body, _ in after).values())
    # the duplicates: consumed by the first in its last commit window, then by the second
    duplicates = {body for body, count in counts.items() if count == 2}
    recent = {body for body, at in before if at >= killed_at - REDELIVERY_WINDOW}
    assert duplicates <= recent, sorted(duplicates - recent)[:10]
    assert len(recent) < len(before)  # the window did not span the whole first run
