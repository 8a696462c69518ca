"""A workload of acknowledged messages: concurrent putters over several queues, what
the store acknowledged, and the assertions that a store holds all of it or none of it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from ...protocol.message import (
    TRANSACTION_COMMIT,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED,
    decode_offset_msg_id,
    decode_record,
)
from ...store.api import (
    GetStatus,
    MessageStore,
    MessageToStore,
    PutStatus,
)
from .helpers import (
    BORN_HOST,
    BORN_HOST_V6,
    LONG_TOPIC,
    assert_same_records,
    make_message,
    read_queue,
)


@dataclass(frozen=True)
class Acked:
    """A message the store acknowledged, and its record as the store then returned it."""

    topic: str
    queue_id: int
    commit_log_offset: int
    queue_offset: int | None  # None: in no consume queue (prepared)
    record: bytes = field(repr=False)
    keys: tuple[str, ...] = ()
    uniq_key: str | None = None


@dataclass
class Workload:
    acked: list[Acked] = field(default_factory=list)
    max_commit_log_offset: int = 0

    def queued(self) -> dict[tuple[str, int], list[Acked]]:
        """Each queue's acknowledged messages in queue order."""
        queues: dict[tuple[str, int], list[Acked]] = {}
        for acked in sorted(self.acked, key=lambda a: a.commit_log_offset):
            if acked.queue_offset is not None:
                queues.setdefault((acked.topic, acked.queue_id), []).append(acked)
        for entries in queues.values():
            entries.sort(key=lambda a: a.queue_offset or 0)  # never None: filtered above
        return queues

    def in_log_order(self) -> list[Acked]:
        return sorted(self.acked, key=lambda a: a.commit_log_offset)

    def topics(self) -> dict[str, list[int]]:
        result: dict[str, list[int]] = {}
        for topic, queue_id in self.queued():
            result.setdefault(topic, []).append(queue_id)
        return {topic: sorted(ids) for topic, ids in result.items()}


async def put_acked(store: MessageStore, message: MessageToStore) -> Acked:
    result = await store.put(message)
    assert result.status is PutStatus.PUT_OK, (result.status, result.remark)
    return await _acked(store, message, result.commit_log_offset, result.queue_offset)


async def put_batch_acked(store: MessageStore, messages: Sequence[MessageToStore]) -> list[Acked]:
    result = await store.put_batch(messages)
    assert result.status is PutStatus.PUT_OK, (result.status, result.remark)
    assert len(result.msg_ids) == len(messages)
    offsets = [decode_offset_msg_id(msg_id)[1] for msg_id in result.msg_ids]
    assert offsets[0] == result.commit_log_offset
    return [
        await _acked(store, message, offset, result.queue_offset + index)
        for index, (message, offset) in enumerate(zip(messages, offsets, strict=True))
    ]


async def _acked(
    store: MessageStore, message: MessageToStore, commit_log_offset: int, queue_offset: int
) -> Acked:
    record = await store.message_at(commit_log_offset)
    assert record is not None, f"no record at the acknowledged offset {commit_log_offset}"
    stored = decode_record(bytes(record), check_crc=True)
    queued = stored.sys_flag & TRANSACTION_MASK in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT)
    return Acked(
        message.topic,
        message.queue_id,
        commit_log_offset,
        queue_offset if queued else None,
        bytes(record),
        tuple(stored.keys),
        stored.properties.get("UNIQ_KEY"),
    )


# several putters, so that puts interleave (and share flushes under the sync policy); half of
# the messages go to Alpha/0, so its consume queue rolls with SMALL_FILES
WORKLOAD_LANES = (
    ("Alpha", 0),
    ("Alpha", 0),
    ("Alpha", 0),
    ("Alpha", 1),
    ("Beta", 0),
    ("Beta", 2),
    (LONG_TOPIC, 0),
    ("Alpha", 0),
)


