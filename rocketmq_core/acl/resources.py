"""Which topics and groups a request needs, and how (docs/spec/ACL.md §3).

``needed_resources(request)`` maps a request to {resource: perm}; a group is named by
its retry topic (``%RETRY%<group>``). Codes not in the table need no resource: only
the signature (and, for admin codes, the admin flag) is checked. A header or body that
cannot be read raises a RocketMQ ProtocolError; the validator turns it into a refusal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..broker.pop.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    NotificationRequestHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PopMessageRequestHeader,
)
from ..broker.pop.records import RecordFormatError, decode_batch_ack
from ..errors import BodyError
from ..protocol.codes import RequestCode, ResponseCode
from ..protocol.command import RemotingCommand
from ..protocol.headers import (
    GetConsumerListByGroupRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from ..protocol.heartbeat import HeartbeatData
from .permissions import PUB, SUB, is_group_resource, retry_topic

Needed = dict[str, int]


def _send(topic_key: str, group_key: str) -> Callable[[RemotingCommand], Needed]:
    """A send: PUB on the topic; a send to a retry topic needs SUB on the group's instead
    (nothing when the header names no group, as with the V1 header)."""

    def needed(request: RemotingCommand) -> Needed:
        fields = request.ext_fields
        topic = fields.get(topic_key)
        if topic is not None and is_group_resource(topic):
            group = fields.get(group_key)
            return {retry_topic(group): SUB} if group is not None else {}
        return {topic: PUB} if topic is not None else {}

    return needed


def _group_sub(key: str) -> Callable[[RemotingCommand], Needed]:
    def needed(request: RemotingCommand) -> Needed:
        group = request.ext_fields.get(key)
        return {retry_topic(group): SUB} if group is not None else {}

    return needed


def _pull(topic_key: str, group_key: str) -> Callable[[RemotingCommand], Needed]:
    def needed(request: RemotingCommand) -> Needed:
        fields = request.ext_fields
        resources: Needed = {}
        if (topic := fields.get(topic_key)) is not None:
            resources[topic] = SUB
        if (group := fields.get(group_key)) is not None:
            resources[retry_topic(group)] = SUB
        return resources

    return needed


def _topic_sub(key: str) -> Callable[[RemotingCommand], Needed]:
    def needed(request: RemotingCommand) -> Needed:
        topic = request.ext_fields.get(key)
        return {topic: SUB} if topic is not None else {}

    return needed


def _heartbeat(request: RemotingCommand) -> Needed:
    """Each consumer: SUB on its group and on every topic it subscribes; producers are
    not checked."""
    needed: Needed = {}
    for consumer in HeartbeatData.decode(request.body).consumers:
        needed[retry_topic(consumer.group_name)] = SUB
        for subscription in consumer.subscriptions:
            needed[subscription.topic] = SUB
    return needed


def _unregister_client(request: RemotingCommand) -> Needed:
    # a C++ producer sends consumerGroup "", so "%RETRY%" is checked against
    # defaultGroupPerm: Java does the same, and clients expect its answer
    header = UnregisterClientRequestHeader.from_ext_fields(request.ext_fields)
    if header.consumer_group is None:
        return {}
    return {retry_topic(header.consumer_group): SUB}


def _consumer_list(request: RemotingCommand) -> Needed:
    header = GetConsumerListByGroupRequestHeader.from_ext_fields(request.ext_fields)
    return {retry_topic(header.consumer_group): SUB}


def _update_offset(request: RemotingCommand) -> Needed:
    header = UpdateConsumerOffsetRequestHeader.from_ext_fields(request.ext_fields)
    return {retry_topic(header.consumer_group): SUB, header.topic: SUB}


def _consumed_topic(topic: str, group: str) -> str | None:
    """The topic a POP-family request reads, for its SUB check: a POP retry topic of the
    request's own group (``%RETRY%group_topic`` or ``%RETRY%group+topic``) stands for its
    topic; the group's own ``%RETRY%group`` needs nothing beyond the group's SUB."""
    if topic == retry_topic(group):
        return None
    for separator in ("_", "+"):
        own_prefix = retry_topic(group) + separator
        if topic.startswith(own_prefix) and len(topic) > len(own_prefix):
            return topic[len(own_prefix) :]
    return topic


def _consumption(topic: str, group: str, needed: Needed) -> None:
    """Add SUB on ``topic`` (as ``_consumed_topic`` reads it) and on ``group``."""
    if (consumed := _consumed_topic(topic, group)) is not None:
        needed[consumed] = SUB
    needed[retry_topic(group)] = SUB


PopFamilyHeader = (
    PopMessageRequestHeader
    | PeekMessageRequestHeader
    | NotificationRequestHeader
    | PollingInfoRequestHeader
    | AckMessageRequestHeader
    | ChangeInvisibleTimeRequestHeader
)


def _pop_family(header_class: type[PopFamilyHeader]) -> Callable[[RemotingCommand], Needed]:
    """A POP-family request: SUB on the header's ``topic`` and ``consumerGroup``."""

    def needed(request: RemotingCommand) -> Needed:
        header = header_class.from_ext_fields(request.ext_fields)
        resources: Needed = {}
        _consumption(header.topic, header.consumer_group, resources)
        return resources

    return needed


