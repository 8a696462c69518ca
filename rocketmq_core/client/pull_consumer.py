"""Consumers that the caller drives: PullConsumer (queues and offsets by hand) and
LitePullConsumer (``async for message in consumer``, with rebalance and auto-commit).

    async with PullConsumer("CG", namesrv_addr) as consumer:
        for queue in await consumer.queues("Orders"):
            result = await consumer.pull(queue, offset=0)

    consumer = LitePullConsumer("CG", namesrv_addr, consume_from="first")
    consumer.subscribe("Orders")
    async with consumer:
        async for message in consumer:
            ...
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from typing import Any

import anyio

from ..protocol.bodies import ConsumerRunningInfo
from ..protocol.bodies.running import PROP_CLIENT_VERSION, PROP_CONSUME_TYPE, PROP_NAMESERVER_ADDR
from ..protocol.codes import OUR_VERSION_DESC
from ..protocol.heartbeat import (
    ConsumerData,
    ConsumeType,
    MessageModel,
    MessageQueue,
    SubscriptionData,
)
from .config import ClientConfig
from .consumer_requests import (
    ConsumerError,
    PullResult,
    commit_offset,
    max_offset,
    min_offset,
    pull_message,
    pull_records,
    query_committed_offset,
    readable_queues,
    search_offset,
)
from .instance import ClientInstance
from .lifetime import PartsLifetime
from .message import ReceivedMessage
from .rebalance import QueueConsumer, QueueState

log = logging.getLogger("rocketmq.client.pull")


class PullConsumer(PartsLifetime):
    """Pull from queues at offsets you choose; commit offsets when you decide."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | Sequence[str] = "",
        *,
        config: ClientConfig | None = None,
        instance: ClientInstance | None = None,
    ) -> None:
        self.group = group
        self.config = config or ClientConfig(namesrv_addr=namesrv_addr)
        self.instance = instance or ClientInstance(self.config)
        self._topics: dict[str, SubscriptionData] = {}

    async def _start(self, lifetime: AsyncExitStack) -> None:
        await lifetime.enter_async_context(self.instance)
        self.instance.consumers[self.group] = self
        lifetime.push_async_callback(self._leave_group)

    async def _leave_group(self) -> None:
        if self.instance.consumers.get(self.group) is self:
            del self.instance.consumers[self.group]
            with anyio.CancelScope(shield=True), anyio.move_on_after(3):
                await self.instance.unregister(consumer_group=self.group)

    async def queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``, sorted."""
        if topic not in self._topics:
            self._topics[topic] = SubscriptionData.of(topic, "*")
            self.instance.heartbeat_soon()
        return await readable_queues(self.instance, topic)

    async def pull(
        self,
        queue: MessageQueue,
        offset: int,
        *,
        expression: str = "*",
        max_nums: int = 32,
        wait: float = 0.0,
    ) -> PullResult:
        """Messages from ``offset``; ``wait`` > 0 holds the pull on the broker until a
        message arrives or that many seconds pass (long polling)."""
        return await self._pull(pull_message, queue, offset, expression, max_nums, wait)

    async def pull_records(
        self,
        queue: MessageQueue,
        offset: int,
        *,
        expression: str = "*",
        max_nums: int = 32,
        wait: float = 0.0,
    ) -> PullResult:
        """As ``pull``, the stored records left undecoded in ``result.records`` (and not
        filtered by tag beyond the broker's hash match): for readers decoding in bulk."""
        return await self._pull(pull_records, queue, offset, expression, max_nums, wait)

    async def _pull(
        self,
        pull: Callable[..., Awaitable[PullResult]],
        queue: MessageQueue,
        offset: int,
        expression: str,
        max_nums: int,
        wait: float,
    ) -> PullResult:
        if offset < 0:
            raise ConsumerError(f"offset is at least 0, not {offset}")
        subscription = SubscriptionData.of(queue.topic, expression)
        await self._know_broker(queue)
        return await pull(
            self.instance, self.group, queue, offset, subscription, max_nums=max_nums, suspend=wait
        )

    async def _know_broker(self, queue: MessageQueue) -> None:
        if self.instance.broker_address(queue.broker_name) is None:
            await self.instance.topic_route(queue.topic)

    async def min_offset(self, queue: MessageQueue) -> int:
        await self._know_broker(queue)
        return await min_offset(self.instance, queue)

    async def max_offset(self, queue: MessageQueue) -> int:
        await self._know_broker(queue)
        return await max_offset(self.instance, queue)

    async def search_offset(self, queue: MessageQueue, timestamp_ms: int) -> int:
        await self._know_broker(queue)
        return await search_offset(self.instance, queue, timestamp_ms)

    async def committed_offset(self, queue: MessageQueue) -> int:
        """The group's committed offset on ``queue`` (-1 when none)."""
        await self._know_broker(queue)
        return await query_committed_offset(self.instance, self.group, queue)

    async def commit(self, queue: MessageQueue, offset: int) -> None:
        await self._know_broker(queue)
        await commit_offset(self.instance, self.group, queue, offset)

    # heartbeat membership: a pull consumer shows up in the group, but owns no queues
    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            self.group,
            ConsumeType.CONSUME_ACTIVELY,
            MessageModel.CLUSTERING,
            subscriptions=list(self._topics.values()),
        )

    def request_rebalance(self) -> None:
        pass

    def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        pass

    def running_info(self) -> ConsumerRunningInfo:
        """A pull consumer owns no queue: what it is and what it subscribes to."""
        properties = {
            "consumerGroup": self.group,
            PROP_CONSUME_TYPE: ConsumeType.CONSUME_ACTIVELY.name,
            PROP_NAMESERVER_ADDR: ";".join(self.instance.namesrv_addresses),
            PROP_CLIENT_VERSION: OUR_VERSION_DESC,
        }
        return ConsumerRunningInfo(properties, list(self._topics.values()))


