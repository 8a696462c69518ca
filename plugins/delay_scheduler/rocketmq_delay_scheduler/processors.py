"""RECALL_MESSAGE (cancel a timer message before it is due, RocketMQ 5.3),
GET_ALL_DELAY_OFFSET (the delay levels' progress) and GET_TIMER_CHECK_POINT (the timers'
progress), both read by slaves and admin tools."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketmq_core.errors import RequestRefused
from rocketmq_core.protocol.codes import ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.constants import TIMER_TOPIC
from rocketmq_core.protocol.headers import RecallMessageRequestHeader, RecallMessageResponseHeader
from rocketmq_core.protocol.message import encode_properties
from rocketmq_core.protocol.recall import RecallHandle
from rocketmq_core.store.api import MessageToStore

from .delivery import now_ms

if TYPE_CHECKING:
    from rocketmq_core.broker.app import Broker
    from rocketmq_core.remoting.processor import RequestContext

RECALL_TAG = "_RECALL_TAG_"


async def recall_message(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
) -> RemotingCommand:
    """Park a marker due with the message; the timer service skips the message then."""
    broker.check_ready()
    header = RecallMessageRequestHeader.from_ext_fields(request.ext_fields or {})
    if broker.topics.get(header.topic) is None:
        raise RequestRefused(
            ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{header.topic}] not exist"
        )
    handle = _checked_handle(broker, header)
    properties = {
        "TIMER_DEL_UNIQKEY": handle.msg_id,
        "UNIQ_KEY": handle.msg_id,
        "TIMER_OUT_MS": str(handle.deliver_ms),
        "REAL_TOPIC": handle.topic,
        "REAL_QID": "0",
        "TAGS": RECALL_TAG,
    }
    if header.producer_group:
        properties["PGROUP"] = header.producer_group
    marker = MessageToStore(
        TIMER_TOPIC,
        0,
        b"0",
        encode_properties(properties).encode(),
        born_timestamp=now_ms(),
        tags_code=handle.deliver_ms,
    )
    result = await broker.put(marker)
    if not result.status.stored:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR, f"recall failed, the store refused it: {result.status.name}"
        )
    service = broker.services.get("timer_wheel")
    if service is not None:
        service.wake()
    fields = RecallMessageResponseHeader(msg_id=handle.msg_id).to_ext_fields()
    return request.response(ext_fields=fields)


def _checked_handle(broker: Broker, header: RecallMessageRequestHeader) -> RecallHandle:
    try:
        handle = RecallHandle.decode(header.recall_handle)
    except ValueError as exc:
        raise RequestRefused(ResponseCode.ILLEGAL_OPERATION, str(exc)) from None
    if handle.topic != header.topic:
        raise RequestRefused(
            ResponseCode.ILLEGAL_OPERATION,
            f"recall failed, topic not match: the handle is for topic {handle.topic}",
        )
    if handle.broker_name != broker.config.broker_name:
        raise RequestRefused(
            ResponseCode.ILLEGAL_OPERATION,
            f"recall failed, the handle is for broker {handle.broker_name},"
            f" not {broker.config.broker_name}",
        )
    now = now_ms()
    if handle.deliver_ms <= now:
        raise RequestRefused(
            ResponseCode.ILLEGAL_OPERATION,
            "recall failed, timestamp invalid: the message is due already (delivered)",
        )
    if handle.deliver_ms - now > broker.config.timer_max_delay_sec * 1000:
        raise RequestRefused(
            ResponseCode.ILLEGAL_OPERATION,
            "recall failed, timestamp invalid: beyond the max delay (timerMaxDelaySec)",
        )
    return handle


def get_all_delay_offset(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
) -> RemotingCommand:
    service = broker.services.get("delay_levels")
    if service is None:
        raise RequestRefused(ResponseCode.SYSTEM_ERROR, "the delay level service is not running")
    return request.response(body=service.table.encode())


def get_timer_check_point(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
) -> RemotingCommand:
    service = broker.services.get("timer_wheel")
    if service is None:
        raise RequestRefused(ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
    return request.response(body=service.checkpoint.encode())
