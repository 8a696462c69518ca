"""Many queues cost no descriptor each: a broker limited to 256 open files takes sends
to 2,000 new topics from the SDK, keeps serving the topics it had, and starts again at
the same limit with every topic's messages there (issue 27, findings 1 and 2)."""

from __future__ import annotations

import resource
from pathlib import Path

import anyio
import pytest

from rocketmq_core.client.message import Message
from rocketmq_core.client.producer import MQClientError, Producer
from tests.processes import StandaloneProcess

pytestmark = pytest.mark.anyio

OPEN_FILES = 256
NEW_TOPICS = 2_000


def limit_open_files() -> None:
    """In the child: soft and hard RLIMIT_NOFILE at OPEN_FILES (the broker cannot raise it)."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))


def limited_standalone(tmp_path: Path) -> StandaloneProcess:
    """``rocketmq standalone`` in a process of its own, with OPEN_FILES descriptors."""
    conf = (
        f"storePathRootDir={tmp_path / 'store'}\nlistenPort=0\nmappedFileSizeCommitLog={16 << 20}\n"
    )
    return StandaloneProcess(tmp_path, conf, preexec_fn=limit_open_files)


async def send_to_new_topics(producer: Producer, topics: list[str]) -> list[str]:
    """Send one message to each topic, 32 at a time; the refusals' messages."""
    refusals: list[str] = []
    limiter = anyio.Semaphore(32)

    async def send(topic: str) -> None:
        async with limiter:
            try:
                await producer.send(Message(topic, topic.encode()))
            except MQClientError as exc:
                refusals.append(str(exc))

    async with anyio.create_task_group() as task_group:
        for topic in topics:
            task_group.start_soon(send, topic)
    return refusals


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the broker is the subject, not the SDK
async def test_a_broker_at_256_open_files_takes_2000_new_topics_and_restarts(tmp_path):
    broker = limited_standalone(tmp_path)
    broker.start()
    try:
        topics = [f"Many{number:05d}" for number in range(NEW_TOPICS)]
        async with Producer("PG-many", broker.namesrv, retry_times=0) as producer:
            kept = await producer.send(Message("Kept", b"before"))
            held_before = broker.descriptors()
            refusals = await send_to_new_topics(producer, topics)
            # a store refusal would name what ran out and what to do; none is expected:
            # queue files hold no descriptor
            assert refusals == [], refusals[:3]
            assert broker.process.poll() is None, broker.output()
            assert broker.descriptors() - held_before < 32  # not one per queue
            again = await producer.send(Message("Kept", b"after"))
            assert again.queue_offset is not None
        assert broker.stop() == 0, broker.output()

        broker.start()  # at the same limit, with 2,000 topics' queues on disk
        async with Producer("PG-many", broker.namesrv, retry_times=0) as producer:
            assert await send_to_new_topics(producer, topics[:50]) == []
            resent = await producer.send(Message("Kept", b"after restart"))
            assert resent.queue == kept.queue or resent.queue_offset >= 0
        assert broker.descriptors() < OPEN_FILES // 2
        assert broker.stop() == 0, broker.output()
    finally:
        broker.kill()
