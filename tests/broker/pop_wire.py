"""POP requests as a 4.9/5.x Java client sends them, and reading the responses as it does."""

from __future__ import annotations

import time
from dataclasses import dataclass

import anyio

from rocketmq_core.broker.pop.handles import SEPARATOR, parse_offset_info
from rocketmq_core.broker.pop.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
)
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.message import StoredMessage, iter_records

TOPIC = "PopOrders"
GROUP = "PopGroup"


@dataclass
class Popped:
    message: StoredMessage
    handle: str  # built from the response headers, as MQClientAPIImpl.processPopResponse does
    fields: dict[str, str]  # the POP response's header

    @property
    def body(self) -> bytes:
        return self.message.body


def pop_request(
    topic=TOPIC,
    group=GROUP,
    queue_id=-1,
    invisible_ms=60_000,
    poll_ms=0,
    max_nums=32,
    order=False,
    attempt_id=None,
    exp=None,
) -> RemotingCommand:
    header = PopMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=queue_id,
        max_msg_nums=max_nums,
        invisible_time=invisible_ms,
        poll_time=poll_ms,
        born_time=int(time.time() * 1000),
        init_mode=0,
        exp_type="TAG" if exp else None,
        exp=exp,
        order=order or None,
        attempt_id=attempt_id,
    )
    return RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext_fields())


def popped_messages(response: RemotingCommand, broker_name: str = "broker-a") -> list[Popped]:
    """The messages of a POP response with their handles, computed as a Java client does."""
    if response.code != ResponseCode.SUCCESS:
        return []
    fields = response.ext_fields or {}
    starts = parse_offset_info(fields.get("startOffsetInfo"))
    result = []
    for message in iter_records(response.body or b""):
        if "POP_CK" in message.properties:
            handle = message.properties["POP_CK"]
        else:
            flag = "1" if message.topic.startswith("%RETRY%") else "0"
            start = starts[f"{flag}@{message.queue_id}"]
            handle = SEPARATOR.join(
                str(part)
                for part in (
                    start,
                    fields["popTime"],
                    fields["invisibleTime"],
                    fields["reviveQid"],
                    flag,
                    broker_name,
                    message.queue_id,
                    message.queue_offset,
                )
            )
        result.append(Popped(message, handle, fields))
    return result


def ack_request(popped: Popped, topic=TOPIC, group=GROUP) -> RemotingCommand:
    header = AckMessageRequestHeader(
        consumer_group=group,
        topic=real_topic(popped.handle, topic, group),
        queue_id=int(popped.handle.split(SEPARATOR)[6]),
        extra_info=popped.handle,
        offset=int(popped.handle.split(SEPARATOR)[7]),
    )
    return RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_ext_fields())


def change_request(popped: Popped, invisible_ms: int, topic=TOPIC, group=GROUP) -> RemotingCommand:
    header = ChangeInvisibleTimeRequestHeader(
        consumer_group=group,
        topic=real_topic(popped.handle, topic, group),
        queue_id=int(popped.handle.split(SEPARATOR)[6]),
        extra_info=popped.handle,
        offset=int(popped.handle.split(SEPARATOR)[7]),
        invisible_time=invisible_ms,
    )
    return RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext_fields())


def real_topic(handle: str, topic: str, group: str) -> str:
    """ExtraInfoUtil.getRealTopic: flag 1 means the POP retry topic."""
    return f"%RETRY%{group}_{topic}" if handle.split(SEPARATOR)[4] == "1" else topic


async def pop_until(client, address, deadline_s: float = 30.0, **options) -> list[Popped]:
    """POP until something comes (revive is time-driven: poll, never assert a time)."""
    with anyio.fail_after(deadline_s):
        while True:
            response = await client.invoke(address, pop_request(poll_ms=1000, **options), 5.0)
            assert response.code in (ResponseCode.SUCCESS, ResponseCode.POLLING_TIMEOUT), (
                response.remark
            )
            popped = popped_messages(response)
            if popped:
                return popped
