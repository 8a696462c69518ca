"""MemoryStore: the reference MessageStore, in memory only.

Deliberately plain (dicts and lists, no segments), so that it can serve as the model
the conformance suite compares other stores with, and as the embedded broker's store
in test suites. Records are still encoded in the stored layout: pulls return them as
real brokers do.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Sequence
from typing import Any

from .api import (
    Dispatcher,
    DispatchRequest,
    GetResult,
    GetStatus,
    ImmediateGet,
    MessageToStore,
    PutResult,
    QueryResult,
    StoreClosedError,
    StoreConfig,
    TagFilter,
)
from .rules import (
    StoreClock,
    batch_refusal,
    dispatch_fields,
    edge_result,
    encode_record,
    enters_consume_queue,
    index_keys,
    is_rollback,
    queue_ids_by_topic,
    tag_matches,
)

SCAN_LIMIT = 800  # consume-queue entries one read examines at most (16,000 bytes in Java)


class _Queue:
    __slots__ = ("entries", "min_offset", "next_offset")

    def __init__(self) -> None:
        self.min_offset = 0
        self.next_offset = 0  # assigned at put; entries catch up at dispatch
        self.entries: list[tuple[int, int, int, int]] = []  # phys, size, tags code, time

    @property
    def max_offset(self) -> int:
        return self.min_offset + len(self.entries)


class MemoryStore(ImmediateGet):
    """A MessageStore without persistence: a reopened MemoryStore is empty."""

    def __init__(self, config: StoreConfig, flush_policy: Any = None) -> None:
        self.config = config  # nothing to flush: the policy is accepted and unused
        self._records: dict[int, bytes] = {}
        self._offsets: list[int] = []  # commit-log offsets in log order
        self._times: list[int] = []  # store time of each, same order
        self._next_phys = 0
        self._queues: dict[tuple[str, int], _Queue] = {}
        self._index: dict[tuple[str, str], list[tuple[int, int]]] = {}
        self._index_last = (0, 0)
        self._dispatchers: list[Dispatcher] = []
        self.clock = StoreClock()
        self._closed = False
        self._puts = 0

    async def open(self) -> None:
        self._closed = False

    async def close(self) -> None:
        self._closed = True

    def add_dispatcher(self, dispatcher: Dispatcher) -> None:
        self._dispatchers.append(dispatcher)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the memory store is closed")

    # --- writing ---------------------------------------------------------------------------

    async def put(self, message: MessageToStore) -> PutResult:
        return self.append_batch((message,))

    async def put_batch(self, messages: Sequence[MessageToStore]) -> PutResult:
        return self.append_batch(messages)

    def append(self, message: MessageToStore) -> PutResult:
        return self.append_batch((message,))

    async def wait_durable(self, result: PutResult) -> PutResult:
        return result  # nothing here is ever on disk: there is nothing to wait for

    def append_batch(self, messages: Sequence[MessageToStore]) -> PutResult:
        self._check_open()
        refused = batch_refusal(messages, self.config)
        if refused is not None:
            return refused
        store_time = self.clock.now()
        appended = [self._append(message, store_time) for message in messages]
        self._puts += len(messages)
        first_queue_offset = appended[0][1]
        return PutResult.written(
            [phys for phys, _ in appended], first_queue_offset, store_time, self.config.store_host
        )

    def _append(self, message: MessageToStore, store_time: int) -> tuple[int, int]:
        queue_offset = 0  # prepared and rolled-back records: no queue, offset 0
        if enters_consume_queue(message.sys_flag):
            queue = self._queues.get((message.topic, message.queue_id))
            if queue is None:
                queue = self._queues[(message.topic, message.queue_id)] = _Queue()
            queue_offset = queue.next_offset
            queue.next_offset += 1
        phys = self._next_phys
        record, sys_flag = encode_record(
            message, queue_offset, phys, store_time, self.config.store_host
        )
        size = len(record)
        self._records[phys] = bytes(record)
        self._offsets.append(phys)
        self._times.append(store_time)
        self._next_phys += size
        code, keys, uniq_key = dispatch_fields(message)
        request = DispatchRequest(
            message.topic,
            message.queue_id,
            phys,
            size,
            code,
            store_time,
            queue_offset,
            keys,
            uniq_key,
            sys_flag,
            message.prepared_transaction_offset,
        )
        for dispatcher in self._dispatchers:
            dispatcher(request)
        return phys, queue_offset

    def put_position(self, request: DispatchRequest) -> None:
        """The consume-queue dispatcher's target."""
        if not enters_consume_queue(request.sys_flag):
            return
        queue = self._queues.get((request.topic, request.queue_id))
        if queue is None:
            queue = self._queues[(request.topic, request.queue_id)] = _Queue()
        if request.queue_offset != queue.max_offset:
            return  # already there: dispatch is idempotent
        queue.entries.append(
            (request.commit_log_offset, request.size, request.tags_code, request.store_timestamp)
        )
        queue.next_offset = max(queue.next_offset, queue.max_offset)

    def put_index(self, request: DispatchRequest) -> None:
        """The index dispatcher's target."""
        if not self.config.message_index_enable or is_rollback(request.sys_flag):
            return
        for key in index_keys(request.keys, request.uniq_key):
            self._index.setdefault((request.topic, key), []).append(
                (request.commit_log_offset, request.store_timestamp)
            )
        self._index_last = (request.store_timestamp, request.commit_log_offset)

    # --- reading ---------------------------------------------------------------------------

    def get_now(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        tags: TagFilter = None,
        max_bytes: int = 256 * 1024,
    ) -> GetResult:
        """``get`` without a coroutine (SupportsImmediateGet)."""
        self._check_open()
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
        edge = edge_result(offset, queue.min_offset, queue.max_offset)
        if edge is not None:
            return edge
        result = GetResult(GetStatus.NO_MATCHED_MESSAGE, offset, queue.min_offset, queue.max_offset)
        total = 0
        start = offset - queue.min_offset
        stop = min(len(queue.entries), start + max(SCAN_LIMIT, max_count))
        for index in range(start, stop):
            phys, size, code, _time = queue.entries[index]
            result.last_examined_position = phys
            if not tag_matches(tags, code):
                result.next_begin_offset = queue.min_offset + index + 1
                continue
            if result.records and total + size > max_bytes:
                break
            result.records.append(self._records[phys])
            result.queue_offsets.append(queue.min_offset + index)
            result.next_begin_offset = queue.min_offset + index + 1
            total += size
            if len(result.records) >= max_count:
                break
        if result.records:
            result.status = GetStatus.FOUND
        return result

    def min_offset(self, topic: str, queue_id: int) -> int:
        queue = self._queues.get((topic, queue_id))
        return queue.min_offset if queue is not None else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        queue = self._queues.get((topic, queue_id))
        return queue.max_offset if queue is not None else 0

    def queues(self) -> dict[str, list[int]]:
        return queue_ids_by_topic(self._queues)

    async def offset_by_time(
        self, topic: str, queue_id: int, timestamp: int, boundary: str = "lower"
    ) -> int:
        queue = self._queues.get((topic, queue_id))
        if queue is None or not queue.entries:
            return 0 if queue is None else queue.min_offset
        times = [entry[3] for entry in queue.entries]
        if boundary == "upper":
            index = bisect.bisect_right(times, timestamp) - 1
            return queue.min_offset + max(index, 0)
        return queue.min_offset + bisect.bisect_left(times, timestamp)

    async def earliest_store_time(self, topic: str, queue_id: int) -> int:
        queue = self._queues.get((topic, queue_id))
        if queue is None or not queue.entries:
            return -1
        return queue.entries[0][3]

    async def message_at(self, commit_log_offset: int) -> bytes | None:
        self._check_open()
        return self._records.get(commit_log_offset)

    async def query_by_key(
        self, topic: str, key: str, max_count: int, begin: int, end: int
    ) -> QueryResult:
        self._check_open()
        result = QueryResult(
            index_last_update_timestamp=self._index_last[0],
            index_last_update_phy_offset=self._index_last[1],
        )
        for phys, stored in reversed(self._index.get((topic, key), [])):
            if len(result.records) >= max_count:
                break
            record = self._records.get(phys)
            if record is not None and begin <= stored <= end:
                result.records.append(record)
        return result

    # --- retention and counters ------------------------------------------------------------

    async def delete_expired(self, now: float | None = None, force: bool = False) -> int:
        """Drop records older than ``file_reserved_time``; the newest record always stays."""
        self._check_open()
        now_ms = (time.time() if now is None else now) * 1000
        limit = now_ms - self.config.file_reserved_time * 3600 * 1000
        expired = bisect.bisect_left(self._times, limit)
        expired = min(expired, len(self._offsets) - 1)
        if expired <= 0:
            return 0
        for phys in self._offsets[:expired]:
            del self._records[phys]
        del self._offsets[:expired]
        del self._times[:expired]
        floor = self._offsets[0]
        for queue in self._queues.values():
            drop = 0
            while drop < len(queue.entries) and queue.entries[drop][0] < floor:
                drop += 1
            if drop:
                del queue.entries[:drop]
                queue.min_offset += drop
        return expired

    @property
    def min_commit_log_offset(self) -> int:
        return self._offsets[0] if self._offsets else self._next_phys

    @property
    def max_commit_log_offset(self) -> int:
        return self._next_phys

    def stats(self) -> dict[str, Any]:
        return {
            "store": "memory",
            "messages": len(self._offsets),
            "puts": self._puts,
            "bytes": self._next_phys - self.min_commit_log_offset,
            "topics": len({topic for topic, _ in self._queues}),
            "queues": len(self._queues),
            "index_keys": len(self._index),
        }