class LitePullConsumer(QueueConsumer):
    """Iterate messages; queues come from subscribe (rebalanced) or assign (fixed).

    Pulled messages wait in a buffer of at most ``buffer_size`` per queue; with
    ``auto_commit`` the offsets of what was handed out are committed every
    ``auto_commit_interval`` (at-least-once: a crash redelivers the uncommitted part).
    """

    consume_type = ConsumeType.CONSUME_ACTIVELY

    def __init__(
        self,
        group: str,
        namesrv_addr: str | Sequence[str] = "",
        *,
        auto_commit: bool = True,
        auto_commit_interval: float = 5.0,
        buffer_size: int = 1000,
        poll_timeout: float = 5.0,
        **options: Any,
    ) -> None:
        super().__init__(group, namesrv_addr, **options)
        self.auto_commit = auto_commit
        self.auto_commit_interval = auto_commit_interval
        self.buffer_size = buffer_size
        self.poll_timeout = poll_timeout
        if auto_commit:
            self.persist_offset_interval = min(self.persist_offset_interval, auto_commit_interval)
        self._assigned: list[MessageQueue] | None = None
        self._ready: deque[tuple[QueueState, list[ReceivedMessage]]] = deque()
        self._arrived: anyio.Event | None = None
        self._pending: deque[ReceivedMessage] = deque()  # polled, not yet iterated

    def assign(self, queues: Sequence[MessageQueue]) -> None:
        """Read exactly these queues (no rebalance); replaces any subscription."""
        self._assigned = sorted(queues)
        for topic in {queue.topic for queue in queues}:
            self.subscriptions.setdefault(topic, SubscriptionData.of(topic, "*"))
        if self.started:
            self.request_rebalance()

    def _prepare_start(self) -> None:
        if not self.subscriptions:
            raise ConsumerError("subscribe to a topic or assign queues before starting")
        self._arrived = anyio.Event()

    async def _share_of(self, topic: str) -> set[MessageQueue]:
        if self._assigned is not None:
            return {queue for queue in self._assigned if queue.topic == topic}
        return await super()._share_of(topic)

    async def _pull_loop(self, state: QueueState) -> None:
        queue = state.queue
        while not state.dropped:
            if len(state.in_flight) >= self.buffer_size:
                await anyio.sleep(0.01)
                continue
            subscription = self.subscriptions.get(queue.topic)
            if subscription is None:
                return
            result = await self._pull_once(state, subscription, min(self.poll_timeout, 15.0))
            if result is None:
                continue  # failed (and paused) or dropped: the loop condition decides
            if result.messages:
                state.add(result.messages)
                self._ready.append((state, result.messages))
                assert self._arrived is not None
                self._arrived.set()
            state.next_offset = result.next_begin_offset

    async def poll(self, timeout: float | None = None) -> list[ReceivedMessage]:
        """The next messages pulled (one queue's batch), or [] after ``timeout``."""
        if not self.started:
            raise ConsumerError("the consumer is not started: use it in 'async with'")
        with anyio.move_on_after(self.poll_timeout if timeout is None else timeout):
            while True:
                while self._ready:
                    state, messages = self._ready.popleft()
                    if state.dropped or self.queues.get(state.queue) is not state:
                        continue  # the queue was rebalanced away or sought
                    offset = state.remove(messages)
                    if self.auto_commit:
                        self.offset_store.update(state.queue, offset, only_forward=True)
                    return messages
                assert self._arrived is not None
                self._arrived = anyio.Event()
                await self._arrived.wait()
        return []

    def __aiter__(self) -> LitePullConsumer:
        return self

    async def __anext__(self) -> ReceivedMessage:
        while True:
            if not self._pending:
                if not self.started:
                    raise StopAsyncIteration
                self._pending.extend(await self.poll())
                continue
            return self._pending.popleft()

    async def commit(self, offsets: dict[MessageQueue, int] | None = None) -> list[MessageQueue]:
        """Commit now: the given offsets, or what was handed out so far. Returns the
        queues whose commit failed (they are tried again at the next commit)."""
        for queue, offset in (offsets or {}).items():
            self.offset_store.update(queue, offset)
        return await self.offset_store.persist()

    def committed(self, queue: MessageQueue) -> int:
        return self.offset_store.cached(queue)

    async def seek(self, queue: MessageQueue, offset: int) -> None:
        """Go on reading ``queue`` from ``offset`` (an owned queue)."""
        state = self.queues.get(queue)
        if state is None:
            raise ConsumerError(f"{queue} is not assigned to this consumer")
        low, high = await min_offset(self.instance, queue), await max_offset(self.instance, queue)
        if not low <= offset <= high:
            raise ConsumerError(f"offset {offset} of {queue} is outside [{low}, {high}]")
        self._pending = deque(m for m in self._pending if m.queue != queue)
        self.restart_queue(queue, offset)  # a pull held on the broker is abandoned
        self.offset_store.update(queue, offset)

    async def seek_to_begin(self, queue: MessageQueue) -> None:
        await self.seek(queue, await min_offset(self.instance, queue))

    async def seek_to_end(self, queue: MessageQueue) -> None:
        await self.seek(queue, await max_offset(self.instance, queue))

    async def seek_to_timestamp(self, queue: MessageQueue, timestamp_ms: int) -> None:
        await self.seek(queue, await search_offset(self.instance, queue, timestamp_ms))
