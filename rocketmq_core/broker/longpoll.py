"""Long polling (STORE.md §12): a pull that finds nothing waits for the next message.

The store's dispatch of a new record to a queue wakes the pulls held on that queue
whose offset it reaches and whose tag filter it matches (no polling); a held pull
that times out is answered PULL_NOT_FOUND by its processor.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from ..store.api import DispatchRequest
from ..store.rules import enters_consume_queue, tag_matches


@dataclass(eq=False, slots=True)
class _Held:
    offset: int
    tags: frozenset[int] | None
    event: anyio.Event
    holder: object  # the connection the pull came on


class PullHoldService:
    def __init__(self) -> None:
        self._held: dict[tuple[str, int], list[_Held]] = {}

    @property
    def holding(self) -> int:
        return sum(len(waiters) for waiters in self._held.values())

    async def hold(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        tags: frozenset[int] | None,
        timeout: float,
        holder: object = None,
    ) -> bool:
        """Wait until a matching message reaches ``offset``; False after ``timeout`` s."""
        held = _Held(offset, tags, anyio.Event(), holder)
        key = (topic, queue_id)
        self._held.setdefault(key, []).append(held)
        try:
            with anyio.move_on_after(timeout):
                await held.event.wait()
        finally:
            waiters = self._held.get(key)
            if waiters is not None and held in waiters:
                waiters.remove(held)
                if not waiters:
                    del self._held[key]
        return held.event.is_set()

    def held_queues(self, topic: str) -> dict[object, set[int]]:
        """The queues of ``topic`` with a pull held, by the connection holding it."""
        by_holder: dict[object, set[int]] = {}
        for (held_topic, queue_id), waiters in self._held.items():
            if held_topic == topic:
                for held in waiters:
                    by_holder.setdefault(held.holder, set()).add(queue_id)
        return by_holder

    def wants(self, topic: str, queue_id: int) -> bool:
        """Only the queues with a pull held need to hear of new records."""
        return (topic, queue_id) in self._held

    def __call__(self, request: DispatchRequest) -> None:
        """A store dispatcher: wake the pulls this record answers."""
        waiters = self._held.get((request.topic, request.queue_id))
        if not waiters or not enters_consume_queue(request.sys_flag):
            return
        for held in waiters:
            if request.queue_offset >= held.offset and tag_matches(held.tags, request.tags_code):
                held.event.set()

    def release_all(self) -> None:
        """Stopping: every held pull is answered now."""
        for waiters in self._held.values():
            for held in waiters:
                held.event.set()
