"""One partition's pulls, run ahead of the decoding on the client's loop thread.

Each pull starts where the last one ended, so a queue is read one pull at a time. A task
on the loop thread chains them as fast as the broker answers, up to ``AHEAD_BYTES``
ahead of the executor; the executor takes every result that has arrived at once and
decodes them as one batch. The broker's work, the network and the decoding overlap, and
the decoder's fixed cost per call is spread over several pulls (Kafka's consumer fetches
ahead the same way).
"""

from __future__ import annotations

import queue as thread_queue
from collections.abc import Iterator
from typing import Any

import anyio

from rocketmq_core.client.consumer_requests import PullResult, PullStatus
from rocketmq_core.protocol.heartbeat import MessageQueue

AHEAD_BYTES = 2 << 20  # pulled but not yet taken; the pull task waits beyond it


class _End:
    """What follows the last result: the pull task's exception, if it failed."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


def pulls_go_on(status: PullStatus, offset: int, after: int, end: int) -> bool:
    """Whether a pull at ``offset`` answered (``status``, next offset ``after``) leaves
    more to pull before ``end``: not when the queue is exhausted, does not move, or
    answered something a reader stops at."""
    if after <= offset or after >= end:
        return False
    return status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG, PullStatus.OFFSET_ILLEGAL)


class PullAhead:
    """``for results in PullAhead(...).taken(limit)``: lists of PullResults in offset
    order, each list as many as had arrived (at least one, their bodies about ``limit``
    bytes at most). Closing the iterator stops the pulls."""

    def __init__(
        self, consumer: Any, queue: MessageQueue, start: int, end: int, tags: str, batch: int
    ) -> None:
        self._consumer = consumer
        self._queue = queue
        self._start, self._end = start, end
        self._tags, self._batch = tags, batch
        self._results: thread_queue.SimpleQueue[PullResult | _End] = thread_queue.SimpleQueue()
        self._ahead = 0  # bytes pulled and not yet taken; changed on the loop thread only
        self._room: anyio.Event | None = None

    async def _pull_all(self) -> None:
        offset = self._start
        client = self._consumer.async_client
        try:
            while offset < self._end:
                while self._ahead >= AHEAD_BYTES:
                    self._room = anyio.Event()
                    await self._room.wait()
                result = await client.pull_records(
                    self._queue,
                    offset,
                    expression=self._tags,
                    max_nums=min(self._batch, self._end - offset),
                )
                self._ahead += len(result.records)
                self._results.put(result)
                if not pulls_go_on(result.status, offset, result.next_begin_offset, self._end):
                    break
                offset = result.next_begin_offset
        except BaseException as exc:  # the executor re-raises it; cancellation ends quietly
            self._results.put(_End(exc))
            raise
        self._results.put(_End())

    def _took(self, size: int) -> None:
        self._ahead -= size
        if self._room is not None and self._ahead < AHEAD_BYTES:
            self._room.set()

    def taken(self, limit: int) -> Iterator[list[PullResult]]:
        task = self._consumer.call_soon(self._pull_all)
        try:
            while True:
                item = self._results.get()
                taken: list[PullResult] = []
                size = 0
                while not isinstance(item, _End):
                    taken.append(item)
                    size += len(item.records)
                    if size >= limit or self._results.empty():
                        break
                    item = self._results.get()
                if taken:
                    self._consumer.call(self._took, size)
                    yield taken
                if isinstance(item, _End):
                    if item.error is not None:
                        raise item.error
                    return
        finally:
            task.cancel()
