"""ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue
on top of the brokers' POP requests (GRPC.md §6; POP.md).

The receipt handle a client gets is the broker's POP_CK with the message's commitLog
offset appended, so ack and change-invisible need no state in the proxy."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from google.protobuf.timestamp_pb2 import Timestamp

from rocketmq_core.errors import RequestRefused
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.headers import ConsumerSendMsgBackRequestHeader
from rocketmq_core.protocol.message import iter_records

from .acl import consume
from .convert import POP_CK, incoming
from .renewals import Renewals
from .status import OK, Code, ProxyError, status, status_of
from .v2 import definition_pb2 as pb
from .v2 import service_pb2 as spb

if TYPE_CHECKING:
    from .service import MessagingService

MIN_INVISIBLE_MS = 10_000
MAX_INVISIBLE_MS = 12 * 3600 * 1000
AUTO_RENEW_INVISIBLE_MS = 60_000
MIN_POLLING_MS = 5_000
MAX_POLLING_MS = 20_000
MAX_BATCH = 32
BROKER_ANSWER_MARGIN_S = 3.0  # what a broker's answer may take beyond its long poll
DEADLINE_RESERVE_S = 0.2  # kept from the caller's deadline to send the answer back
_NOTHING = (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND, ResponseCode.NO_MESSAGE)


def _ms(duration: Any) -> int:
    return duration.seconds * 1000 + duration.nanos // 1_000_000


def _pop_headers() -> Any:
    """The broker's POP request headers; NOT_IMPLEMENTED where this core has no POP."""
    try:
        from rocketmq_core.broker.pop import handles, headers
    except ImportError:  # a rocketmq-core older than POP
        raise ProxyError(
            Code.NOT_IMPLEMENTED, "the installed rocketmq-core has no POP consumption"
        ) from None
    return headers, handles


def parse_handle(text: str) -> Any:
    _, handles = _pop_headers()
    try:
        handle = handles.PopHandle.parse(text)
    except RequestRefused as exc:
        raise ProxyError(Code.INVALID_RECEIPT_HANDLE, exc.remark) from None
    if handle.queue_offset < 0:
        raise ProxyError(Code.INVALID_RECEIPT_HANDLE, f"receipt handle {text!r} has no offset")
    return handle


