"""Producer: send, send with callback, oneway, batches, orderly sends.

async with Producer("PG-orders", namesrv_addr="127.0.0.1:9876") as producer:
    result = await producer.send(Message("Orders", b"hello", tags="new"))
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from inspect import isawaitable
from typing import Any

import anyio

from ..errors import RemotingError, ResponseError, RocketMQError
from ..protocol.bodies import TopicRouteData
from ..protocol.codes import LanguageCode, RequestCode, ResponseCode
from ..protocol.command import RemotingCommand
from ..protocol.compression import CompressionType, compress
from ..protocol.constants import (
    DEFAULT_TOPIC,
    NAME_PATTERN,
    RETRY_GROUP_TOPIC_PREFIX,
    TOPIC_MAX_LENGTH,
    Perm,
)
from ..protocol.headers import (
    SEND_V2_NAMES,
    CheckTransactionStateRequestHeader,
    RecallMessageRequestHeader,
    RecallMessageResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from ..protocol.heartbeat import MessageQueue
from ..protocol.ids import UniqueIdGenerator
from ..protocol.message import BATCH_RECORD_OVERHEAD, BatchItem, encode_batch, encode_properties
from ..protocol.recall import RecallHandle
from .config import ClientConfig, group_problem
from .fault import LatencyFaultTolerance
from .instance import ClientInstance
from .lifetime import PartsLifetime
from .message import MAX_RECONSUME_TIMES, RECONSUME_TIME, Message, SendResult, SendStatus
from .selectors import QueueSelector

log = logging.getLogger("rocketmq.client.producer")

# Java's DefaultMQProducer retries a send on these answers (another broker may take it)
RETRY_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)
_STORE_NOT_OK: dict[int, SendStatus] = {
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
_SEND_ACCEPT = (ResponseCode.SUCCESS, *_STORE_NOT_OK)
_ANSWER_NAMES = tuple(
    SendMessageResponseHeader.wire_name(attribute)
    for attribute in ("msg_id", "queue_id", "queue_offset", "transaction_id", "recall_handle")
)
_INT32, _INT64 = range(-(1 << 31), 1 << 31), range(-(1 << 63), 1 << 63)


def _send_answer(fields: dict[str, str]) -> tuple[str, int, int, str | None, str | None]:
    """What a SendResult takes from a send's answer: msgId, queueId, queueOffset,
    transactionId, recallHandle. Read straight from extFields, a quarter of what decoding
    the whole header costs a send; anything unusual is decoded by the header's codec,
    which says what is wrong."""
    msg_id, queue_id, queue_offset, transaction_id, recall_handle = _ANSWER_NAMES
    try:
        read = (fields[msg_id], int(fields[queue_id]), int(fields[queue_offset]))
    except (KeyError, ValueError, TypeError):
        read = None
    if read is None or read[1] not in _INT32 or read[2] not in _INT64:
        header = SendMessageResponseHeader.from_ext_fields(fields)
        read = (header.msg_id, header.queue_id, header.queue_offset)
    return *read, fields.get(transaction_id), fields.get(recall_handle)


def _send_result(
    response: RemotingCommand,
    queue: MessageQueue,
    request: RemotingCommand,
    unique_ids: list[str],
) -> Any:
    """The SendResult of a send's answer (a list of them for a batch)."""
    msg_id, queue_id, queue_offset, transaction_id, recall_handle = _send_answer(
        response.ext_fields
    )
    status = _STORE_NOT_OK.get(response.code, SendStatus.SEND_OK)
    # frozen: one queue serves every result of a batch (and usually the one asked)
    answered = (
        queue
        if queue_id == queue.queue_id
        else MessageQueue(queue.topic, queue.broker_name, queue_id)
    )
    if request.code == RequestCode.SEND_BATCH_MESSAGE:
        offset_ids = msg_id.split(",")
        return [
            SendResult(
                status,
                unique_id,
                offset_ids[i] if i < len(offset_ids) else offset_ids[0],
                answered,
                queue_offset + i,
                transaction_id,
            )
            for i, unique_id in enumerate(unique_ids)
        ]
    return SendResult(
        status=status,
        msg_id=unique_ids[0],
        offset_msg_id=msg_id,
        queue=answered,
        queue_offset=queue_offset,
        transaction_id=transaction_id,
        recall_handle=recall_handle,
    )