def _batch_ack(request: RemotingCommand) -> Needed:
    """BATCH_ACK_MESSAGE: SUB on the topic and the group of every entry of the body."""
    try:
        _, entries = decode_batch_ack(request.body)
    except RecordFormatError as exc:
        raise BodyError(
            f"the batch ack body cannot be read: {exc}",
            response_code=ResponseCode.INVALID_PARAMETER,
        ) from None
    needed: Needed = {}
    for entry in entries:
        _consumption(entry.topic, entry.group, needed)
    return needed


# The codes whose resources follow from the values of one or two extFields alone, and
# which: a verdict on such a request holds for every request with the same values (the
# validator keeps it, per accessKey, while its rules stay). They are the busy ones.
DECIDING_FIELDS: dict[int, tuple[str, ...]] = {
    RequestCode.SEND_MESSAGE: ("topic", "group"),
    RequestCode.SEND_MESSAGE_V2: ("b", "a"),
    # 4.9 left batches unchecked; 5.1+ checks them as V2 sends (their header is V2's)
    RequestCode.SEND_BATCH_MESSAGE: ("b", "a"),
    RequestCode.CONSUMER_SEND_MSG_BACK: ("group",),
    RequestCode.PULL_MESSAGE: ("topic", "consumerGroup"),
    RequestCode.QUERY_MESSAGE: ("topic",),
}
_FIELDS = DECIDING_FIELDS

RESOURCES_BY_CODE: dict[int, Callable[[RemotingCommand], Needed]] = {
    RequestCode.SEND_MESSAGE: _send(*_FIELDS[RequestCode.SEND_MESSAGE]),
    RequestCode.SEND_MESSAGE_V2: _send(*_FIELDS[RequestCode.SEND_MESSAGE_V2]),
    RequestCode.SEND_BATCH_MESSAGE: _send(*_FIELDS[RequestCode.SEND_BATCH_MESSAGE]),
    RequestCode.CONSUMER_SEND_MSG_BACK: _group_sub(*_FIELDS[RequestCode.CONSUMER_SEND_MSG_BACK]),
    RequestCode.PULL_MESSAGE: _pull(*_FIELDS[RequestCode.PULL_MESSAGE]),
    RequestCode.QUERY_MESSAGE: _topic_sub(*_FIELDS[RequestCode.QUERY_MESSAGE]),
    RequestCode.HEART_BEAT: _heartbeat,
    RequestCode.UNREGISTER_CLIENT: _unregister_client,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: _consumer_list,
    RequestCode.UPDATE_CONSUMER_OFFSET: _update_offset,
    # POP (5.x): Java checks these by the topic and consumerGroup of their headers
    RequestCode.POP_MESSAGE: _pop_family(PopMessageRequestHeader),
    RequestCode.PEEK_MESSAGE: _pop_family(PeekMessageRequestHeader),
    RequestCode.NOTIFICATION: _pop_family(NotificationRequestHeader),
    RequestCode.POLLING_INFO: _pop_family(PollingInfoRequestHeader),
    RequestCode.ACK_MESSAGE: _pop_family(AckMessageRequestHeader),
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: _pop_family(ChangeInvisibleTimeRequestHeader),
    RequestCode.BATCH_ACK_MESSAGE: _batch_ack,
}


def needed_resources(request: RemotingCommand) -> Needed:
    """{resource: perm} the request needs; empty for codes that need none."""
    resolve = RESOURCES_BY_CODE.get(request.code)
    return resolve(request) if resolve is not None else {}


@dataclass(frozen=True)
class ResourceRules:
    """What a validator checks beyond the signature: ``needed`` maps a request to its
    resources; ``deciding_fields`` names, by code, the extFields that alone decide them."""

    needed: Callable[[RemotingCommand], Needed]
    deciding_fields: Mapping[int, tuple[str, ...]]


BROKER_RESOURCES = ResourceRules(needed_resources, DECIDING_FIELDS)
