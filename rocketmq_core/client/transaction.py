"""TransactionProducer: a message that reaches consumers only if a local transaction
commits (STORE.md §9).

    async def place_order(message, arg):  # runs once the broker holds the half message
        await orders.insert(arg)
        return LocalTransactionState.COMMIT

    def order_state(message):  # the broker asks when it heard no decision
        placed = orders.exists(message.keys[0])
        return LocalTransactionState.COMMIT if placed else LocalTransactionState.ROLLBACK

    async with TransactionProducer(
        "PG-orders", "127.0.0.1:9876", executor=place_order, checker=order_state
    ) as producer:
        result = await producer.send_in_transaction(Message("Orders", b"..", keys="o-1"), order)

``executor(message, arg)`` and ``checker(message)`` may be plain functions (run in a
worker thread) or async; an exception or None counts as UNKNOWN. The checker gets the
message as consumers would (a ReceivedMessage): give it what it needs to find the local
transaction again, in keys or body.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from enum import Enum
from typing import Any

import anyio

from ..errors import RemotingError, ResponseError
from ..protocol.codes import RequestCode
from ..protocol.constants import DEFAULT_TOPIC
from ..protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from ..protocol.message import (
    TRANSACTION_COMMIT,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED,
    TRANSACTION_ROLLBACK,
    StoredMessage,
    decode_offset_msg_id,
)
from .message import PGROUP, TRAN_MSG, Message, ReceivedMessage, SendResult, SendStatus
from .producer import Producer

log = logging.getLogger("rocketmq.client.transaction")


class LocalTransactionState(Enum):
    """What became of the local transaction; the value is END_TRANSACTION's
    ``commitOrRollback``."""

    COMMIT = TRANSACTION_COMMIT
    ROLLBACK = TRANSACTION_ROLLBACK
    UNKNOWN = TRANSACTION_NOT_TYPE


@dataclasses.dataclass(frozen=True, slots=True)
class TransactionSendResult(SendResult):
    """The half message's send result, and what the executor decided."""

    local_state: LocalTransactionState = LocalTransactionState.UNKNOWN


Outcome = LocalTransactionState | None
Executor = Callable[[Message, Any], Outcome | Awaitable[Outcome]]
Checker = Callable[[ReceivedMessage], Outcome | Awaitable[Outcome]]


class TransactionProducer(Producer):
    """A Producer that also sends messages in transactions; takes Producer's options."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | Sequence[str] = "",
        *,
        executor: Executor,
        checker: Checker,
        **options: Any,
    ) -> None:
        if not callable(executor) or not callable(checker):
            raise TypeError("a TransactionProducer needs an executor and a checker, both callable")
        super().__init__(group, namesrv_addr, **options)
        self.executor = executor
        self.checker = checker

    async def _start_more(self, lifetime: AsyncExitStack) -> None:
        # learn the brokers now: a restarted producer must answer check-backs before it sends
        try:
            await self.instance.topic_route(DEFAULT_TOPIC)
        except (RemotingError, ResponseError) as exc:
            log.debug(
                "%s: no broker known at start (%s); the first send finds them", self.group, exc
            )

    async def send_in_transaction(self, message: Message, arg: Any = None) -> TransactionSendResult:
        """Send ``message`` as a half message, run ``executor(message, arg)`` and tell the
        broker the outcome. Consumers get the message once it commits, now or when the
        checker says so; a delay level is ignored, as Java's client does."""
        half = dataclasses.replace(message, delay_level=0) if message.delay_level else message
        request, unique_ids = self._encode_one(
            half,
            sys_flag=TRANSACTION_PREPARED,
            extra_properties={TRAN_MSG: "true", PGROUP: self.group},
        )
        sent: SendResult = await self._send(half, request, unique_ids)
        if sent.status is SendStatus.SEND_OK:
            state = await self._local_state("executor", self.executor, message, arg)
        else:
            state = LocalTransactionState.ROLLBACK  # the half may not be durable: drop it
        await self.end_transaction(sent, state)
        fields = {field.name: getattr(sent, field.name) for field in dataclasses.fields(sent)}
        return TransactionSendResult(**fields, local_state=state)

    async def end_transaction(
        self, sent: SendResult, state: LocalTransactionState, *, confirm: bool = False
    ) -> None:
        """Tell the broker the outcome of the half message ``sent``: oneway (a lost
        answer is asked for again by the check-back), or with ``confirm`` as a request
        whose answer says the outcome is stored (consumers see a commit on return).
        For callers that decide later than the executor: an executor answering UNKNOWN
        leaves the half waiting."""
        _, commit_log_offset = decode_offset_msg_id(sent.offset_msg_id)
        header = EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=sent.queue_offset,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=state.value,
            msg_id=sent.msg_id,
            from_transaction_check=False,
            transaction_id=sent.transaction_id or sent.msg_id,
        )
        address = self.instance.master_address(sent.queue.broker_name)
        if address is None:  # a producer deciding for halves another one sent
            with contextlib.suppress(RemotingError, ResponseError):
                await self.instance.topic_route(sent.queue.topic)
            address = self.instance.master_address(sent.queue.broker_name)
        if confirm and address is not None:
            await self.instance.invoke(address, RequestCode.END_TRANSACTION, header)
        else:
            await self._end_transaction(address, header)

    def check_transaction(
        self, broker_address: str, header: CheckTransactionStateRequestHeader, message: Any
    ) -> None:
        """CHECK_TRANSACTION_STATE from a broker: the checker answers in the background."""
        self.instance.task_group.start_soon(self._answer_check, broker_address, header, message)

    async def _answer_check(
        self, broker_address: str, header: CheckTransactionStateRequestHeader, stored: StoredMessage
    ) -> None:
        message = ReceivedMessage.of(stored, header.broker_name or "")
        state = await self._local_state("checker", self.checker, message)
        answer = EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=state.value,
            msg_id=message.msg_id,
            from_transaction_check=True,
            transaction_id=header.transaction_id or message.msg_id,
        )
        await self._end_transaction(broker_address, answer)

    async def _local_state(
        self, role: str, callback: Callable[..., Any], *args: Any
    ) -> LocalTransactionState:
        try:
            if _is_async(callback):
                outcome = await callback(*args)
            else:
                outcome = await anyio.to_thread.run_sync(callback, *args, abandon_on_cancel=False)
        except Exception:
            log.exception("%s: the transaction %s failed; the state is UNKNOWN", self.group, role)
            return LocalTransactionState.UNKNOWN
        if outcome is None:
            return LocalTransactionState.UNKNOWN
        if not isinstance(outcome, LocalTransactionState):
            log.warning(
                "%s: the transaction %s returned %r, not a LocalTransactionState; UNKNOWN",
                self.group,
                role,
                outcome,
            )
            return LocalTransactionState.UNKNOWN
        return outcome

    async def _end_transaction(
        self, address: str | None, header: EndTransactionRequestHeader
    ) -> None:
        """END_TRANSACTION, oneway; if it is lost the broker checks back later."""
        if address is None:
            log.warning("%s: no broker address to end transaction %s", self.group, header.msg_id)
            return
        try:
            await self.instance.invoke_oneway(address, RequestCode.END_TRANSACTION, header)
        except (RemotingError, OSError) as exc:
            log.warning(
                "%s: END_TRANSACTION of %s to %s failed: %s",
                self.group,
                header.msg_id,
                address,
                exc,
            )


def _is_async(callback: Callable[..., Any]) -> bool:
    # an object whose __call__ is async counts as async too
    return inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(
        type(callback).__call__
    )