class Consuming:
    def __init__(self, service: MessagingService) -> None:
        self.service = service
        self.auto_renew_invisible_ms = AUTO_RENEW_INVISIBLE_MS
        self.renewals = Renewals(self)

    async def receive(self, request: spb.ReceiveMessageRequest, context: Any) -> AsyncIterator[Any]:
        try:
            messages = await self._pop(request, context)
        except Exception as exc:
            yield spb.ReceiveMessageResponse(status=status_of(exc))
            return
        if not messages:
            yield spb.ReceiveMessageResponse(
                status=status(Code.MESSAGE_NOT_FOUND, "no new message")
            )
            return
        yield spb.ReceiveMessageResponse(status=OK)
        for message in messages:
            yield spb.ReceiveMessageResponse(message=message)
        now = Timestamp()
        now.GetCurrentTime()
        yield spb.ReceiveMessageResponse(delivery_timestamp=now)

    async def _pop(self, request: spb.ReceiveMessageRequest, context: Any) -> list[pb.Message]:
        group = request.group.name
        topic = request.message_queue.topic.name
        meta = self.service.metadata(context, consume(topic, group))
        headers, _ = _pop_headers()
        if not group:
            raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, "the request names no consumer group")
        if request.auto_renew:
            invisible_ms = self.auto_renew_invisible_ms
        else:
            invisible_ms = _ms(request.invisible_duration)
            if not MIN_INVISIBLE_MS <= invisible_ms <= MAX_INVISIBLE_MS:
                raise ProxyError(
                    Code.ILLEGAL_INVISIBLE_TIME,
                    f"invisible duration {invisible_ms} ms is outside"
                    f" [{MIN_INVISIBLE_MS}, {MAX_INVISIBLE_MS}] ms",
                )
        polling_ms = _ms(request.long_polling_timeout) or MAX_POLLING_MS
        polling_ms = min(max(polling_ms, MIN_POLLING_MS), MAX_POLLING_MS)
        remaining = context.time_remaining()
        if remaining is not None:
            left_ms = int((remaining - DEADLINE_RESERVE_S) * 1000)
            if left_ms < polling_ms:
                if left_ms < MIN_POLLING_MS:
                    raise ProxyError(
                        Code.ILLEGAL_POLLING_TIME,
                        "the call's deadline leaves too little time to long-poll",
                    )
                polling_ms = left_ms
        expression = request.filter_expression
        exp_type = "SQL92" if expression.type == pb.SQL else "TAG"
        header = headers.PopMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=-1,
            max_msg_nums=min(max(request.batch_size, 1), MAX_BATCH),
            invisible_time=invisible_ms,
            poll_time=polling_ms,
            born_time=int(time.time() * 1000),
            init_mode=1,
            exp_type=exp_type,
            exp=expression.expression or "*",
            order=self.service.fifo(meta.client_id),
            attempt_id=request.attempt_id or None,
        )
        address = await self.service.master_address(topic, request.message_queue.broker.name)
        response = await self.service.instance.invoke(
            address,
            RequestCode.POP_MESSAGE,
            header,
            timeout=polling_ms / 1000 + BROKER_ANSWER_MARGIN_S,
            accept=(ResponseCode.SUCCESS, *_NOTHING, ResponseCode.POLLING_FULL),
        )
        if response.code == ResponseCode.POLLING_FULL:
            raise ProxyError(Code.TOO_MANY_REQUESTS, "too many receives are waiting")
        if response.code != ResponseCode.SUCCESS or not response.body:
            return []
        namespace = request.group.resource_namespace
        answer = headers.PopMessageResponseHeader.from_ext_fields(response.ext_fields)
        broker_name = request.message_queue.broker.name
        received = []
        for stored in iter_records(response.body):
            handle = stored.properties.get(POP_CK) or _handle_of(answer, stored, broker_name)
            receipt = f"{handle} {stored.commit_log_offset}"
            if request.auto_renew:
                self.renewals.track(meta.client_id, group, topic, receipt)
            received.append(incoming(stored, topic, receipt_handle=receipt, namespace=namespace))
        return received

    async def ack(self, request: spb.AckMessageRequest, context: Any) -> Any:
        try:
            self.service.metadata(context, consume(request.topic.name, request.group.name))
        except ProxyError as exc:
            return spb.AckMessageResponse(status=exc.status)
        entries = []
        for entry in request.entries:
            try:
                async with self.renewals.settled(entry.receipt_handle) as current:
                    await self._ack_one(request.group.name, request.topic.name, current)
                result = OK
            except Exception as exc:
                result = status_of(exc)
            entries.append(
                spb.AckMessageResultEntry(
                    message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=result
                )
            )
        codes = {entry.status.code for entry in entries}
        if not entries:
            top = status(Code.BAD_REQUEST, "the request acknowledges no message")
        elif len(codes) == 1:
            top = entries[0].status
        else:
            top = status(Code.MULTIPLE_RESULTS, "some acknowledgements failed")
        return spb.AckMessageResponse(status=top, entries=entries)

    async def _ack_one(self, group: str, topic: str, receipt_handle: str) -> None:
        headers, _ = _pop_headers()
        handle = parse_handle(receipt_handle)
        if handle.revive_time <= time.time() * 1000:
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "the receipt handle has expired")
        address = await self.service.master_address(topic, handle.broker_name)
        header = headers.AckMessageRequestHeader(
            consumer_group=group,
            topic=handle.real_topic(topic, group),
            queue_id=handle.queue_id,
            extra_info=_broker_part(handle).encode(),
            offset=handle.queue_offset,
            broker_name=handle.broker_name,
        )
        instance = self.service.instance
        await self.service.call_broker(address, instance.request(RequestCode.ACK_MESSAGE, header))

    async def change_invisible_duration(
        self, request: spb.ChangeInvisibleDurationRequest, context: Any
    ) -> Any:
        group, topic = request.group.name, request.topic.name
        try:
            self.service.metadata(context, consume(topic, group))
            invisible_ms = _ms(request.invisible_duration)
            if not 0 <= invisible_ms <= MAX_INVISIBLE_MS:
                raise ProxyError(
                    Code.ILLEGAL_INVISIBLE_TIME,
                    f"invisible duration {invisible_ms} ms is outside [0, {MAX_INVISIBLE_MS}] ms",
                )
            # settled: the client times it from now on
            async with self.renewals.settled(request.receipt_handle) as current:
                renewed = await self.change_invisible_time(group, topic, current, invisible_ms)
        except Exception as exc:
            # a client keeps the handle it is given, whatever the status: give back its own
            return spb.ChangeInvisibleDurationResponse(
                status=status_of(exc), receipt_handle=request.receipt_handle
            )
        return spb.ChangeInvisibleDurationResponse(status=OK, receipt_handle=renewed)

    async def change_invisible_time(
        self, group: str, topic: str, receipt_handle: str, invisible_ms: int
    ) -> str:
        """CHANGE_MESSAGE_INVISIBLETIME; the new receipt handle (its checkpoint starts at
        the message's own offset, with the broker's new times)."""
        headers, _ = _pop_headers()
        handle = parse_handle(receipt_handle)
        address = await self.service.master_address(topic, handle.broker_name)
        header = headers.ChangeInvisibleTimeRequestHeader(
            consumer_group=group,
            topic=handle.real_topic(topic, group),
            queue_id=handle.queue_id,
            extra_info=_broker_part(handle).encode(),
            offset=handle.queue_offset,
            invisible_time=invisible_ms,
            broker_name=handle.broker_name,
        )
        request = self.service.instance.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header)
        response = await self.service.call_broker(address, request)
        answer = headers.ChangeInvisibleTimeResponseHeader.from_ext_fields(response.ext_fields)
        renewed = dataclasses.replace(
            handle,
            ck_queue_offset=handle.queue_offset,
            pop_time=answer.pop_time,
            invisible_time=answer.invisible_time,
            revive_qid=answer.revive_qid,
        )
        return str(renewed.encode())

    async def forward_to_dead_letter_queue(
        self, request: spb.ForwardMessageToDeadLetterQueueRequest, context: Any
    ) -> Any:
        try:
            self.service.metadata(context, consume(request.topic.name, request.group.name))
            async with self.renewals.settled(request.receipt_handle) as current:
                await self._forward_one(request, current)
        except Exception as exc:
            return spb.ForwardMessageToDeadLetterQueueResponse(status=status_of(exc))
        return spb.ForwardMessageToDeadLetterQueueResponse(status=OK)

    async def _forward_one(
        self, request: spb.ForwardMessageToDeadLetterQueueRequest, receipt_handle: str
    ) -> None:
        """The message of ``receipt_handle`` to its dead-letter queue, then acked."""
        handle = parse_handle(receipt_handle)
        if handle.commit_log_offset < 0:
            raise ProxyError(
                Code.INVALID_RECEIPT_HANDLE, "the receipt handle has no commitLog offset"
            )
        group, topic = request.group.name, request.topic.name
        address = await self.service.master_address(topic, handle.broker_name)
        header = ConsumerSendMsgBackRequestHeader(
            offset=handle.commit_log_offset,
            group=group,
            delay_level=-1,  # straight to the dead-letter queue
            origin_msg_id=request.message_id,
            origin_topic=handle.real_topic(topic, group),
            max_reconsume_times=0,
        )
        await self.service.instance.invoke(address, RequestCode.CONSUMER_SEND_MSG_BACK, header)
        await self._ack_one(group, topic, receipt_handle)


def _handle_of(answer: Any, stored: Any, broker_name: str) -> str:
    """The POP_CK of a popped message from the response header, as RocketMQ's client
    builds it: its checkpoint starts at its queue's start offset (orderly: its own)."""
    from rocketmq_core.broker.pop import handles, keys

    flag = keys.topic_flag(stored.topic)
    starts = handles.parse_offset_info(answer.start_offset_info)
    start = int(starts.get(f"{flag}@{stored.queue_id}", stored.queue_offset))
    if answer.revive_qid == keys.ORDER_REVIVE_QUEUE:
        start = stored.queue_offset
    return handles.build_handle(
        start,
        answer.pop_time,
        answer.invisible_time,
        answer.revive_qid,
        stored.topic,
        broker_name,
        stored.queue_id,
        stored.queue_offset,
    )


def _broker_part(handle: Any) -> Any:
    """The handle as its broker wrote it (without the commitLog offset the proxy adds)."""
    return dataclasses.replace(handle, commit_log_offset=-1)
