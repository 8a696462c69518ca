"""QUERY_MESSAGE (by key, through the index) and VIEW_MESSAGE_BY_ID (CODES.md §3.6)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import RequestRefused
from ...protocol.codes import ResponseCode
from ...protocol.command import RemotingCommand
from ...protocol.headers import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)

if TYPE_CHECKING:
    from ...remoting.processor import RequestContext
    from ..app import Broker

DEFAULT_QUERY_MAX_NUM = 32  # defaultQueryMaxNum: a query by UNIQ_KEY returns this many


async def query_message(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    broker.check_ready()
    header = QueryMessageRequestHeader.from_ext_fields(request.ext_fields or {})
    max_num = DEFAULT_QUERY_MAX_NUM if header.unique_key_query else header.max_num
    result = await broker.store.query_by_key(
        header.topic, header.key, max_num, header.begin_timestamp, header.end_timestamp
    )
    reply = QueryMessageResponseHeader(
        index_last_update_timestamp=result.index_last_update_timestamp,
        index_last_update_phyoffset=result.index_last_update_phy_offset,
    )
    if not result.records:
        raise RequestRefused(
            ResponseCode.QUERY_NOT_FOUND,
            "can not find message, maybe time range not correct",
        )
    return request.response(ext_fields=reply.to_ext_fields(), body=b"".join(result.records))


async def view_message_by_id(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    broker.check_ready()
    header = ViewMessageRequestHeader.from_ext_fields(request.ext_fields or {})
    record = await broker.store.message_at(header.offset)
    if record is None:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {header.offset}"
        )
    return request.response(body=record)
