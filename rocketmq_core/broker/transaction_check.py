"""The transaction check-back (STORE.md §9): every ``transactionCheckInterval``, ask the
producer group of each half message still undecided after ``transactionTimeOut`` what
became of its transaction.

A round reads the op topic to learn what is decided, then walks the half queue from
group CID_RMQ_SYS_TRANS's offset up to where the queue ended when the round began. A
decided half is passed over; one checked ``transactionCheckMax`` times (or older than
``fileReservedTime``) is moved to TRANS_CHECK_MAX_TIME_TOPIC; one younger than
``transactionTimeOut`` ends the round. One whose producer asked for a longer immunity
(CHECK_IMMUNITY_TIME_IN_SECONDS) and is still within it is appended again as a copy, no
check counted, and the round goes on. Any other is appended again as a copy (one more
check counted) and the producer group is sent CHECK_TRANSACTION_STATE for the copy; its
END_TRANSACTION, or a late one for any earlier half of the transaction, decides the copy.
Everything derives from the store and the persisted offsets, so a restart loses nothing.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskStatus

from ..protocol.codes import RequestCode
from ..protocol.command import RemotingCommand
from ..protocol.constants import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC
from ..protocol.headers import CheckTransactionStateRequestHeader
from ..protocol.message import (
    BORNHOST_V6,
    STOREHOST_V6,
    RecordError,
    StoredMessage,
    body_crc,
    decode_record,
    encode_properties,
    record_size,
    with_host_flags,
    write_record,
)
from ..store.api import MessageToStore, PutResult
from .transactions import (
    CHECK_IMMUNITY,
    CHECK_TIMES,
    FIRST_HALF,
    HALF_QUEUE,
    MAX_CHECK_IMMUNITY_S,
    PGROUP,
    READ_BATCH,
    REAL_QID,
    REAL_TOPIC,
    UNIQ_KEY,
    Decisions,
    first_half,
    given_up_record,
    now_ms,
)

if TYPE_CHECKING:
    from .app import Broker

log = logging.getLogger("rocketmq.broker.transactions")

HOUR_MS = 3_600_000


class TransactionCheckService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.decisions = Decisions(broker)
        self._round_lock = anyio.Lock()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        if self.broker.config.is_slave:  # a master's service (HA.md §8)
            task_status.started()
            return
        # the state is the group's offsets, which the broker persists once services stop
        self.decisions.load()
        await self.decisions.read_ops()  # decided before a restart counts before any END
        # the copies and the transactions given up on are read after the broker is ready
        # (a large backlog of halves takes a while); ENDs and rounds wait for them
        self.decisions.reading_back()
        task_status.started()
        await self.decisions.read_back_now()
        while True:
            await anyio.sleep(self.broker.config.transaction_check_interval / 1000)
            try:
                if not self.decisions.read_back_ok:
                    await self.decisions.read_back_now()
                await self.check_now()
            except Exception:  # a full disk or a bad record must not end the check-backs
                log.exception("a transaction check-back round failed; retrying next interval")

    async def check_now(self) -> None:
        """Run one round at once (tests, admin), after a round under way, once the start's
        read back is done (RequestRefused while it fails)."""
        await self.decisions.read_back()
        async with self._round_lock:
            await self._round()

    async def _round(self) -> None:
        store = self.broker.store
        decisions = self.decisions
        decisions.load()
        ops = await decisions.read_ops()
        end = store.max_offset(TRANS_HALF_TOPIC, HALF_QUEUE)  # copies made now wait a round
        now = now_ms()
        going = True
        while going and decisions.half_offset < end:
            result = await store.get(
                TRANS_HALF_TOPIC, HALF_QUEUE, decisions.half_offset, READ_BATCH
            )
            if not result.records:
                if result.next_begin_offset <= decisions.half_offset:
                    break
                decisions.pass_half(result.next_begin_offset - 1)  # a gap: expired files
                continue
            # no await from here to the next read: an END_TRANSACTION sees each half
            # either before it is looked at or after it is passed
            for record, queue_offset in zip(result.records, result.queue_offsets, strict=True):
                going = queue_offset < end and self._check_half(record, queue_offset, now)
                if not going:
                    break
        decisions.forget_settled(ops)

    def _check_half(self, record: bytes | memoryview, queue_offset: int, now: int) -> bool:
        """Handle one half; False when the round stops before it."""
        config = self.broker.config
        if self.decisions.storing(queue_offset):
            return False  # an END's records are being stored: looked at next round
        if self.decisions.settled(queue_offset):
            self.decisions.pass_half(queue_offset)
            return True
        try:
            half = decode_record(record)
        except RecordError as exc:
            log.error("half message %d is unreadable (%s); skipped", queue_offset, exc)
            self.decisions.pass_half(queue_offset)
            return True
        if self.decisions.superseded(half):
            self.decisions.pass_half(queue_offset)  # a later copy stands for it
            return True
        checks = _check_times(half)
        if (
            checks >= config.transaction_check_max
            or now - half.born_timestamp > config.file_reserved_time * HOUR_MS
        ):
            self._discard(half, checks)
            self.decisions.given_up.keep(half)
            self.decisions.pass_half(queue_offset)
            return True
        # born time of the first half (copies keep it); the store time if the producer's
        # clock is ahead of ours
        age = now - min(half.born_timestamp, half.store_timestamp)
        if 0 <= age < config.transaction_time_out:
            return False  # the halves after it are younger still
        # one whose producer asked to be left alone longer is appended again, its checks
        # not counted, so that it does not hold back the checks of the halves after it
        immune = age < _asked_immunity_ms(half)
        copy = self._append_copy(half, checks if immune else checks + 1)
        if copy is None:
            return False
        self.decisions.pass_half(queue_offset)
        if not immune:
            self._ask_producer(copy)
        return True

    def _append_copy(self, half: StoredMessage, checks: int) -> StoredMessage | None:
        """The half appended again, counting one more check and naming the transaction's
        first half; None if the store refused."""
        first = first_half(half)
        properties = {**half.properties, CHECK_TIMES: str(checks), FIRST_HALF: str(first)}
        put = self._append(MessageToStore.again(half, TRANS_HALF_TOPIC, HALF_QUEUE, properties))
        if not put.status.stored:
            log.warning(
                "half message %d was not appended again for its check: %s %s; next round",
                half.queue_offset,
                put.status.name,
                put.remark,
            )
            return None
        self.decisions.replaced(first, put.queue_offset)
        return dataclasses.replace(
            half,
            queue_offset=put.queue_offset,
            commit_log_offset=put.commit_log_offset,
            store_timestamp=put.store_timestamp,
            store_host=put.store_host,
            properties=properties,
        )

    def _append(self, message: MessageToStore) -> PutResult:
        """Appended without waiting for a flush or a slave (the half itself is safe
        already), but the HA writers are woken to ship it now, not at their next poll."""
        put = self.broker.store.append(message)
        if put.status.stored and self.broker.ha is not None:
            self.broker.ha.appended()
        return put

    def _ask_producer(self, copy: StoredMessage) -> None:
        """CHECK_TRANSACTION_STATE for ``copy`` to a producer of its group, if one is here."""
        properties = copy.properties
        group = properties.get(PGROUP, "")
        # each check of this transaction asks the group's next producer
        channel = self.broker.producers.any_channel(group, _check_times(copy))
        uniq = properties.get(UNIQ_KEY)
        if channel is None:
            log.debug("no producer of group %r is connected to check transaction %s", group, uniq)
            return
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=copy.queue_offset,
            commit_log_offset=copy.commit_log_offset,
            msg_id=uniq,
            transaction_id=uniq,
            offset_msg_id=copy.offset_msg_id,
            topic=properties.get(REAL_TOPIC),
            broker_name=self.broker.config.broker_name,
        )
        # the producer sees the message where it was sent, not where it waits
        as_sent = dataclasses.replace(
            copy,
            topic=properties.get(REAL_TOPIC, copy.topic),
            queue_id=int(properties.get(REAL_QID) or 0),
        )
        request = RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE,
            header.to_ext_fields(),
            encoded_record(as_sent),
            oneway=True,
        )
        self.broker.send_to_client(channel, request)

    def _discard(self, half: StoredMessage, checks: int) -> None:
        """Move a half nobody decided out of the way, to TRANS_CHECK_MAX_TIME_TOPIC."""
        self.broker.topics.create_if_missing(TRANS_CHECK_MAX_TIME_TOPIC, 1)
        put = self._append(given_up_record(half))
        log.warning(
            "transaction %s of producer group %r undecided after %d checks: moved to %s%s",
            half.properties.get(UNIQ_KEY),
            half.properties.get(PGROUP),
            checks,
            TRANS_CHECK_MAX_TIME_TOPIC,
            ""
            if put.status.stored
            else f" but not stored ({put.status.name}): a late END can decide it only until"
            " the broker restarts",
        )


def _check_times(half: StoredMessage) -> int:
    try:
        return int(half.properties.get(CHECK_TIMES) or 0)
    except ValueError:
        return 0


def _asked_immunity_ms(half: StoredMessage) -> int:
    """How long after it was sent the producer asked for ``half`` to be left unchecked
    (CHECK_IMMUNITY_TIME_IN_SECONDS), at most MAX_CHECK_IMMUNITY_S: each round appends it
    again meanwhile; 0 when it did not ask. ``transactionTimeOut`` applies either way."""
    try:
        asked = int(half.properties.get(CHECK_IMMUNITY) or 0)
    except ValueError:
        return 0
    return min(asked, MAX_CHECK_IMMUNITY_S) * 1000


def encoded_record(message: StoredMessage) -> bytes:
    """``message`` in the stored-record layout (what a pull returns)."""
    topic_bytes = message.topic.encode()
    properties = encode_properties(message.properties).encode()
    sys_flag = with_host_flags(message.sys_flag, message.born_host, message.store_host)
    born_v6, store_v6 = bool(sys_flag & BORNHOST_V6), bool(sys_flag & STOREHOST_V6)
    size = record_size(len(message.body), len(topic_bytes), len(properties), born_v6, store_v6)
    buffer = bytearray(size)
    write_record(
        buffer,
        0,
        size,
        message.body,
        body_crc(message.body),
        topic_bytes,
        properties,
        message.queue_id,
        message.flag,
        message.queue_offset,
        message.commit_log_offset,
        sys_flag,
        message.born_timestamp,
        message.born_host,
        message.store_timestamp,
        message.store_host,
        message.reconsume_times,
        message.prepared_transaction_offset,
    )
    return bytes(buffer)
