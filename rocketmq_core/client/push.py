"""PushConsumer: messages delivered to a listener, concurrently or in queue order.

    async def handle(messages):
        for message in messages:
            print(message.body)

    consumer = PushConsumer("CG-orders", namesrv_addr="127.0.0.1:9876", listener=handle)
    consumer.subscribe("Orders", "new || paid")
    async with consumer:
        await anyio.sleep_forever()

The listener gets a list of up to ``consume_batch_size`` messages. It may be async, or a
plain function (run in a worker thread). Returning None, True or CONSUME_SUCCESS
acknowledges them; returning False or RECONSUME_LATER, or raising, hands them back:
clustering consumers send them to the retry topic (delivered again later, up to
``max_reconsume_times``, then to the dead-letter topic ``%DLQ%<group>``); orderly
consumers retry them in place after a pause, keeping the queue in order.

A message is handed back with CONSUMER_SEND_MSG_BACK to the master of the broker group it
came from. When that fails (the master is gone and the queue is read from a slave, say),
the consumer sends it to ``%RETRY%<group>`` itself through a producer of its own, as Java's
consumer does: any broker group with a master takes it. When none does, it is consumed
here again a few seconds later.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import os
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from enum import Enum
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..errors import RemotingError, ResponseError, RocketMQError
from ..protocol.bodies import CMResult, ConsumeMessageDirectlyResult
from ..protocol.bodies.running import PROP_CONSUME_ORDERLY, PROP_THREADPOOL_CORE_SIZE
from ..protocol.codes import RequestCode
from ..protocol.constants import RETRY_GROUP_TOPIC_PREFIX
from ..protocol.headers import ConsumerSendMsgBackRequestHeader
from ..protocol.heartbeat import (
    LockBatchRequest,
    LockBatchResponse,
    MessageModel,
    MessageQueue,
)
from .consumer_requests import ConsumerError, PullStatus
from .message import (
    DELAY,
    MAX_RECONSUME_TIMES,
    ORIGIN_MESSAGE_ID,
    RECONSUME_TIME,
    RETRY_TOPIC,
    TRAN_MSG,
    Message,
    ReceivedMessage,
)
from .producer import Producer
from .rebalance import QueueConsumer, QueueState

log = logging.getLogger("rocketmq.client.push")


class ConsumeStatus(Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"  # concurrent: retry through the retry topic
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"  # orderly: retry here


Listener = Callable[[list[ReceivedMessage]], Any | Awaitable[Any]]

BROKER_SUSPEND = 15.0  # how long a broker may hold a pull (Java brokerSuspendMaxTimeMillis)
PULL_DELAY_WHILE_UNLOCKED = 3.0
PULL_DELAY_ON_FLOW_CONTROL = 0.05
LOCK_RENEW_INTERVAL = 20.0
LOCK_TTL = 30.0  # a lock not renewed for this long is presumed lost (the broker's is 60 s)
CONSUME_LATER_DELAY = 5.0  # seconds before a message no broker took back is consumed again
INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"  # Java's group for a client's own producer
FIRST_RETRY_LEVEL = 3  # a retry waits delay level 3 + reconsumeTimes (10 s, 30 s, 1 min...)


def _succeeded(outcome: Any) -> bool:
    return outcome is None or outcome is True or outcome is ConsumeStatus.CONSUME_SUCCESS


def _exception_summary(exc: BaseException) -> str:
    """What a listener raised and where, in one line (a direct consumption's remark)."""
    summary = f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        where = frames[-1]
        summary += f", {os.path.basename(where.filename)}:{where.lineno} in {where.name}"
    return summary


class PushConsumer(QueueConsumer):
    def __init__(
        self,
        group: str,
        namesrv_addr: str | Sequence[str] = "",
        *,
        listener: Listener,
        orderly: bool = False,
        consume_batch_size: int = 1,
        consume_concurrency: int = 20,
        max_reconsume_times: int = 16,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100 * 1024 * 1024,
        suspend_on_failure: float = 1.0,
        **options: Any,
    ) -> None:
        super().__init__(group, namesrv_addr, **options)
        if not callable(listener):
            raise ConsumerError("listener must be a callable taking a list of messages")
        if not 1 <= consume_batch_size <= 1024:
            raise ConsumerError(f"consume_batch_size is 1..1024, not {consume_batch_size}")
        if consume_concurrency < 1:
            raise ConsumerError(f"consume_concurrency is at least 1, not {consume_concurrency}")
        self.listener = listener
        # an object whose __call__ is async counts as async too
        self.is_async = inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
            type(listener).__call__
        )
        self.orderly = orderly
        self.consume_batch_size = consume_batch_size
        self.consume_concurrency = consume_concurrency
        self.max_reconsume_times = max_reconsume_times
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        self.suspend_on_failure = suspend_on_failure
        self._limiter: anyio.CapacityLimiter | None = None
        self._retry_producer: Producer | None = None  # while started, clustering only

    def _prepare_start(self) -> None:
        if not self.subscriptions:
            raise ConsumerError("subscribe to a topic before starting the consumer")
        if self.message_model is MessageModel.CLUSTERING:
            # messages handed back come again through the group's retry topic
            self.subscribe(RETRY_GROUP_TOPIC_PREFIX + self.group)
        self._limiter = anyio.CapacityLimiter(self.consume_concurrency)

    async def _start(self, lifetime: AsyncExitStack) -> None:
        if self.message_model is MessageModel.CLUSTERING:
            # entered before the consumer, left after it: a listener finishing at shutdown
            # may still hand a message back through it
            producer = Producer(INNER_PRODUCER_GROUP, config=self.config, instance=self.instance)
            self._retry_producer = await lifetime.enter_async_context(producer)
            lifetime.callback(self._forget_retry_producer)
        await super()._start(lifetime)

    def _forget_retry_producer(self) -> None:
        self._retry_producer = None

    def _start_tasks(self, task_group: TaskGroup) -> None:
        super()._start_tasks(task_group)
        if self.orderly:
            task_group.start_soon(self._renew_locks_periodically)

    def running_properties(self) -> dict[str, str]:
        return {
            **super().running_properties(),
            "consumeMessageBatchMaxSize": str(self.consume_batch_size),
            "maxReconsumeTimes": str(self.max_reconsume_times),
            PROP_CONSUME_ORDERLY: "true" if self.orderly else "false",
            PROP_THREADPOOL_CORE_SIZE: str(self.consume_concurrency),
        }

    # --- pulling ---------------------------------------------------------------------

    async def _pull_loop(self, state: QueueState) -> None:
        queue = state.queue
        while not state.dropped:
            if self.orderly and state.locked_until < anyio.current_time():
                await anyio.sleep(PULL_DELAY_WHILE_UNLOCKED)  # not ours until the lock is back
                continue
            if (
                len(state.in_flight) >= self.pull_threshold_for_queue
                or state.in_flight_bytes >= self.pull_threshold_size_for_queue
            ):
                await anyio.sleep(PULL_DELAY_ON_FLOW_CONTROL)
                continue
            subscription = self.subscriptions.get(queue.topic) or self.subscriptions.get(
                RETRY_GROUP_TOPIC_PREFIX + self.group
            )
            if subscription is None:
                return
            committed = (
                self.offset_store.cached(queue)
                if self.message_model is MessageModel.CLUSTERING
                else -1
            )
            result = await self._pull_once(state, subscription, BROKER_SUSPEND, committed)
            if result is None:
                continue  # failed (and paused) or dropped: the loop condition decides
            if result.status is PullStatus.OFFSET_ILLEGAL:
                self.offset_store.update(queue, result.next_begin_offset)
                await self.offset_store.persist({queue})
            elif result.messages:
                state.add(result.messages)
                self._dispatch(state, result.messages)
            elif result.status is not PullStatus.NO_NEW_MSG and not state.in_flight:
                # everything pulled was filtered out: commit past it
                self.offset_store.update(queue, result.next_begin_offset, only_forward=True)
            state.next_offset = result.next_begin_offset

    # --- consuming -------------------------------------------------------------------

    def _dispatch(self, state: QueueState, messages: list[ReceivedMessage]) -> None:
        assert self._task_group is not None
        if self.orderly:
            self._task_group.start_soon(self._consume_orderly, state)
            return
        for start in range(0, len(messages), self.consume_batch_size):
            chunk = messages[start : start + self.consume_batch_size]
            self._task_group.start_soon(self._consume_concurrently, state, chunk)

    async def _run_listener(self, messages: list[ReceivedMessage]) -> Any:
        if self.is_async:
            return await self.listener(messages)
        return await anyio.to_thread.run_sync(self.listener, messages, abandon_on_cancel=False)

    async def _call_listener(self, messages: list[ReceivedMessage]) -> bool:
        try:
            outcome = await self._run_listener(messages)
        except Exception:
            log.exception("%s: the listener failed on %d message(s)", self.group, len(messages))
            return False
        return _succeeded(outcome)

    async def consume_directly(self, message: ReceivedMessage) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY, as an admin asks through a broker: the listener takes
        ``message`` once, outside any queue; no offset moves and nothing is sent back,
        whatever it answers."""
        started = time.monotonic()
        remark = None
        try:
            outcome = await self._run_listener([message])
        except Exception as exc:
            log.warning(
                "%s: the listener failed on %s, consumed directly",
                self.group,
                message.msg_id,
                exc_info=True,
            )
            result, remark = CMResult.CR_THROW_EXCEPTION, _exception_summary(exc)
        else:
            result = CMResult.CR_SUCCESS if _succeeded(outcome) else CMResult.CR_LATER
        return ConsumeMessageDirectlyResult(
            consume_result=result,
            order=self.orderly,
            remark=remark,
            spent_time_mills=round((time.monotonic() - started) * 1000),
        )

    async def _consume_concurrently(
        self, state: QueueState, messages: list[ReceivedMessage]
    ) -> None:
        assert self._limiter is not None
        async with self._limiter:
            if state.dropped:
                return
            ok = await self._call_listener(messages)
            if not ok and self.message_model is MessageModel.CLUSTERING:
                failed = [m for m in messages if not await self._send_back(m)]
                if failed:
                    # no broker took them: consume them here again, a bit later
                    for message in failed:
                        message.reconsume_times += 1
                    assert self._task_group is not None
                    self._task_group.start_soon(self._consume_later, state, failed)
                    retried = {id(m) for m in failed}
                    messages = [m for m in messages if id(m) not in retried]
            elif not ok:
                log.warning("%s: broadcast messages failed and are dropped", self.group)
            offset = state.remove(messages)
            if not state.dropped:
                self.offset_store.update(state.queue, offset, only_forward=True)

    async def _consume_later(self, state: QueueState, messages: list[ReceivedMessage]) -> None:
        await anyio.sleep(CONSUME_LATER_DELAY)
        await self._consume_concurrently(state, messages)

    async def _send_back(self, message: ReceivedMessage, delay_level: int = 0) -> bool:
        """Hand a message to the broker's retry path (``delay_level`` -1: the dead-letter
        topic), or failing that to the retry topic ourselves; False if neither took it."""
        header = ConsumerSendMsgBackRequestHeader(
            offset=message.commit_log_offset,
            group=self.group,
            delay_level=delay_level,
            origin_msg_id=message.msg_id,
            origin_topic=message.topic,
            unit_mode=False,
            max_reconsume_times=self.max_reconsume_times,
        )
        broker_name = message.queue.broker_name
        address = self.instance.master_address(broker_name)
        if address is None and self.instance.broker_address(broker_name) is None:
            address = message.store_host  # a broker the route does not name: ask where it is
        if address is None:
            reason = f"broker {broker_name} has no master"
        else:
            try:
                await self.instance.invoke(address, RequestCode.CONSUMER_SEND_MSG_BACK, header)
                return True
            except (RemotingError, ResponseError) as exc:
                reason = f"{address} answered {exc}"
        log.warning(
            "%s: cannot send %s back (%s); sending it to the retry topic",
            self.group,
            message.msg_id,
            reason,
        )
        return await self._resend_to_retry_topic(message, delay_level)

    async def _resend_to_retry_topic(self, message: ReceivedMessage, delay_level: int) -> bool:
        """Send a copy to %RETRY%group with the properties Java's consumer gives it; the
        broker counts it from RECONSUME_TIME and parks it at its DELAY level."""
        producer = self._retry_producer
        if producer is None:
            return False
        properties = dict(message.properties)
        properties.pop(TRAN_MSG, None)
        properties[RETRY_TOPIC] = message.topic
        if not properties.get(ORIGIN_MESSAGE_ID):
            properties[ORIGIN_MESSAGE_ID] = message.msg_id
        properties[MAX_RECONSUME_TIMES] = str(self.max_reconsume_times)
        if delay_level < 0:
            # past the limit: the broker moves it to the dead-letter topic at once
            properties[RECONSUME_TIME] = str(self.max_reconsume_times + 1)
            properties.pop(DELAY, None)
        else:
            properties[RECONSUME_TIME] = str(message.reconsume_times + 1)
            properties[DELAY] = str(delay_level or FIRST_RETRY_LEVEL + message.reconsume_times)
        retry = Message(RETRY_GROUP_TOPIC_PREFIX + self.group, message.body, flag=message.flag)
        try:
            await producer.resend(retry, properties)
        except RocketMQError as exc:
            log.warning("%s: no broker took %s back: %s", self.group, message.msg_id, exc)
            return False
        return True

    async def _consume_orderly(self, state: QueueState) -> None:
        """One task per queue at a time takes messages in offset order."""
        if state.consuming:
            return
        state.consuming = True
        try:
            while state.in_flight and not state.dropped:
                if state.locked_until < anyio.current_time():
                    return  # resumed by the next pull once the lock is renewed
                # in flight in offset order (pulls add in order): take the oldest
                batch = list(itertools.islice(state.in_flight.values(), self.consume_batch_size))
                assert self._limiter is not None
                async with self._limiter:
                    ok = await self._call_listener(batch)
                if not ok:
                    if batch[0].reconsume_times >= self.max_reconsume_times:
                        # out of retries: to the dead-letter topic, and on with the queue
                        if not await self._send_back(batch[0], delay_level=-1):
                            await anyio.sleep(self.suspend_on_failure)
                            continue
                        batch = batch[:1]
                    else:
                        for message in batch:
                            message.reconsume_times += 1
                        await anyio.sleep(self.suspend_on_failure)
                        continue
                offset = state.remove(batch)
                if not state.dropped:
                    self.offset_store.update(state.queue, offset, only_forward=True)
        finally:
            state.consuming = False

    async def _before_shutdown(self) -> None:
        """Let running listeners finish (bounded) so their offsets are committed."""
        with anyio.move_on_after(5):
            while self._limiter is not None and self._limiter.borrowed_tokens:
                await anyio.sleep(0.01)

    # --- orderly locks ---------------------------------------------------------------

    async def _claim_queues(self, queues: list[MessageQueue]) -> None:
        if self.orderly and self.message_model is MessageModel.CLUSTERING:
            await self._lock(queues)

    async def _release_queues(self, queues: set[MessageQueue]) -> None:
        if not self.orderly or not queues:
            return
        for broker_name, owned in _by_broker(queues).items():
            address = self.instance.master_address(broker_name)
            if address is None:
                continue
            body = LockBatchRequest(self.group, self.instance.client_id, owned).encode()
            try:
                await self.instance.invoke(address, RequestCode.UNLOCK_BATCH_MQ, None, body)
            except (RemotingError, ResponseError) as exc:
                log.debug("%s: unlock on %s failed: %s", self.group, broker_name, exc)

    async def _lock(self, queues: Sequence[MessageQueue]) -> None:
        now = anyio.current_time()
        for broker_name, wanted in _by_broker(queues).items():
            address = self.instance.master_address(broker_name)
            if address is None:
                continue
            body = LockBatchRequest(self.group, self.instance.client_id, wanted).encode()
            try:
                response = await self.instance.invoke(
                    address, RequestCode.LOCK_BATCH_MQ, None, body
                )
            except (RemotingError, ResponseError) as exc:
                log.warning("%s: lock on %s failed: %s", self.group, broker_name, exc)
                continue
            locked = set(LockBatchResponse.decode(response.body).lock_ok_mq_set)
            for queue in wanted:
                state = self.queues.get(queue)
                if state is None:
                    continue
                if queue in locked:
                    state.locked_until = now + LOCK_TTL
                    if state.in_flight:
                        self._dispatch(state, [])
                else:
                    state.locked_until = 0.0

    async def _renew_locks_periodically(self) -> None:
        while True:
            await anyio.sleep(LOCK_RENEW_INTERVAL)
            if self.message_model is MessageModel.CLUSTERING:
                await self._lock(sorted(self.queues))

    def _start_queue(self, queue: MessageQueue) -> None:
        if self.orderly and self.message_model is MessageModel.BROADCASTING:
            self.queues[queue].locked_until = float("inf")  # nothing shared: no lock needed
        super()._start_queue(queue)


def _by_broker(queues: Sequence[MessageQueue] | set[MessageQueue]) -> dict[str, list[MessageQueue]]:
    grouped: dict[str, list[MessageQueue]] = {}
    for queue in sorted(queues):
        grouped.setdefault(queue.broker_name, []).append(queue)
    return grouped
