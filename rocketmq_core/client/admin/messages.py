"""Admin requests that read messages: by key or id from the index (QUERY_MESSAGE,
VIEW_MESSAGE_BY_ID) and by queue offset (PULL_MESSAGE as TOOLS_GROUP)."""

from __future__ import annotations

import time

from ...errors import RemotingError, ResponseError
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.headers import QueryMessageRequestHeader, ViewMessageRequestHeader
from ...protocol.heartbeat import MessageQueue, SubscriptionData
from ...protocol.message import decode_offset_msg_id, host_address, iter_records, unpack_host
from ..admin_types import AdminError
from ..consumer_requests import ConsumerError, PullResult, pull_message
from ..message import ReceivedMessage
from .base import AdminBase, queue_name

TOOLS_GROUP = "TOOLS_CONSUMER"  # the group mqadmin reads queues as (Java's MixAll)
_FOREVER = (1 << 63) - 1


class MessageAdmin(AdminBase):
    async def query_message_by_key(
        self,
        topic: str,
        key: str,
        max_num: int = 32,
        begin: int = 0,
        end: int | None = None,
    ) -> list[ReceivedMessage]:
        """QUERY_MESSAGE (the index) on each broker of ``topic``: messages whose KEYS hold
        ``key``, stored between ``begin`` and ``end`` (ms; now when None), oldest first."""
        end = _now_ms() if end is None else end
        header = QueryMessageRequestHeader(
            topic=topic, key=key, max_num=max_num, begin_timestamp=begin, end_timestamp=end
        )
        found = await self._query(topic, header, what=f"querying {topic!r} by key {key!r}")
        found = [m for m in found if key in m.keys]  # the index hashes: drop collisions
        return found[:max_num]

    async def _query(
        self, topic: str, header: QueryMessageRequestHeader, *, what: str
    ) -> list[ReceivedMessage]:
        messages: list[ReceivedMessage] = []
        for name, address in await self._route_brokers(topic):
            response = await self._broker(
                address,
                RequestCode.QUERY_MESSAGE,
                header,
                what=f"{what} on {name}",
                accept=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
            )
            if response.code == ResponseCode.SUCCESS and response.body:
                messages += [
                    ReceivedMessage.of(stored, name)
                    for stored in iter_records(response.body)
                    if stored.topic == topic
                ]
        messages.sort(key=lambda m: (m.store_timestamp, m.commit_log_offset))
        return messages

    async def view_message(self, msg_id: str, topic: str | None = None) -> ReceivedMessage:
        """A message by id: an offset id (32/56 hex: store host + CommitLog offset) is
        read with VIEW_MESSAGE_BY_ID where it was stored; a client id (UNIQ_KEY, what
        send results call msg_id) is looked up in ``topic``'s index."""
        address, offset = _offset_id(msg_id)
        if address is not None:
            try:
                return await self._view(address, offset, msg_id)
            except AdminError:
                if topic is None:
                    raise
                # 32 hex digits may also be a client id: look it up as one
        if topic is None:
            raise AdminError(
                f"{msg_id!r} is not an offset message id; a client message id (UNIQ_KEY)"
                " is looked up in its topic: give the topic too"
            )
        header = QueryMessageRequestHeader(
            topic=topic,
            key=msg_id,
            max_num=32,
            begin_timestamp=0,
            end_timestamp=_FOREVER,
            unique_key_query=True,
        )
        found = await self._query(topic, header, what=f"looking up message {msg_id!r}")
        for message in found:
            if message.msg_id == msg_id:
                return message
        raise AdminError(
            f"no message {msg_id!r} in topic {topic!r}", code=ResponseCode.QUERY_NOT_FOUND
        )

    async def _view(self, address: str, offset: int, msg_id: str) -> ReceivedMessage:
        response = await self._broker(
            address,
            RequestCode.VIEW_MESSAGE_BY_ID,
            ViewMessageRequestHeader(offset=offset),
            what=f"reading message {msg_id}",
        )
        records = list(iter_records(response.body))
        if not records:
            raise AdminError(f"broker {address} returned no message for {msg_id}", address=address)
        summary = await self.cluster_info()
        broker = summary.broker_at(address)
        return ReceivedMessage.of(records[0], broker.broker_name if broker else "")

    async def pull(
        self, queue: MessageQueue, offset: int, *, expression: str = "*", max_nums: int = 32
    ) -> PullResult:
        """PULL_MESSAGE as TOOLS_GROUP, committing nothing: the messages of ``queue`` from
        ``offset``, read without joining any consumer group."""
        await self._queue_address(queue)  # names the topic or broker when either is unknown
        what = f"reading {queue_name(queue)} at offset {offset}"
        subscription = SubscriptionData.of(queue.topic, expression)
        try:
            await self.instance.topic_route(queue.topic)  # the pull finds the broker there
            return await pull_message(
                self.instance, TOOLS_GROUP, queue, offset, subscription, max_nums=max_nums
            )
        except ResponseError as exc:
            raise AdminError(f"{what} failed: {exc}", code=exc.code) from exc
        except (RemotingError, ConsumerError, OSError) as exc:
            raise AdminError(f"{what} failed: {exc}") from exc

    async def message_at(self, queue: MessageQueue, offset: int) -> ReceivedMessage:
        """The message at ``offset`` of ``queue`` (mqadmin's queryMsgByOffset)."""
        result = await self.pull(queue, offset, max_nums=1)
        if result.messages and result.messages[0].queue_offset == offset:
            return result.messages[0]
        held = (
            f"it holds offsets {result.min_offset} to {result.max_offset - 1}"
            if result.max_offset > result.min_offset
            else "it holds no message"
        )
        raise AdminError(
            f"no message at offset {offset} of {queue_name(queue)}: {held}",
            code=ResponseCode.QUERY_NOT_FOUND,
        )


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _offset_id(msg_id: str) -> tuple[str | None, int]:
    """(store address, CommitLog offset) if ``msg_id`` can be an offset message id.

    A client id is also 32 hex digits; where an offset id holds a port (0-65535) it
    holds the producer's pid and salt, which almost never look like a port."""
    try:
        host, offset = decode_offset_msg_id(msg_id)
    except ValueError:
        return None, 0
    _ip, port = unpack_host(host)
    if not 0 < port < 65536 or offset < 0:
        return None, 0
    return host_address(host), offset
