"""POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME,
PEEK_MESSAGE, NOTIFICATION and POLLING_INFO (docs/spec/POP.md §1): Java's headers in,
the broker's PopService called, Java's response headers out."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeAlias

from ...errors import RequestRefused
from ...protocol.codes import ResponseCode
from ...protocol.command import RemotingCommand
from ..pop import pop_service
from ..pop.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    NotificationRequestHeader,
    NotificationResponseHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from ..pop.records import RecordFormatError, decode_batch_ack

if TYPE_CHECKING:
    from ...remoting.processor import RequestContext
    from ...store.api import PutResult
    from ..app import Broker
    from ..pop.service import PopService, RecordPut

AckAnswer: TypeAlias = "RemotingCommand | Awaitable[RemotingCommand]"


async def pop_message(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    broker.check_ready()
    header = PopMessageRequestHeader.from_ext_fields(request.ext_fields or {})
    service = pop_service(broker)
    result = await service.pop(
        header.consumer_group,
        header.topic,
        header.queue_id,
        max_nums=header.max_msg_nums,
        invisible_time=header.invisible_time,
        poll_time=header.poll_time,
        born_time=header.born_time,
        init_mode=header.init_mode,
        exp_type=header.exp_type,
        exp=header.exp,
        order=bool(header.order),
        attempt_id=header.attempt_id,
    )
    reply = PopMessageResponseHeader(
        pop_time=result.pop_time,
        invisible_time=result.invisible_time,
        revive_qid=result.revive_qid,
        rest_num=result.rest_num,
        start_offset_info=";".join(result.start_offset_info),
        msg_offset_info=";".join(result.msg_offset_info),
        order_count_info=";".join(result.order_count_info) if header.order else None,
    )
    found = result.code == ResponseCode.SUCCESS
    return request.response(
        result.code,
        _pop_remark(result.code, header.topic, service.holds.limit),
        reply.to_ext_fields(),
        result.body if found else b"",
    )


def _pop_remark(code: int, topic: str, held_limit: int) -> str:
    if code == ResponseCode.SUCCESS:
        return "FOUND"
    if code == ResponseCode.POLLING_FULL:  # Java says NO_MESSAGE_IN_QUEUE here too: too vague
        return (
            f"POLLING_FULL: {held_limit} POP requests already wait on topic {topic};"
            " retry in a moment"
        )
    return "NO_MESSAGE_IN_QUEUE"  # POLLING_TIMEOUT, as Java's broker says


def ack_message(broker: Broker, ctx: RequestContext, request: RemotingCommand) -> AckAnswer:
    """Answered in the call: an ack record, as Java's, is stored without waiting for a
    flush or a slave (WAIT=false). A busy store's retry, or a record that did ask for a
    flush or a slave, is waited for by a coroutine (PopService.settle)."""
    broker.check_ready()
    header = AckMessageRequestHeader.from_ext_fields(request.ext_fields or {})
    service = pop_service(broker)
    put = service.ack(
        header.consumer_group, header.topic, header.queue_id, header.extra_info, header.offset
    )
    if put is None:  # a FIFO message's ack: nothing to store
        return request.response()
    if not put.settled:
        return _ack_settled(service, put, request)
    return _ack_answer(put, request, put.result)


def _ack_answer(put: RecordPut, request: RemotingCommand, result: PutResult) -> RemotingCommand:
    if not put.stored(result):
        raise RequestRefused(ResponseCode.SYSTEM_ERROR, "the ack could not be stored; retry")
    return request.response()


async def _ack_settled(
    service: PopService, put: RecordPut, request: RemotingCommand
) -> RemotingCommand:
    return _ack_answer(put, request, await service.settle(put))


async def batch_ack_message(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    broker.check_ready()
    try:
        broker_name, entries = decode_batch_ack(request.body or b"")
    except RecordFormatError as exc:
        raise RequestRefused(
            ResponseCode.INVALID_PARAMETER,
            f"the BATCH_ACK_MESSAGE body is not {{brokerName, acks: [...]}}: {exc}",
        ) from None
    await pop_service(broker).batch_ack(broker_name, entries)
    return request.response()


async def change_message_invisible_time(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
):
    broker.check_ready()
    header = ChangeInvisibleTimeRequestHeader.from_ext_fields(request.ext_fields or {})
    changed = await pop_service(broker).change_invisible(
        header.consumer_group,
        header.topic,
        header.queue_id,
        header.extra_info,
        header.offset,
        header.invisible_time,
    )
    reply = ChangeInvisibleTimeResponseHeader(
        pop_time=changed.pop_time,
        invisible_time=changed.invisible_time,
        revive_qid=changed.revive_qid,
    )
    return request.response(ResponseCode.SUCCESS, None, reply.to_ext_fields())


async def peek_message(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    broker.check_ready()
    header = PeekMessageRequestHeader.from_ext_fields(request.ext_fields or {})
    records = await pop_service(broker).peek(
        header.consumer_group, header.topic, header.queue_id, header.max_msg_nums
    )
    if not records:
        return request.response(ResponseCode.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE")
    return request.response(ResponseCode.SUCCESS, "FOUND", None, b"".join(records))


async def notification(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    broker.check_ready()
    header = NotificationRequestHeader.from_ext_fields(request.ext_fields or {})
    has_msg, polling_full = await pop_service(broker).notification(
        header.consumer_group,
        header.topic,
        header.queue_id,
        poll_time=header.poll_time,
        order=bool(header.order),
        attempt_id=header.attempt_id,
    )
    reply = NotificationResponseHeader(has_msg=has_msg, polling_full=polling_full)
    return request.response(ResponseCode.SUCCESS, None, reply.to_ext_fields())


async def polling_info(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    broker.check_ready()
    header = PollingInfoRequestHeader.from_ext_fields(request.ext_fields or {})
    count = pop_service(broker).polling_info(header.consumer_group, header.topic, header.queue_id)
    reply = PollingInfoResponseHeader(polling_num=count)
    return request.response(ResponseCode.SUCCESS, None, reply.to_ext_fields())