def workload_message(number: int, topic: str, queue_id: int) -> MessageToStore:
    size = 100 + (number * 37) % 500
    return make_message(
        topic,
        queue_id,
        (f"{number:05d}-".encode() * (size // 6 + 1))[:size],
        tags=("A", "B", None)[number % 3],
        keys=f"key{number} group{number % 5}",
        uniq_key=f"{number:032X}",
        flag=number % 4,
        sys_flag=TRANSACTION_PREPARED if number % 13 == 6 else 0,
        born_host=BORN_HOST_V6 if number % 9 == 4 else BORN_HOST,
        reconsume_times=number % 3,
    )


async def put_workload(store: MessageStore, count: int = 240) -> Workload:
    """``count`` messages (and a few 3-message batches) over five queues, V2 topics, IPv6
    born hosts, prepared transaction records, tags and keys; every one acknowledged."""
    workload = Workload()

    async def lane(number: int) -> None:
        topic, queue_id = WORKLOAD_LANES[number]
        for index in range(number, count, len(WORKLOAD_LANES)):
            if index % 40 == 5:
                batch = [workload_message(index * 1000 + n, topic, queue_id) for n in range(3)]
                for message in batch:
                    message.sys_flag = 0
                workload.acked.extend(await put_batch_acked(store, batch))
            else:
                message = workload_message(index, topic, queue_id)
                workload.acked.append(await put_acked(store, message))

    async with anyio.create_task_group() as task_group:
        for number in range(len(WORKLOAD_LANES)):
            task_group.start_soon(lane, number)
    workload.max_commit_log_offset = store.max_commit_log_offset
    return workload


async def assert_holds(store: MessageStore, workload: Workload) -> None:
    """The store holds exactly the workload: gapless queues of the acknowledged records,
    byte-identical, every record at its CommitLog offset, nothing more."""
    expected = workload.queued()
    assert store.queues() == workload.topics()
    for (topic, queue_id), entries in expected.items():
        where = f"{topic[:20]}/{queue_id}"
        assert [acked.queue_offset for acked in entries] == list(range(len(entries))), where
        assert store.min_offset(topic, queue_id) == 0, where
        assert store.max_offset(topic, queue_id) == len(entries), where
        found = await read_queue(store, topic, queue_id)
        assert_same_records(found, [(a.queue_offset, a.record) for a in entries], where)
        for _offset, stored in found:
            decode_record(stored, check_crc=True)
    for acked in workload.acked:
        record = await store.message_at(acked.commit_log_offset)
        assert record is not None, f"no record at {acked.commit_log_offset}"
        assert_same_records([bytes(record)], [acked.record], f"at {acked.commit_log_offset}")
    assert await store.message_at(store.max_commit_log_offset) is None


async def assert_empty(store: MessageStore, workload: Workload) -> None:
    """A store that kept nothing of ``workload``."""
    assert store.queues() == {}
    assert store.stats()["messages"] == 0
    for topic, queue_id in workload.queued():
        assert store.max_offset(topic, queue_id) == 0
        result = await store.get(topic, queue_id, 0, 32)
        assert (result.status, result.next_begin_offset) == (GetStatus.NO_MESSAGE_IN_QUEUE, 0)
    for acked in workload.acked[:10]:
        assert await store.message_at(acked.commit_log_offset) is None


async def put_numbered(
    store: MessageStore, topic: str, queue_ids: Sequence[int], count: int, body_size: int = 100
) -> list[Acked]:
    """``count`` messages of ``body_size`` bytes, round robin over ``queue_ids``, one by one."""
    acked = []
    for number in range(count):
        body = (f"{number:05d}:".encode() * (body_size // 6 + 1))[:body_size]
        message = make_message(
            topic,
            queue_ids[number % len(queue_ids)],
            body,
            tags="A",
            keys=f"n{number}",
            uniq_key=f"{number:032X}",
        )
        acked.append(await put_acked(store, message))
    return acked
