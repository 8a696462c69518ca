"""Handing one stored message to one consumer of a group (CONSUME_MESSAGE_DIRECTLY,
relayed by the broker that stores it): ``mqadmin queryMsgById -g -d``, and how the
dashboard resends a dead-lettered message to its group."""

from __future__ import annotations

from ...protocol.bodies import ConsumeMessageDirectlyResult
from ...protocol.codes import RequestCode
from ...protocol.headers import ConsumeMessageDirectlyResultRequestHeader
from ..admin_types import AdminError
from .connections import ConnectionAdmin
from .messages import MessageAdmin

# longer than a broker waits for the consumer (5 s), so its own answer comes back
CONSUME_DIRECTLY_TIMEOUT = 10.0


class ConsumeDirectlyAdmin(ConnectionAdmin, MessageAdmin):
    async def consume_message_directly(
        self,
        group: str,
        client_id: str | None,
        msg_id: str,
        topic: str | None = None,
        *,
        timeout: float = CONSUME_DIRECTLY_TIMEOUT,
    ) -> ConsumeMessageDirectlyResult:
        """Have consumer ``client_id`` of ``group`` (None: its first online consumer, as
        the dashboard picks) run its listener once on message ``msg_id``: an offset id,
        or a client id (UNIQ_KEY) looked up in ``topic``. No offset moves. A message of
        ``%DLQ%<group>`` consumed so is how a dead-lettered message is redriven.

        The result says what the listener did (CR_SUCCESS, CR_LATER, CR_THROW_EXCEPTION
        with what it raised); AdminError when the message or the consumer is not found."""
        message = await self.view_message(msg_id, topic)
        if client_id is None:
            client_id = (await self.group_connections(group)).connections[0].client_id
        header = ConsumeMessageDirectlyResultRequestHeader(
            consumer_group=group,
            client_id=client_id,
            msg_id=message.offset_msg_id,  # the broker reads it at the offset this holds
            topic=topic or message.topic,
        )
        address = message.store_host
        response = await self._broker(
            address,
            RequestCode.CONSUME_MESSAGE_DIRECTLY,
            header,
            what=f"consuming {msg_id} directly by {client_id!r} of {group!r}",
            timeout=timeout,
        )
        if not response.body:
            raise AdminError(
                f"consumer {client_id!r} of {group!r} answered without a result",
                address=address,
            )
        return ConsumeMessageDirectlyResult.decode(response.body)