_QUEUE_ID = SEND_V2_NAMES["queue_id"]
_SYS_FLAG = SEND_V2_NAMES["sys_flag"]
_BORN_TIMESTAMP = SEND_V2_NAMES["born_timestamp"]
_PROPERTIES = SEND_V2_NAMES["properties"]
_BROKER_NAME = SEND_V2_NAMES["broker_name"]
# a retry's properties that Java's producer copies to the send header, for the broker
_RETRY_COUNT_FIELDS = (
    (RECONSUME_TIME, SEND_V2_NAMES["reconsume_times"]),
    (MAX_RECONSUME_TIMES, SEND_V2_NAMES["max_reconsume_times"]),
)

SendCallback = Callable[[SendResult | None, Exception | None], Awaitable[None] | None]


class MQClientError(RocketMQError):
    """A send (or another client call) that cannot be made as asked; says why."""


@dataclass(frozen=True)
class PublishInfo:
    """The writable queues of a topic, in the order sends rotate over them."""

    queues: tuple[MessageQueue, ...]
    via_default_topic: bool = False  # the topic is unknown: sends ask the broker to create it

    @classmethod
    def of(
        cls, topic: str, route: TopicRouteData, *, queue_limit: int | None = None
    ) -> PublishInfo:
        if route.order_topic_conf:
            queues = []
            for entry in route.order_topic_conf.split(";"):
                broker_name, _, queue_count = entry.partition(":")
                queues += [
                    MessageQueue(topic, broker_name, i) for i in range(int(queue_count or 0))
                ]
            return cls(tuple(queues))
        masters = {b.broker_name for b in route.broker_datas if b.master_addr}
        queues = []
        for data in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if not data.perm & Perm.WRITE or data.broker_name not in masters:
                continue
            count = data.write_queue_nums
            if queue_limit is not None:
                count = min(queue_limit, data.read_queue_nums)
            queues += [MessageQueue(topic, data.broker_name, i) for i in range(count)]
        return cls(tuple(queues), via_default_topic=queue_limit is not None)


def check_topic(topic: str) -> None:
    if not topic or not NAME_PATTERN.match(topic):
        raise MQClientError(
            f"topic {topic!r} is not valid: use letters, digits, '%', '|', '_' and '-'"
        )
    if len(topic) > TOPIC_MAX_LENGTH:
        raise MQClientError(f"topic {topic[:20]!r}... is longer than {TOPIC_MAX_LENGTH} characters")
    if topic == DEFAULT_TOPIC:
        raise MQClientError(f"{DEFAULT_TOPIC} is the auto-create template; send to a real topic")


