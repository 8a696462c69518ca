"""What push and lite-pull consumers share: subscriptions, rebalance, offsets, and one
pulling task per owned queue.

Rebalance runs at start, every ``rebalance_interval`` and whenever a broker says the
group changed (NOTIFY_CONSUMER_IDS_CHANGED). It takes the readable queues of each
subscribed topic and the group's client ids, and keeps the share the allocation
strategy gives this client (all queues when broadcasting).
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..errors import RemotingError, ResponseError
from ..protocol.bodies import ConsumerRunningInfo, ProcessQueueInfo
from ..protocol.bodies.running import (
    PROP_CLIENT_VERSION,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_NAMESERVER_ADDR,
)
from ..protocol.codes import OUR_VERSION_DESC, RequestCode, ResponseCode
from ..protocol.constants import NAME_PATTERN
from ..protocol.headers import GetConsumerListByGroupRequestHeader
from ..protocol.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumerIdList,
    ConsumeType,
    MessageModel,
    MessageQueue,
    SubscriptionData,
)
from .allocation import AllocationStrategy, averagely
from .config import ClientConfig, group_problem
from .consumer_requests import (
    ConsumerError,
    PullResult,
    PullStatus,
    max_offset,
    pull_message,
    queues_of,
    search_offset,
)
from .instance import ClientInstance
from .lifetime import PartsLifetime
from .offsets import BrokerOffsetStore, LocalFileOffsetStore, OffsetStore

log = logging.getLogger("rocketmq.client.consumer")

PULL_DELAY_ON_ERROR = 3.0  # Java's pullTimeDelayMillsWhenException

DEFAULT_OFFSET_STORE_DIR = Path(
    os.environ.get("ROCKETMQ_OFFSET_STORE_DIR", Path.home() / ".rocketmq_offsets")
)


@dataclass(eq=False)
class QueueState:
    """One owned queue: where pulling is, what is in flight, and its pulling task."""

    queue: MessageQueue
    next_offset: int = -1
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    dropped: bool = False
    locked_until: float = 0.0  # orderly consumers: the broker lock, as we last saw it
    in_flight: dict[int, Any] = field(default_factory=dict)  # queue offset -> message
    in_flight_bytes: int = 0
    highest_offset: int = -1
    consuming: bool = False  # orderly consumers: a task is working through this queue
    last_pull_ms: int = 0  # wall clock of the last pull answered, as running info reports
    last_consume_ms: int = 0

    def add(self, messages: Sequence[Any]) -> None:
        for message in messages:
            if message.queue_offset not in self.in_flight:
                self.in_flight[message.queue_offset] = message
                self.in_flight_bytes += len(message.body)
            self.highest_offset = max(self.highest_offset, message.queue_offset)

    def remove(self, messages: Sequence[Any]) -> int:
        """Forget consumed messages; the offset to commit: the oldest still in flight,
        or one past the newest seen."""
        for message in messages:
            if self.in_flight.pop(message.queue_offset, None) is not None:
                self.in_flight_bytes -= len(message.body)
        self.last_consume_ms = _now_ms()
        # pulls add messages in offset order, so the first key is the oldest
        return next(iter(self.in_flight), self.highest_offset + 1)


class QueueConsumer(PartsLifetime):
    """Base of PushConsumer and LitePullConsumer; an async context manager."""

    consume_type = ConsumeType.CONSUME_PASSIVELY

    def __init__(
        self,
        group: str,
        namesrv_addr: str | Sequence[str] = "",
        *,
        config: ClientConfig | None = None,
        instance: ClientInstance | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from: ConsumeFromWhere | str = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: int | None = None,
        allocation: AllocationStrategy = averagely,
        rebalance_interval: float = 20.0,
        pull_batch_size: int = 32,
        offset_store_dir: Path | str | None = None,
    ) -> None:
        problem = group_problem(group, "consumer")
        if problem:
            raise ConsumerError(problem)
        if not 1 <= pull_batch_size <= 1024:
            raise ConsumerError(f"pull_batch_size is 1..1024, not {pull_batch_size}")
        self.group = group
        self.config = config or ClientConfig(namesrv_addr=namesrv_addr)
        self.instance = instance or ClientInstance(self.config)
        self.message_model = MessageModel(message_model)
        self.consume_from = _consume_from(consume_from)
        if (
            self.consume_from is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
            and consume_timestamp is None
        ):
            raise ConsumerError("consume_from=timestamp needs consume_timestamp (epoch ms)")
        self.consume_timestamp = consume_timestamp
        self.allocation = allocation
        self.rebalance_interval = rebalance_interval
        self.pull_batch_size = pull_batch_size
        self.persist_offset_interval = self.config.persist_offset_interval
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.queues: dict[MessageQueue, QueueState] = {}
        self.offset_store: OffsetStore = self._offset_store(offset_store_dir)
        self._rebalance_now: anyio.Event | None = None
        self._task_group: TaskGroup | None = None
        self._rebalance_lock: anyio.Lock | None = None
        self._unrouted_topics: set[str] = set()
        self.started = False
        self.started_ms = 0  # wall clock of the last start

    def _offset_store(self, directory: Path | str | None) -> OffsetStore:
        if self.message_model is MessageModel.CLUSTERING:
            return BrokerOffsetStore(self.instance, self.group)
        # not the client id: that holds the pid, and offsets must outlive the process
        name = f"{self.config.client_ip}@{self.config.instance_name}"
        return LocalFileOffsetStore.for_group(
            Path(directory or DEFAULT_OFFSET_STORE_DIR), name, self.group
        )

    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Receive the messages of ``topic`` whose tag matches ``expression``
        (``"*"``, or tags joined by ``||``). May be called again to change it."""
        if not topic or not NAME_PATTERN.match(topic):
            raise ConsumerError(f"topic {topic!r} is not valid")
        version = int(anyio.current_time() * 1000) if self.started else 0
        self.subscriptions[topic] = SubscriptionData.of(topic, expression, version)
        if self.started:
            self.instance.heartbeat_soon()
            self.request_rebalance()

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)
        if self.started:
            self.instance.heartbeat_soon()
            self.request_rebalance()

    # --- life cycle ------------------------------------------------------------------

    def _prepare_start(self) -> None:
        """Subclasses: checks and per-start state, before any part is entered."""

    async def _start(self, lifetime: AsyncExitStack) -> None:
        self._prepare_start()
        self.started_ms = _now_ms()
        await lifetime.enter_async_context(self.instance)
        if self.group in self.instance.consumers:
            raise ConsumerError(f"group {self.group!r} already has a consumer in this client")
        await self.offset_store.load()
        self.instance.consumers[self.group] = self
        lifetime.push_async_callback(self._leave_group)
        self._rebalance_lock = anyio.Lock()
        self._rebalance_now = anyio.Event()
        lifetime.callback(self._forget_task_group)
        self._task_group = await lifetime.enter_async_context(anyio.create_task_group())
        lifetime.push_async_callback(self._stop_tasks, self._task_group)
        self.started = True
        for topic in self.subscriptions:
            try:
                await self.instance.topic_route(topic)
            except ResponseError as exc:
                # the retry topic is created by our first heartbeat: not worth a warning
                level = logging.DEBUG if topic.startswith("%RETRY%") else logging.WARNING
                log.log(level, "%s: no route for %s yet (%s)", self.group, topic, exc)
        await self.instance.heartbeat_all()
        await self.rebalance()
        self._start_tasks(self._task_group)

    def _start_tasks(self, task_group: TaskGroup) -> None:
        """The background work of a started consumer (subclasses add theirs)."""
        task_group.start_soon(self._rebalance_periodically)
        task_group.start_soon(self._persist_periodically)

    async def _stop_tasks(self, task_group: TaskGroup) -> None:
        """Drop every queue, let subclasses finish what is in hand, cancel the rest."""
        self.started = False
        for state in list(self.queues.values()):
            state.dropped = True
            state.scope.cancel()
        try:
            with anyio.CancelScope(shield=True):
                await self._before_shutdown()
        finally:
            task_group.cancel_scope.cancel()

    def _forget_task_group(self) -> None:
        self._task_group = None

    async def _leave_group(self) -> None:
        """Commit offsets, unlock the queues and leave the group (5 s at most, shielded)."""
        registered = self.instance.consumers.get(self.group) is self
        if registered:
            del self.instance.consumers[self.group]
        try:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await self.offset_store.persist()
                await self._release_queues(set(self.queues))
                if registered:
                    await self.instance.unregister(consumer_group=self.group)
        finally:
            self.queues.clear()

    async def _before_shutdown(self) -> None:
        """Subclasses: finish what is in hand (the push consumer lets callbacks end)."""

    # --- what the instance asks ------------------------------------------------------

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            self.group,
            self.consume_type,
            self.message_model,
            self.consume_from,
            list(self.subscriptions.values()),
        )

    def request_rebalance(self) -> None:
        if self._rebalance_now is not None:
            self._rebalance_now.set()

    def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """A broker moved the group's offsets (``rocketmq offset reset``): restart the
        affected queues from there."""
        if self._task_group is not None:
            self._task_group.start_soon(self._reset_offsets, topic, offsets)

    async def _reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        for queue, offset in offsets.items():
            self.offset_store.update(queue, offset)
            if queue in self.queues:
                self.restart_queue(queue, offset)
        await self.offset_store.persist(set(offsets))

    def restart_queue(self, queue: MessageQueue, offset: int) -> QueueState:
        """Drop what is pulled of an owned queue and go on from ``offset``."""
        old = self.queues[queue]
        old.dropped = True
        old.scope.cancel()
        state = self.queues[queue] = QueueState(
            queue, next_offset=offset, locked_until=old.locked_until
        )
        self._start_queue(queue)
        return state

    def running_info(self) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO's answer: settings, subscriptions and owned queues
        (no statusTable: pull and consume rates are not measured)."""
        return ConsumerRunningInfo(
            self.running_properties(),
            list(self.subscriptions.values()),
            {queue: self._process_queue_info(state) for queue, state in self.queues.items()},
        )

    def running_properties(self) -> dict[str, str]:
        """The settings running info reports: Java's property names (mqadmin
        consumerStatus reads the PROP_* ones); subclasses add theirs."""
        return {
            "consumerGroup": self.group,
            "messageModel": self.message_model.name,
            "consumeFromWhere": self.consume_from.name,
            "pullBatchSize": str(self.pull_batch_size),
            PROP_CONSUME_TYPE: self.consume_type.name,
            PROP_CONSUMER_START_TIMESTAMP: str(self.started_ms),
            PROP_NAMESERVER_ADDR: ";".join(self.instance.namesrv_addresses),
            PROP_CLIENT_VERSION: OUR_VERSION_DESC,
        }

    def _process_queue_info(self, state: QueueState) -> ProcessQueueInfo:
        cached = list(state.in_flight)  # offsets, oldest first
        return ProcessQueueInfo(
            commit_offset=self.offset_store.cached(state.queue),
            cached_msg_min_offset=cached[0] if cached else 0,
            cached_msg_max_offset=cached[-1] if cached else 0,
            cached_msg_count=len(cached),
            locked=state.locked_until > anyio.current_time(),
            dropped=state.dropped,
            last_pull_timestamp=state.last_pull_ms,
            last_consume_timestamp=state.last_consume_ms,
        )

    # --- rebalance -------------------------------------------------------------------

    async def _rebalance_periodically(self) -> None:
        while True:
            assert self._rebalance_now is not None
            # a topic without a route yet (a retry topic just created) is looked at again soon
            wait = 1.0 if self._unrouted_topics else self.rebalance_interval
            with anyio.move_on_after(wait):
                await self._rebalance_now.wait()
            self._rebalance_now = anyio.Event()
            try:
                await self.rebalance()
            except Exception:
                log.exception("%s: rebalance failed", self.group)

    async def rebalance(self) -> None:
        """Work out the queues this client owns now; start and stop pulling to match."""
        assert self._rebalance_lock is not None
        async with self._rebalance_lock:
            wanted: set[MessageQueue] = set()
            for topic in list(self.subscriptions):
                wanted |= await self._share_of(topic)
            gone = [state for queue, state in self.queues.items() if queue not in wanted]
            for state in gone:
                await self._stop_queue(state)
                del self.queues[state.queue]
            await self.offset_store.persist({state.queue for state in gone})
            await self._release_queues({state.queue for state in gone})
            for state in gone:
                self.offset_store.remove(state.queue)
            added = sorted(wanted - self.queues.keys())
            for queue in added:
                self.queues[queue] = QueueState(queue)
            await self._claim_queues(added)
            for queue in added:
                self._start_queue(queue)
            if gone or added:
                log.info(
                    "%s: rebalanced, +%d -%d queues, %d owned",
                    self.group,
                    len(added),
                    len(gone),
                    len(self.queues),
                )

    async def _share_of(self, topic: str) -> set[MessageQueue]:
        try:
            route = await self.instance.topic_route(topic)
        except (ResponseError, RemotingError) as exc:
            log.debug("%s: no route for %s: %s", self.group, topic, exc)
            self._unrouted_topics.add(topic)
            # keep what we have: a name server hiccup must not stop consumption
            return {queue for queue in self.queues if queue.topic == topic}
        self._unrouted_topics.discard(topic)
        queues = queues_of(topic, route)
        if not queues:
            return set()
        if self.message_model is MessageModel.BROADCASTING:
            return set(queues)
        client_ids = await self._client_ids(topic, route)
        if client_ids is None:
            return {queue for queue in self.queues if queue.topic == topic}
        if self.instance.client_id not in client_ids:
            self.instance.heartbeat_soon()  # the broker does not know us yet
            return set()
        return set(self.allocation(self.group, self.instance.client_id, queues, client_ids))

    async def _client_ids(self, topic: str, route: Any) -> list[str] | None:
        brokers = [b.broker_name for b in route.broker_datas]
        random.shuffle(brokers)
        header = GetConsumerListByGroupRequestHeader(consumer_group=self.group)
        for broker_name in brokers:
            address = self.instance.broker_address(broker_name)
            if address is None:
                continue
            try:
                response = await self.instance.invoke(
                    address, RequestCode.GET_CONSUMER_LIST_BY_GROUP, header
                )
            except ResponseError as exc:
                if exc.code == ResponseCode.SYSTEM_ERROR:  # the broker knows no such group yet
                    return []
                log.debug("%s: consumer list from %s: %s", self.group, address, exc)
                continue
            except RemotingError as exc:
                log.debug("%s: consumer list from %s: %s", self.group, address, exc)
                continue
            return sorted(ConsumerIdList.decode(response.body).consumer_id_list)
        return None

    async def _claim_queues(self, queues: list[MessageQueue]) -> None:
        """Subclasses: claim newly assigned queues before pulling starts (orderly: lock)."""

    async def _release_queues(self, queues: set[MessageQueue]) -> None:
        """Subclasses: give up what was claimed (orderly: unlock on the broker)."""

    # --- per-queue tasks -------------------------------------------------------------

    def _start_queue(self, queue: MessageQueue) -> None:
        assert self._task_group is not None
        state = self.queues[queue]
        state.dropped = False
        state.scope = anyio.CancelScope()
        self._task_group.start_soon(self._run_queue, state)

    async def _run_queue(self, state: QueueState) -> None:
        with state.scope:
            try:
                if state.next_offset < 0:
                    state.next_offset = await self.start_offset(state.queue)
                await self._pull_loop(state)
            except Exception:
                log.exception("%s: pulling %s stopped", self.group, state.queue)

    async def _stop_queue(self, state: QueueState) -> None:
        state.dropped = True
        state.scope.cancel()

    async def _pull_loop(self, state: QueueState) -> None:
        raise NotImplementedError

    async def _pull_once(
        self, state: QueueState, subscription: SubscriptionData, suspend: float, commit: int = -1
    ) -> PullResult | None:
        """One pull of an owned queue: None after a failure (logged, then a pause) or
        when the queue was dropped meanwhile."""
        try:
            result = await pull_message(
                self.instance,
                self.group,
                state.queue,
                state.next_offset,
                subscription,
                max_nums=self.pull_batch_size,
                suspend=suspend,
                commit_offset=commit,
            )
        except (RemotingError, ResponseError, ConsumerError) as exc:
            log.warning("%s: pull from %s failed: %s", self.group, state.queue, exc)
            await anyio.sleep(PULL_DELAY_ON_ERROR)
            return None
        if state.dropped:
            return None
        state.last_pull_ms = _now_ms()
        if result.status is PullStatus.OFFSET_ILLEGAL:
            log.warning(
                "%s: offset %d of %s is gone; going on from %d",
                self.group,
                state.next_offset,
                state.queue,
                result.next_begin_offset,
            )
        return result

    async def start_offset(self, queue: MessageQueue) -> int:
        """Where to start on a queue: the stored offset, else per ``consume_from``."""
        stored = await self.offset_store.read(queue)
        if stored >= 0:
            return stored
        retry = queue.topic.startswith("%RETRY%")
        where = self.consume_from
        if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET or (
            retry and where is not ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
        ):
            return 0
        if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP and not retry:
            assert self.consume_timestamp is not None
            return await search_offset(self.instance, queue, self.consume_timestamp)
        return await max_offset(self.instance, queue)

    async def _persist_periodically(self) -> None:
        while True:
            await anyio.sleep(self.persist_offset_interval)
            await self.offset_store.persist(set(self.queues))


_CONSUME_FROM = {
    "last": ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
    "first": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    "timestamp": ConsumeFromWhere.CONSUME_FROM_TIMESTAMP,
}


def _consume_from(value: ConsumeFromWhere | str) -> ConsumeFromWhere:
    if isinstance(value, ConsumeFromWhere):
        return value
    try:
        return _CONSUME_FROM[value]
    except KeyError:
        raise ConsumerError(
            f"consume_from is 'last', 'first' or 'timestamp', not {value!r}"
        ) from None


def _now_ms() -> int:
    return int(time.time() * 1000)
