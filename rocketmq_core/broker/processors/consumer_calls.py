"""Requests an admin sends through the broker to one consumer of a group (CODES.md §1.2):
GET_CONSUMER_RUNNING_INFO (307, ``mqadmin consumerStatus``) and CONSUME_MESSAGE_DIRECTLY
(309, ``mqadmin queryMsgById -g -d``, the dashboard's resend of a dead-lettered message).

The broker finds the consumer's connection by group and client id, relays the request
on it and answers with the consumer's reply unchanged; for 309 it first puts the
message itself in the body, read from its CommitLog at the offset the message id holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ...errors import RemotingError, RemotingTimeoutError, RequestRefused
from ...protocol.codes import VERSION_V3_1_8_SNAPSHOT, ResponseCode
from ...protocol.command import RemotingCommand
from ...protocol.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
)
from ...protocol.message import decode_offset_msg_id

if TYPE_CHECKING:
    from ...remoting.processor import RequestContext
    from ..app import Broker

CALL_CONSUMER_TIMEOUT = 5.0  # s a consumer has to answer a request the broker relays


@runtime_checkable
class RelayChannel(Protocol):
    """A consumer's channel the broker can relay a request on: a client's connection,
    or a local gRPC proxy's channel to a 5.x client (its Telemetry stream)."""

    @property
    def closed(self) -> bool: ...

    async def invoke(self, request: RemotingCommand, timeout: float) -> RemotingCommand: ...


async def get_consumer_running_info(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
) -> RemotingCommand:
    """The consumer's ConsumerRunningInfo, as it answers for itself."""
    header = GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields or {})
    return await call_consumer(broker, request, header.consumer_group, header.client_id)


async def consume_message_directly(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
) -> RemotingCommand:
    """Hand the message ``msgId`` names to the consumer, whose listener takes it once
    (no offset moves); the answer's body is its ConsumeMessageDirectlyResult."""
    fields = dict(request.ext_fields or {})
    header = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(fields)
    fields["brokerName"] = broker.config.broker_name  # the consumer names the queue with it
    topic = broker.topics.get(header.topic) if header.topic else None
    if topic is not None:
        fields["topicSysFlag"] = str(topic.topic_sys_flag)
    group = broker.groups.table.get(header.consumer_group)
    if group is not None:
        fields["groupSysFlag"] = str(group.group_sys_flag)
    record = await _stored_message(broker, header.msg_id or "")
    return await call_consumer(
        broker, request, header.consumer_group, header.client_id or "", fields, record
    )


async def _stored_message(broker: Broker, msg_id: str) -> bytes:
    try:
        _host, offset = decode_offset_msg_id(msg_id)
    except ValueError as exc:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR,
            f"{exc}: CONSUME_MESSAGE_DIRECTLY takes the offset message id of a message"
            " stored on this broker",
        ) from None
    record = await broker.store.message_at(offset) if offset >= 0 else None
    if record is None:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR,
            f"can not find message by the offset, {offset} (message id {msg_id})",
        )
    return record


async def call_consumer(
    broker: Broker,
    request: RemotingCommand,
    group: str,
    client_id: str,
    ext_fields: dict[str, str] | None = None,
    body: bytes | None = None,
) -> RemotingCommand:
    """Relay ``request`` (with ``ext_fields`` and ``body`` in place of its own, if given)
    to consumer ``client_id`` of ``group`` and answer with its reply; the codes and
    remarks are those of Java's AdminBrokerProcessor.callConsumer."""
    found = broker.consumers.group(group)
    members = found.channels.items() if found is not None else ()
    channel, client = next(((ch, c) for ch, c in members if c.client_id == client_id), (None, None))
    if not isinstance(channel, RelayChannel) or channel.closed or client is None:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online"
        )
    if client.version < VERSION_V3_1_8_SNAPSHOT:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR,
            f"The Consumer <{client_id}> Version <{client.version}> too low to finish,"
            " please upgrade it to V3_1_8_SNAPSHOT",
        )
    relayed = RemotingCommand.request(
        request.code,
        dict(request.ext_fields if ext_fields is None else ext_fields),
        request.body if body is None else body,
    )
    try:
        reply = await channel.invoke(relayed, CALL_CONSUMER_TIMEOUT)
    except RemotingTimeoutError as exc:
        raise RequestRefused(
            ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {exc}"
        ) from None
    except RemotingError as exc:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {exc}"
        ) from None
    return request.response(reply.code, reply.remark, body=reply.body)
