"""Long polling for POP and NOTIFICATION (POP.md §6): a request that found nothing is
held until a message reaches the topic (or its POP retry topic), an orderly queue is
acked free, or its poll time ends."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import anyio

from ...store.api import Dispatcher, DispatchRequest
from ...store.rules import enters_consume_queue
from .keys import normal_topic

MAX_HELD_PER_TOPIC = 1024  # Java's popPollingSize: more are answered POLLING_FULL


@dataclass(eq=False, slots=True)
class _Held:
    group: str
    queue_id: int  # -1: any queue
    event: anyio.Event


class PopHoldService:
    """Held POPs, and the store dispatcher that wakes them. ``add_dispatcher`` is called
    with it on the first hold only: a broker nobody POPs from pays nothing per message."""

    def __init__(self, add_dispatcher: Callable[[Dispatcher], None]) -> None:
        self._held: dict[str, list[_Held]] = {}  # by the topic the client asked for
        self._add_dispatcher = add_dispatcher
        self.listening = False  # whether the store tells it of new messages yet
        self.limit = MAX_HELD_PER_TOPIC

    def full(self, topic: str) -> bool:
        return len(self._held.get(topic, ())) >= self.limit

    def count(self, topic: str, group: str, queue_id: int) -> int:
        return sum(
            1
            for held in self._held.get(topic, ())
            if held.group == group and held.queue_id == queue_id
        )

    async def hold(self, topic: str, group: str, queue_id: int, timeout: float) -> bool:
        """Wait for news of ``topic``; False after ``timeout`` seconds."""
        if not self.listening:
            self._add_dispatcher(self)
            self.listening = True
        held = _Held(group, queue_id, anyio.Event())
        self._held.setdefault(topic, []).append(held)
        try:
            with anyio.move_on_after(timeout):
                await held.event.wait()
        finally:
            waiters = self._held.get(topic)
            if waiters is not None and held in waiters:
                waiters.remove(held)
                if not waiters:
                    del self._held[topic]
        return held.event.is_set()

    def notify(self, topic: str, group: str | None = None) -> None:
        """Wake what is held on ``topic`` (for ``group`` only, when given)."""
        for held in self._held.get(topic, ()):
            if group is None or held.group == group:
                held.event.set()

    def wants(self, topic: str, queue_id: int) -> bool:
        """The store's queue filter (the mmap store asks it before building a request):
        only a topic with a POP held, or a retry topic while any is held."""
        return bool(self._held) and (topic in self._held or topic.startswith("%RETRY%"))

    def __call__(self, request: DispatchRequest) -> None:
        """A store dispatcher: a new message wakes the POPs held on its topic."""
        if not self._held or not enters_consume_queue(request.sys_flag):
            return
        topic = request.topic
        if topic in self._held:
            self.notify(topic)
        elif topic.startswith("%RETRY%"):
            for held_topic, waiters in list(self._held.items()):
                for held in waiters:
                    if normal_topic(topic, held.group) == held_topic:
                        held.event.set()

    def release_all(self) -> None:
        for waiters in self._held.values():
            for held in waiters:
                held.event.set()