class Producer(PartsLifetime):
    """An async context manager sending messages of one producer group."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | Sequence[str] = "",
        *,
        config: ClientConfig | None = None,
        instance: ClientInstance | None = None,
        send_timeout: float = 3.0,
        retry_times: int = 2,
        compress_over: int = 4096,
        compression: CompressionType = CompressionType.ZLIB,
        compress_level: int = 5,
        max_message_size: int = 4 * 1024 * 1024,
        default_topic_queue_nums: int = 4,
        latency_fault_tolerance: bool = True,
    ) -> None:
        problem = group_problem(group, "producer")
        if problem:
            raise MQClientError(problem)
        self.group = group
        self.config = config or ClientConfig(namesrv_addr=namesrv_addr)
        self.instance = instance or ClientInstance(self.config)
        self.send_timeout = send_timeout
        self.retry_times = retry_times
        self.compress_over = compress_over
        self.compression = compression
        self.compress_level = compress_level
        self.max_message_size = max_message_size
        self.default_topic_queue_nums = default_topic_queue_nums
        self.faults = LatencyFaultTolerance() if latency_fault_tolerance else None
        self._publish: dict[str, PublishInfo] = {}
        self._checked_topics: set[str] = set()  # names check_topic passed: not checked again
        self._header_templates: dict[tuple[str, int, str, int, bool], dict[str, str]] = {}
        self._rotation = itertools.count()
        self._ids: UniqueIdGenerator | None = None
        self._started = False

    async def _start(self, lifetime: AsyncExitStack) -> None:
        await lifetime.enter_async_context(self.instance)
        ip = self.instance.config.client_ip
        try:
            packed_ip = bytes(int(part) for part in ip.split("."))
        except ValueError:
            packed_ip = bytes(4)  # an IPv6 host: ids stay unique through pid and salt
        self._ids = UniqueIdGenerator(packed_ip if len(packed_ip) == 4 else bytes(4))
        self.instance.producers[self.group] = self
        lifetime.push_async_callback(self._leave_group)
        lifetime.callback(self.instance.on_route_changed(self._route_changed))
        self._started = True
        lifetime.callback(self._stop_sending)
        await self._start_more(lifetime)

    async def _start_more(self, lifetime: AsyncExitStack) -> None:
        """Subclasses: start-up past the producer's own, undone too if it fails."""

    def _stop_sending(self) -> None:
        self._started = False

    async def _leave_group(self) -> None:
        self.instance.producers.pop(self.group, None)
        with anyio.CancelScope(shield=True), anyio.move_on_after(3):
            await self.instance.unregister(producer_group=self.group)

    def check_transaction(
        self, broker_address: str, header: CheckTransactionStateRequestHeader, message: Any
    ) -> None:
        """CHECK_TRANSACTION_STATE for this group: only a TransactionProducer can answer
        (the broker asks a transaction's group the next producer at its next check)."""
        log.warning(
            "broker %s asked producer group %r about transaction %s, but this producer"
            " sends no transactions; use a TransactionProducer with a checker",
            broker_address,
            self.group,
            header.transaction_id,
        )

    # --- routes ----------------------------------------------------------------------

    def _route_changed(self, topic: str, route: TopicRouteData) -> None:
        if topic in self._publish:
            self._publish[topic] = PublishInfo.of(topic, route)

    async def publish_info(self, topic: str) -> PublishInfo:
        info = self._publish.get(topic)
        if info is not None and info.queues:
            return info
        try:
            route = await self.instance.topic_route(topic, refresh=info is not None)
            info = PublishInfo.of(topic, route)
        except ResponseError as exc:
            if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
            # unknown topic: send through the brokers that serve the auto-create template;
            # the topic stays watched, so its own route replaces this once it exists
            try:
                template = await self.instance.topic_route(DEFAULT_TOPIC)
            except ResponseError:
                self.instance.forget_topic(topic)
                raise MQClientError(
                    f"topic {topic!r} does not exist and no broker auto-creates topics"
                    " (autoCreateTopicEnable=false): create it first"
                ) from exc
            self.instance.forget_topic(DEFAULT_TOPIC)
            info = PublishInfo.of(topic, template, queue_limit=self.default_topic_queue_nums)
        if not info.queues:
            raise MQClientError(f"topic {topic!r} has no writable queue on a broker master")
        self._publish[topic] = info
        return info

    def _pick_queue(self, info: PublishInfo, last_broker: str | None) -> MessageQueue:
        queues = info.queues
        start = next(self._rotation)
        now = time.monotonic()
        if last_broker is None and (self.faults is None or not self.faults.keeps_any_away(now)):
            return queues[start % len(queues)]  # the usual send: the next queue in turn
        for step in range(len(queues)):
            queue = queues[(start + step) % len(queues)]
            if queue.broker_name == last_broker and len(queues) > 1:
                continue
            if self.faults is None or self.faults.available(queue.broker_name, now):
                return queue
        if self.faults is not None and last_broker is not None:
            others = [q for q in queues if q.broker_name != last_broker]
            if others:
                return others[start % len(others)]
        return queues[start % len(queues)]

    # --- sending ---------------------------------------------------------------------

    async def send(
        self,
        message: Message,
        *,
        queue: MessageQueue | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> SendResult:
        """Send and wait for the broker's answer. Retries on another broker unless a
        queue or selector fixes the queue (orderly sends must not move)."""
        result: SendResult = await self._send(  # one message: one result
            message,
            *self._encode_one(message),
            queue=queue,
            selector=selector,
            arg=arg,
            timeout=timeout,
        )
        return result

    async def resend(self, message: Message, kept: dict[str, str]) -> SendResult:
        """Send ``message`` carrying ``kept``, properties of a message received earlier,
        reserved ones included (its UNIQ_KEY: the message id stays): how a consumer hands
        a message to its retry topic when the broker's send-back failed."""
        request, unique_ids = self._encode_one(message, extra_properties=kept)
        result: SendResult = await self._send(message, request, unique_ids)
        return result

    async def send_batch(
        self, messages: Sequence[Message], *, queue: MessageQueue | None = None
    ) -> list[SendResult]:
        """Send messages of one topic as batches no larger than ``max_message_size``;
        each batch is stored atomically, in order, in one queue."""
        if not messages:
            return []
        topics = {message.topic for message in messages}
        if len(topics) > 1:
            raise MQClientError(f"a batch goes to one topic, not {sorted(topics)}")
        for message in messages:
            if message.delay_level or message.deliver_time_ms is not None:
                raise MQClientError("a batch cannot carry delayed messages; send them one by one")
        check_topic(messages[0].topic)
        results: list[SendResult] = []
        for items, unique_ids in self._split(messages):
            request = self._batch_request(messages[0], items)
            results += await self._send(messages[0], request, unique_ids, queue=queue)
        return results

    def send_with_callback(
        self, message: Message, callback: SendCallback, *, timeout: float | None = None
    ) -> None:
        """Send in the background; ``callback(result, error)`` (sync or async) gets the
        outcome, exactly one of the two set."""
        self.instance.task_group.start_soon(self._send_then_call, message, callback, timeout)

    async def _send_then_call(
        self, message: Message, callback: SendCallback, timeout: float | None
    ) -> None:
        try:
            result, error = await self.send(message, timeout=timeout), None
        except Exception as exc:
            result, error = None, exc
        try:
            outcome = callback(result, error)
            if isawaitable(outcome):
                await outcome
        except Exception:
            log.exception("send callback %r failed", callback)

    async def send_oneway(
        self,
        message: Message,
        *,
        queue: MessageQueue | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        """Send without waiting for an answer (no result, no retry)."""
        await self._send(
            message,
            *self._encode_one(message),
            queue=queue,
            selector=selector,
            arg=arg,
            oneway=True,
        )

    async def recall(self, topic: str, recall_handle: str) -> str:
        """Cancel a timer message before it is due, by the ``recall_handle`` of its send
        result (RocketMQ 5.3's RECALL_MESSAGE); returns its message id. ResponseError
        ILLEGAL_OPERATION when it is due already or the handle is not one."""
        try:
            handle = RecallHandle.decode(recall_handle)
        except ValueError as exc:
            raise MQClientError(str(exc)) from None
        await self.instance.topic_route(topic)
        address = self.instance.master_address(handle.broker_name)
        if address is None:
            raise MQClientError(
                f"broker {handle.broker_name!r} of the recall handle has no master in the"
                f" route of {topic!r}"
            )
        header = RecallMessageRequestHeader(
            topic=topic,
            recall_handle=recall_handle,
            producer_group=self.group,
            broker_name=handle.broker_name,
        )
        response = await self.instance.invoke(address, RequestCode.RECALL_MESSAGE, header)
        return RecallMessageResponseHeader.from_ext_fields(response.ext_fields).msg_id

    async def _send(
        self,
        first: Message,
        request: RemotingCommand,
        unique_ids: list[str],
        *,
        queue: MessageQueue | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
        timeout: float | None = None,
        oneway: bool = False,
    ) -> Any:
        """Send an encoded request (``first`` is its first message) with retries."""
        topic = first.topic
        deadline = time.monotonic() + (timeout or self.send_timeout)
        fixed = queue is not None or selector is not None
        attempts = 1 if fixed or oneway else 1 + self.retry_times
        last_broker: str | None = None
        errors: list[str] = []
        for _ in range(attempts):
            # a known topic's queues without a coroutine: most sends find them
            info = self._publish.get(topic)
            if info is None or not info.queues:
                info = await self.publish_info(topic)
            if queue is not None:
                target = queue
            elif selector is not None:
                target = selector(info.queues, first, arg)
            else:
                target = self._pick_queue(info, last_broker)
            started = time.monotonic()
            remaining = deadline - started
            if remaining <= 0:
                break
            try:
                if oneway:
                    await self._send_oneway_to(target, request)
                    result = None
                else:
                    response = await self._send_to(target, request, remaining)
                    if response.code not in _SEND_ACCEPT:
                        raise ResponseError(response.code, response.remark)
                    result = _send_result(response, target, request, unique_ids)
            except (RemotingError, ResponseError) as exc:
                self._record(target.broker_name, started, failed=True)
                errors.append(f"{target.broker_name}: {exc}")
                last_broker = target.broker_name
                if isinstance(exc, ResponseError) and exc.code not in RETRY_CODES:
                    raise
                if isinstance(exc, ResponseError) and exc.code == ResponseCode.TOPIC_NOT_EXIST:
                    self._publish.pop(topic, None)
                continue
            self._record(target.broker_name, started)
            return result
        if not errors:
            raise MQClientError(f"send to {topic!r} timed out before a broker answered")
        # the same refusal from each attempt (an ACL remark, say) is said once, counted
        reasons = Counter(errors)
        said = [error if n == 1 else f"{error} (x{n})" for error, n in reasons.items()]
        raise MQClientError(
            f"send to {topic!r} failed after {len(errors)} attempt(s): " + "; ".join(said)
        )

    def _record(self, broker_name: str, started: float, *, failed: bool = False) -> None:
        if self.faults is not None:
            now = time.monotonic()
            self.faults.record(broker_name, now - started, now, failed=failed)

    def _now_and_ids(self) -> tuple[int, UniqueIdGenerator]:
        if not self._started or self._ids is None:
            raise MQClientError("the producer is not started: use it in 'async with'")
        return time.time_ns() // 1_000_000, self._ids

    def _encode_one(
        self,
        message: Message,
        *,
        sys_flag: int = 0,
        extra_properties: dict[str, str] | None = None,
    ) -> tuple[RemotingCommand, list[str]]:
        """SEND_MESSAGE_V2 for one message, without queue and broker (set per attempt);
        ``sys_flag`` and ``extra_properties`` mark a transaction's half message."""
        if message.topic not in self._checked_topics:
            check_topic(message.topic)
            if len(self._checked_topics) >= 1024:
                self._checked_topics.clear()
            self._checked_topics.add(message.topic)
        now_ms, ids = self._now_and_ids()
        unique_id = ids.next(now_ms)
        body = message.body
        # the limit is on the body as given, as Java's and the C++ client check it
        if len(body) > self.max_message_size:
            raise MQClientError(
                f"the message body is {len(body)} bytes; the limit is {self.max_message_size}"
                " (maxMessageSize): split it or raise the limit on producer and broker"
            )
        if len(body) >= self.compress_over:
            compressed = compress(body, self.compression, self.compress_level)
            if len(compressed) < len(body):  # incompressible bodies go as they are
                body = compressed
                sys_flag |= self.compression.sys_flag
        wire_properties = message.wire_properties(unique_id)
        if extra_properties:
            wire_properties.update(extra_properties)
        properties = encode_properties(wire_properties)
        request = self._request(
            RequestCode.SEND_MESSAGE_V2, message, False, sys_flag, now_ms, properties, body
        )
        if message.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            # the broker counts a retry's deliveries from the header (its DLQ check)
            for name, field in _RETRY_COUNT_FIELDS:
                if name in wire_properties:
                    request.ext_fields[field] = wire_properties[name]
        return request, [unique_id]

    def _batch_request(self, first: Message, items: list[BatchItem]) -> RemotingCommand:
        """SEND_BATCH_MESSAGE for records encoded (and sized) by ``_split``."""
        now_ms, _ = self._now_and_ids()
        properties = encode_properties({"WAIT": "true" if first.wait_store_ok else "false"})
        return self._request(
            RequestCode.SEND_BATCH_MESSAGE, first, True, 0, now_ms, properties, encode_batch(items)
        )

    def _request(
        self,
        code: int,
        first: Message,
        batch: bool,
        sys_flag: int,
        now_ms: int,
        properties: str,
        body: bytes,
    ) -> RemotingCommand:
        fields = self._header_fields(first.topic, first.flag, batch)
        fields[_SYS_FLAG] = str(sys_flag)
        fields[_BORN_TIMESTAMP] = str(now_ms)
        fields[_PROPERTIES] = properties
        # the fields are this request's own copy already: no second one
        return RemotingCommand(code, ext_fields=fields, body=body, language=LanguageCode.PYTHON)

    def _header_fields(self, topic: str, flag: int, batch: bool) -> dict[str, str]:
        """A fresh copy of the request header's fields for sends to ``topic``: the
        fields that never change between sends encoded once, not on every send."""
        key = (self.group, self.default_topic_queue_nums, topic, flag, batch)
        template = self._header_templates.get(key)
        if template is None:
            if len(self._header_templates) >= 1024:
                self._header_templates.clear()
            template = SendMessageRequestHeader(
                producer_group=self.group,
                topic=topic,
                default_topic=DEFAULT_TOPIC,
                default_topic_queue_nums=self.default_topic_queue_nums,
                queue_id=0,
                sys_flag=0,
                born_timestamp=0,
                flag=flag,
                properties="",
                reconsume_times=0,
                unit_mode=False,
                batch=True if batch else None,
            ).to_ext_fields(SEND_V2_NAMES)
            self._header_templates[key] = template
        return template.copy()

    def _aim(self, queue: MessageQueue, request: RemotingCommand) -> str | None:
        """Aim ``request`` at ``queue``: the address of its broker's master, None while
        the route names none. Each attempt re-aims the request itself: an earlier
        attempt's frame is encoded already, and its late answer, if any, is dropped by
        its opaque."""
        address = self.instance.master_address(queue.broker_name)
        if address is not None:
            fields = request.ext_fields
            fields[_QUEUE_ID] = str(queue.queue_id)
            fields[_BROKER_NAME] = queue.broker_name
        return address

    async def _aim_after_refresh(self, queue: MessageQueue, request: RemotingCommand) -> str:
        await self.instance.topic_route(queue.topic, refresh=True)
        address = self._aim(queue, request)
        if address is None:
            raise MQClientError(f"broker {queue.broker_name!r} has no master to send to")
        return address

    def _send_to(
        self, queue: MessageQueue, request: RemotingCommand, timeout: float
    ) -> Awaitable[RemotingCommand]:
        """The answer to ``request`` sent to ``queue``'s broker: the connection's own
        coroutine when the master is known (no coroutine of ours per send)."""
        address = self._aim(queue, request)
        if address is None:
            return self._send_after_refresh(queue, request, timeout)
        return self.instance.invoke_unchecked(address, request, timeout)

    async def _send_after_refresh(
        self, queue: MessageQueue, request: RemotingCommand, timeout: float
    ) -> RemotingCommand:
        address = await self._aim_after_refresh(queue, request)
        return await self.instance.invoke_unchecked(address, request, timeout)

    async def _send_oneway_to(self, queue: MessageQueue, request: RemotingCommand) -> None:
        address = self._aim(queue, request) or await self._aim_after_refresh(queue, request)
        await self.instance.invoke_command_oneway(address, request)

    def _split(self, messages: Sequence[Message]) -> list[tuple[list[BatchItem], list[str]]]:
        """Each message encoded once, with its unique id, into consecutive runs whose
        batch body fits ``max_message_size``."""
        now_ms, ids = self._now_and_ids()
        batches: list[tuple[list[BatchItem], list[str]]] = []
        items: list[BatchItem] = []
        unique_ids: list[str] = []
        size = 0
        for index, message in enumerate(messages):
            unique_id = ids.next(now_ms)
            properties = encode_properties(message.wire_properties(unique_id)).encode()
            if len(message.body) > self.max_message_size:
                raise MQClientError(
                    f"message {index} of the batch has a body of {len(message.body)} bytes;"
                    f" the limit is {self.max_message_size} (maxMessageSize): split it or"
                    " raise the limit on producer and broker"
                )
            item = BatchItem(message.flag, message.body, properties)
            item_size = BATCH_RECORD_OVERHEAD + len(message.body) + len(properties)
            if item_size > self.max_message_size:  # the broker checks the whole batch body
                raise MQClientError(
                    f"message {index} of the batch is {item_size} bytes as a batch record"
                    f" (body, properties, header); a batch body may be {self.max_message_size}"
                    " at most: send it on its own"
                )
            if items and size + item_size > self.max_message_size:
                batches.append((items, unique_ids))
                items, unique_ids, size = [], [], 0
            items.append(item)
            unique_ids.append(unique_id)
            size += item_size
        if items:
            batches.append((items, unique_ids))
        return batches
