"""Offsets: QUERY/UPDATE_CONSUMER_OFFSET, GET_MAX/MIN_OFFSET, GET_EARLIEST_MSG_STORETIME,
SEARCH_OFFSET_BY_TIMESTAMP (CODES.md §3.6, §4.4-4.5)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import RequestRefused
from ...protocol.codes import ResponseCode
from ...protocol.command import RemotingCommand
from ...protocol.headers import (
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)

if TYPE_CHECKING:
    from ...remoting.processor import RequestContext
    from ..app import Broker


def _offset(request: RemotingCommand, offset: int) -> RemotingCommand:
    return request.response(ext_fields=OffsetResponseHeader(offset=offset).to_ext_fields())


def query_consumer_offset(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    header = QueryConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields or {})
    stored = broker.offsets.query(header.consumer_group, header.topic, header.queue_id)
    if stored >= 0:
        return _offset(request, stored)
    # a group's first start on a queue that still begins at 0: consume from the start,
    # as RocketMQ does for young topics (unless asked not to)
    if header.set_zero_if_not_found is not False and (
        broker.store.min_offset(header.topic, header.queue_id) <= 0
    ):
        return _offset(request, 0)
    raise RequestRefused(
        ResponseCode.QUERY_NOT_FOUND,
        "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
    )


def update_consumer_offset(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    header = UpdateConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields or {})
    broker.offsets.commit(
        header.consumer_group, header.topic, header.queue_id, header.commit_offset
    )
    return request.response()


def get_max_offset(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    header = GetMaxOffsetRequestHeader.from_ext_fields(request.ext_fields or {})
    return _offset(request, broker.store.max_offset(header.topic, header.queue_id))


def get_min_offset(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    header = GetMinOffsetRequestHeader.from_ext_fields(request.ext_fields or {})
    return _offset(request, broker.store.min_offset(header.topic, header.queue_id))


async def get_earliest_msg_storetime(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    header = GetEarliestMsgStoretimeRequestHeader.from_ext_fields(request.ext_fields or {})
    timestamp = await broker.store.earliest_store_time(header.topic, header.queue_id)
    reply = GetEarliestMsgStoretimeResponseHeader(timestamp=timestamp)
    return request.response(ext_fields=reply.to_ext_fields())


async def search_offset_by_timestamp(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    header = SearchOffsetRequestHeader.from_ext_fields(request.ext_fields or {})
    boundary = header.boundary_type or "lower"
    if boundary not in ("lower", "upper"):
        raise RequestRefused(
            ResponseCode.INVALID_PARAMETER, f"boundaryType must be lower or upper, not {boundary}"
        )
    offset = await broker.store.offset_by_time(
        header.topic, header.queue_id, header.timestamp, boundary
    )
    return _offset(request, offset)
