"""HEART_BEAT, UNREGISTER_CLIENT and GET_CONSUMER_LIST_BY_GROUP (CODES.md §4.3, §4.9)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import RequestRefused
from ...protocol.codes import LanguageCode, ResponseCode
from ...protocol.command import RemotingCommand
from ...protocol.headers import GetConsumerListByGroupRequestHeader, UnregisterClientRequestHeader
from ...protocol.heartbeat import ConsumerIdList, HeartbeatData
from .retry import retry_topic

if TYPE_CHECKING:
    from ...remoting.processor import RequestContext
    from ..app import Broker


def heart_beat(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    broker.check_ready()
    beat = HeartbeatData.decode(request.body)
    now = broker.now()
    channel = ctx.connection
    language = _language(request.language)
    for consumer in beat.consumers:
        group = broker.groups.find(consumer.group_name)
        if group is not None:
            retry_topic(broker, group)
        changed = broker.consumers.register(
            consumer, channel, beat.client_id, now, language=language, version=request.version
        )
        if changed:
            broker.notify_consumers_changed(consumer.group_name)
    for producer_group in beat.producer_groups:
        broker.producers.register(
            producer_group, channel, beat.client_id, now, language=language, version=request.version
        )
    return request.response()


def unregister_client(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    header = UnregisterClientRequestHeader.from_ext_fields(request.ext_fields or {})
    if header.producer_group:  # the C++ client sends the unused group as ""
        broker.producers.unregister(header.producer_group, ctx.connection)
    if header.consumer_group and broker.consumers.unregister(header.consumer_group, ctx.connection):
        broker.notify_consumers_changed(header.consumer_group)
    return request.response()


def get_consumer_list_by_group(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    header = GetConsumerListByGroupRequestHeader.from_ext_fields(request.ext_fields or {})
    group = broker.consumers.group(header.consumer_group)
    if group is None or not group.channels:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {header.consumer_group}"
        )
    return request.response(body=ConsumerIdList(group.client_ids()).encode())


def _language(code: int) -> str:
    """The client's language by name (JAVA, CPP, ...), as admin tools show it."""
    try:
        return LanguageCode(code).name
    except ValueError:
        return "OTHER"
