"""Transactional messages on the broker: half messages and END_TRANSACTION (STORE.md §9,
CODES.md §4.7).

A send marked ``TRAN_MSG=true`` is parked as a *half* message in
RMQ_SYS_TRANS_HALF_TOPIC (the put hook). END_TRANSACTION commits it to its real topic or
rolls it back, and either way writes an *op* message to RMQ_SYS_TRANS_OP_HALF_TOPIC whose
body is the half's queue offset: the op topic is the durable record of decisions, which
``Decisions`` caches and the check-back service (``transaction_check``) reads. The half
queue records which copy a transaction waits in, and TRANS_CHECK_MAX_TIME_TOPIC which
transactions the check-back gave up on and which of those a late END decided
(``GivenUp``); both are read back at start.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import anyio

from ..errors import RequestRefused
from ..protocol.codes import ResponseCode
from ..protocol.command import RemotingCommand
from ..protocol.constants import (
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from ..protocol.headers import EndTransactionRequestHeader
from ..protocol.message import (
    TRANSACTION_COMMIT,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK,
    RecordError,
    StoredMessage,
    decode_record,
    encode_properties,
    parse_properties,
    property_value,
)
from ..store.api import MessageToStore

if TYPE_CHECKING:
    from ..remoting.processor import RequestContext
    from .app import Broker

log = logging.getLogger("rocketmq.broker.transactions")

CHECK_SERVICE = "transaction_check"  # the broker service that owns ``Decisions``
CHECK_GROUP = "CID_RMQ_SYS_TRANS"  # whose offsets on the half and op topics say how far
HALF_QUEUE = 0  # every half message waits in queue 0 (and its op in op queue 0)
OP_TAG = "d"
READ_BATCH = 32  # records of a system queue read at once
GIVEN_UP_KEPT = 100_000  # transactions the check-back gave up on that a late END may decide

# properties (MESSAGE.md §4.1)
TRAN_MSG = "TRAN_MSG"
PGROUP = "PGROUP"
REAL_TOPIC = "REAL_TOPIC"
REAL_QID = "REAL_QID"
UNIQ_KEY = "UNIQ_KEY"
TRANSACTION_ID = "__transactionId__"
CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
CHECK_IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"
# the longest immunity honoured (Apache's proxy refuses longer: maxTransactionRecoverySecond)
MAX_CHECK_IMMUNITY_S = 3600
# on a check-back's copy: the queue offset of the transaction's first half (Java's name)
FIRST_HALF = "TRAN_PREPARED_QUEUE_OFFSET"
# on a half moved to TRANS_CHECK_MAX_TIME_TOPIC: its queue offset in the half queue; and
# on the record that a late END decided it: "commit" or "rollback" (rocketmq-py's own)
GIVEN_UP_HALF = "TRAN_GIVEN_UP_HALF_OFFSET"
DECIDED_LATE = "TRAN_DECIDED_LATE"
# what a half carries that its committed message must not
HALF_ONLY = (
    TRAN_MSG,
    REAL_TOPIC,
    REAL_QID,
    TRANSACTION_ID,
    CHECK_TIMES,
    FIRST_HALF,
)
# the check-back's bookkeeping: a producer's half must not carry them
INTERNAL = (FIRST_HALF, GIVEN_UP_HALF, DECIDED_LATE)


def now_ms() -> int:
    return int(time.time() * 1000)


# --- the put hook --------------------------------------------------------------------------


class HalfMessageHook:
    """Parks a transaction's message in the half topic until the producer decides."""

    markers = (b"TRAN_MSG\x01",)  # messages without it are not shown to the hook

    def __init__(self, broker: Broker) -> None:
        self.config = broker.config

    def __call__(self, message: MessageToStore) -> MessageToStore:
        properties = message.properties
        if b"TRAN_MSG\x01" not in properties:
            return message
        if (property_value(properties, b"TRAN_MSG") or b"").lower() != b"true":
            return message
        if message.reconsume_times > 0 and _delay_level(properties) > 0:
            return message  # a retry of a transaction's message: an ordinary delayed message
        if self.config.reject_transaction_message:
            raise RequestRefused(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_ip1}] sending transaction message is"
                " forbidden (rejectTransactionMessage=true)",
            )
        parsed = parse_properties(properties.decode())
        if UNIQ_KEY in parsed:
            parsed[TRANSACTION_ID] = parsed[UNIQ_KEY]
        for name in INTERNAL:  # the check-back's to set, no one else's
            parsed.pop(name, None)
        return message.parked(
            TRANS_HALF_TOPIC,
            HALF_QUEUE,
            parsed,
            # NOT_TYPE: the half gets a consume-queue entry, which the check-back reads
            sys_flag=message.sys_flag & ~TRANSACTION_MASK,
        )


def _delay_level(properties: bytes) -> int:
    try:
        return int(property_value(properties, b"DELAY") or 0)
    except ValueError:
        return 0


# --- decisions ------------------------------------------------------------------------------


class Decisions:
    """Which half messages are decided.

    The check-back walks the half queue in order from ``half_offset`` (the offset of group
    CID_RMQ_SYS_TRANS), so every half below it is settled: decided, given up on (which
    ``given_up`` may still let a late END decide), or replaced by a copy, which the copy
    map (``replaced``, ``read_copies`` at start) names for an END that comes later. At or
    above it a half is decided once an op names it; ``read_ops`` learns those from the op
    topic (so a restart forgets nothing) and END_TRANSACTION adds its own before it
    stores anything.
    """

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.half_offset = 0
        self.op_offset = 0
        self._decided: set[int] = set()
        # a transaction's first half -> the copy the check-back replaced it with last, for
        # an END that comes after its half was copied (``read_copies`` after a restart)
        self._copies: dict[int, int] = {}
        self._storing: set[int] = set()  # claimed halves whose records are being stored
        self.given_up = GivenUp(broker)
        # set once the start's read back of both maps is done (and whether it failed)
        self._read_back: anyio.Event | None = None
        self.read_back_ok = True

    def reading_back(self) -> None:
        """The copies and the transactions given up on are to be read back
        (``read_back_now``): ENDs and rounds wait until then."""
        assert self._read_back is None, "read back once, at start"
        self._read_back = anyio.Event()

    async def read_back_now(self) -> None:
        """Read the copies and the transactions given up on back. A failure is logged,
        and ENDs and rounds are refused until a later try succeeds: with part of either
        map, a transaction could be decided twice."""
        try:
            copies = await self.read_copies()
            given_up = await self.given_up.read()
        except Exception:
            self.read_back_ok = False
            log.exception("reading the transactions' copies back failed; retrying next round")
        else:
            self._copies.update(copies)
            self.given_up.take(given_up)
            self.read_back_ok = True
        finally:
            if self._read_back is not None:
                self._read_back.set()

    async def read_back(self) -> None:
        """Until ``read_back_now`` is done: an END or a round that looked before would miss
        a copy, or a transaction given up on. RequestRefused (SYSTEM_ERROR) while it
        fails: the producer's END comes again, or the check-back asks later."""
        read_back = self._read_back
        if read_back is not None and not read_back.is_set():
            await read_back.wait()
        if not self.read_back_ok:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                "the broker could not read its transactions' state back yet; try again",
            )

    def load(self) -> None:
        """Take up the offsets where they were persisted (or where the queues now start)."""
        self.half_offset = max(self.half_offset, self._committed(TRANS_HALF_TOPIC))
        self.op_offset = max(self.op_offset, self._committed(TRANS_OP_HALF_TOPIC))

    def _committed(self, topic: str) -> int:
        committed = self.broker.offsets.query(CHECK_GROUP, topic, HALF_QUEUE)
        # the oldest files of the queue may have expired
        return max(committed, self.broker.store.min_offset(topic, HALF_QUEUE))

    def settled(self, half_offset: int) -> bool:
        return half_offset < self.half_offset or half_offset in self._decided

    def claim(self, half_offset: int) -> bool:
        """Mark a half decided; False when it was settled already (a second decision).
        Until ``stored`` or ``release``, a check-back round stops before it."""
        if self.settled(half_offset):
            return False
        self._decided.add(half_offset)
        self._storing.add(half_offset)
        return True

    def storing(self, half_offset: int) -> bool:
        """Claimed, and its decision's records not stored yet: a round that passed it
        now would leave it settled with nothing stored if the store then failed."""
        return half_offset in self._storing

    def stored(self, half_offset: int) -> None:
        """The claimed decision's records are stored (or as many as will be)."""
        self._storing.discard(half_offset)

    def release(self, half_offset: int) -> None:
        """The decision could not be stored: the half waits for one again."""
        self._decided.discard(half_offset)
        self._storing.discard(half_offset)

    def replaced(self, first: int, copy: int) -> None:
        """The check-back appended ``copy`` for the transaction whose first half is at
        ``first``: the transaction is that copy's to decide now."""
        self._copies[first] = copy

    def undecided_copy(self, half: StoredMessage) -> int | None:
        """Where the copy that replaced ``half`` waits undecided, if the check-back passed
        ``half`` for one (an END later than transactionTimeOut): that copy is what such
        an END decides. None when ``half`` is no such half. The copy map, not the half
        offset, says so: after a restart the persisted offset may lag the copies."""
        if half.queue_offset in self._decided:
            return None
        copy = self._later_copy(half)
        return None if copy is None or self.settled(copy) else copy

    def superseded(self, half: StoredMessage) -> bool:
        """A later copy of ``half``'s transaction is known: the check-back passed ``half``
        before, but the half offset persisted before that round (a crash within the
        offsets' flush interval, a promoted slave). The round passes it again, and no END
        claims it: the copy stands for it."""
        return self._later_copy(half) is not None

    def _later_copy(self, half: StoredMessage) -> int | None:
        """The latest copy of ``half``'s transaction, if it came after ``half``."""
        copy = self._copies.get(first_half(half))
        return copy if copy is not None and copy > half.queue_offset else None

    async def read_copies(self) -> dict[int, int]:
        """Which copy each transaction the check-back copied waits in (the latest), from
        the half queue at and above ``half_offset``: after a restart a late END still
        decides it rather than wait for the next check."""
        copies: dict[int, int] = {}
        async for record, queue_offset in scan(self.broker, TRANS_HALF_TOPIC, self.half_offset):
            try:
                half = decode_record(record)
            except RecordError:
                continue  # the check-back says so when it comes to it
            first = first_half(half)
            if first != queue_offset:
                copies[first] = queue_offset
        return copies

    def pass_half(self, half_offset: int) -> None:
        """The check-back is done with every half up to ``half_offset``."""
        self.half_offset = half_offset + 1
        self.broker.offsets.commit(CHECK_GROUP, TRANS_HALF_TOPIC, HALF_QUEUE, self.half_offset)

    async def read_ops(self) -> list[tuple[int, list[int]]]:
        """Op messages from ``op_offset`` on, as (op queue offset, half offsets decided)."""
        ops: list[tuple[int, list[int]]] = []
        async for record, queue_offset in scan(self.broker, TRANS_OP_HALF_TOPIC, self.op_offset):
            halves = _op_halves(record, queue_offset)
            self._decided.update(halves)
            ops.append((queue_offset, halves))
        return ops

    def forget_settled(self, ops: list[tuple[int, list[int]]]) -> None:
        """Move the op offset past the leading ``ops`` that decide only halves below
        ``half_offset``, and drop those halves from the cache (``settled`` knows them)."""
        for queue_offset, halves in ops:
            if any(half >= self.half_offset for half in halves):
                break
            self.op_offset = queue_offset + 1
        self.broker.offsets.commit(CHECK_GROUP, TRANS_OP_HALF_TOPIC, HALF_QUEUE, self.op_offset)
        self._decided = {half for half in self._decided if half >= self.half_offset}
        self._copies = {
            first: copy for first, copy in self._copies.items() if copy >= self.half_offset
        }


class GivenUp:
    """The transactions the check-back gave up on (``transactionCheckMax`` checks, moved
    to TRANS_CHECK_MAX_TIME_TOPIC) that an END may still decide, once, as Java's broker
    commits them: each transaction's first half -> the half it was moved aside from.

    TRANS_CHECK_MAX_TIME_TOPIC is the durable record: the half moved aside names both
    (``given_up_record``), and a late decision appends a bodiless record after it
    (``decided_late_record``); ``read`` learns them back at start. The latest
    ``GIVEN_UP_KEPT`` are kept."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._last_halves: dict[int, int] = {}

    def keep(self, half: StoredMessage) -> None:
        """``half``, its transaction's last half, was moved aside undecided (or an END
        that claimed it could not store its decision)."""
        dropped = self._keep(first_half(half), half.queue_offset)
        if dropped is not None:
            log.warning(
                "more than %d transactions given up on wait for a late END: the one whose"
                " first half is %d no longer does",
                GIVEN_UP_KEPT,
                dropped,
            )

    def _keep(self, first: int, last: int) -> int | None:
        """Keep ``first`` -> ``last``; the first half of the oldest one dropped for it."""
        dropped = None
        if first not in self._last_halves and len(self._last_halves) >= GIVEN_UP_KEPT:
            dropped = next(iter(self._last_halves))
            del self._last_halves[dropped]
        self._last_halves[first] = last
        return dropped

    def last_half(self, half: StoredMessage) -> int | None:
        """Where ``half``'s transaction was moved aside from, if it waits for a late END."""
        return self._last_halves.get(first_half(half))

    def claim(self, half: StoredMessage) -> bool:
        """Take ``half``'s transaction for the caller's END to decide (once); False if it
        does not wait for one. Handed back with ``keep`` if the decision is not stored."""
        return self._last_halves.pop(first_half(half), None) is not None

    async def read(self) -> dict[int, int]:
        """The transactions that wait, from TRANS_CHECK_MAX_TIME_TOPIC's latest records
        (for ``take``): those kept, and the decisions that follow them, are among the
        last 2 x GIVEN_UP_KEPT, which bounds the read at start."""
        store = self.broker.store
        start = store.max_offset(TRANS_CHECK_MAX_TIME_TOPIC, 0) - 2 * GIVEN_UP_KEPT
        waiting: dict[int, int] = {}
        decided: set[int] = set()
        async for record, _ in scan(self.broker, TRANS_CHECK_MAX_TIME_TOPIC, start, queue_id=0):
            try:
                properties = decode_record(record).properties
                first = int(properties[FIRST_HALF])
                last = int(properties.get(GIVEN_UP_HALF, -1))
            except (RecordError, KeyError, ValueError):
                continue  # moved aside by an older broker, or not a record of ours
            if DECIDED_LATE in properties:
                decided.add(first)  # final, whatever a record after it says
            elif last >= 0:
                waiting.pop(first, None)  # the latest record of a transaction is its place
                waiting[first] = last
        for first in decided:
            waiting.pop(first, None)
        return waiting

    def take(self, waiting: dict[int, int]) -> None:
        """Keep what ``read`` found, the latest GIVEN_UP_KEPT of it."""
        dropped = 0
        for first, last in waiting.items():
            dropped += self._keep(first, last) is not None
        if dropped:  # each was logged when it was dropped
            log.info("%d transactions given up on no longer wait for a late END", dropped)


async def scan(
    broker: Broker, topic: str, start: int, *, queue_id: int = HALF_QUEUE
) -> AsyncIterator[tuple[bytes | memoryview, int]]:
    """Each record of a system queue from ``start`` (or where the queue now begins) to
    where it ended when the scan began, with its queue offset."""
    store = broker.store
    offset = max(start, store.min_offset(topic, queue_id))
    end = store.max_offset(topic, queue_id)
    while offset < end:
        result = await store.get(topic, queue_id, offset, READ_BATCH)
        for record, queue_offset in zip(result.records, result.queue_offsets, strict=True):
            yield record, queue_offset
        if result.next_begin_offset <= offset:
            break
        offset = result.next_begin_offset


def first_half(half: StoredMessage) -> int:
    """The queue offset of the first half of ``half``'s transaction: its own, unless it is
    a check-back's copy."""
    text = half.properties.get(FIRST_HALF, "")
    if text.isascii() and text.isdigit() and int(text) < half.queue_offset:
        return int(text)
    return half.queue_offset


def _op_halves(record: bytes | memoryview, queue_offset: int) -> list[int]:
    """The half offsets an op message decides: ``12`` (4.x) or ``12,13,`` (5.x)."""
    try:
        body = decode_record(record).body
        return [int(part) for part in body.split(b",") if part.strip()]
    except (RecordError, ValueError) as exc:
        log.error("transaction op message %d is unreadable (%s); ignored", queue_offset, exc)
        return []


def decisions_of(broker: Broker) -> Decisions:
    service = broker.services.get(CHECK_SERVICE)
    if service is None:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR,
            f"the broker service {CHECK_SERVICE!r} is not running: transactions cannot end",
        )
    return service.decisions


# --- END_TRANSACTION ------------------------------------------------------------------------


async def end_transaction(
    broker: Broker, ctx: RequestContext, request: RemotingCommand
) -> RemotingCommand | None:
    """Commit or roll back a half message. A second decision is answered SUCCESS and
    ignored. One for a half the check-back already replaced by a copy (an executor
    slower than transactionTimeOut) decides that copy, if it waits undecided: the
    transaction is decided once, and does not wait on a check-back its producer group
    may no longer be there to answer. One for a transaction the check-back gave up on
    (moved to TRANS_CHECK_MAX_TIME_TOPIC) still decides it, once."""
    broker.check_ready()
    header = EndTransactionRequestHeader.from_ext_fields(request.ext_fields or {})
    if broker.config.broker_role == "SLAVE":
        raise RequestRefused(
            ResponseCode.SLAVE_NOT_AVAILABLE,
            "this broker is a slave: end transactions on the master",
        )
    decision = header.commit_or_rollback
    commit = decision == TRANSACTION_COMMIT
    if decision == TRANSACTION_NOT_TYPE:
        return None  # the producer does not know yet: the check-back will ask again
    if decision not in (TRANSACTION_COMMIT, TRANSACTION_ROLLBACK):
        raise RequestRefused(
            ResponseCode.INVALID_PARAMETER,
            f"commitOrRollback is {decision}: send 8 (commit), 12 (rollback) or 0 (unknown)",
        )
    half = await _half_message(broker, header)
    decisions = decisions_of(broker)
    await decisions.read_back()
    # a check-back round may copy the copy while it is read: follow it, a few times
    for _ in range(3):
        copy = decisions.undecided_copy(half)
        if copy is None:
            break
        half = await _copy_of(broker, half, copy)
    # a half a later copy stands for (the copy map after a restart whose half offset
    # lags the copies) is not the END's to claim: that copy is decided or moved aside
    claimed = not decisions.superseded(half) and decisions.claim(half.queue_offset)
    given_up = decisions.given_up
    if claimed:
        # claimed, yet given up on: a restart whose half offset lagged the give-up; this
        # END is its late decision all the same (recorded, or a second END would decide)
        late = given_up.claim(half)
    else:
        last = given_up.last_half(half)
        # the half moved aside, read before the claim: no await between the claim and
        # the shielded store
        moved_aside = None if last is None else await _copy_of(broker, half, last)
        if moved_aside is None or not given_up.claim(half):
            log.info(
                "transaction %s (half %d) is decided already; %s ignored",
                header.transaction_id or header.msg_id,
                half.queue_offset,
                "commit" if commit else "rollback",
            )
            return request.response()
        half, late = moved_aside, True
        log.warning(
            "transaction %s, which the check-back gave up on, is decided late: %s",
            header.transaction_id or header.msg_id,
            "commit" if commit else "rollback",
        )
    # shielded: a producer gone mid-way (its handlers cancelled) must not leave the claim
    # standing with nothing stored; each put ends by its own timeouts
    with anyio.CancelScope(shield=True):
        try:
            if commit:
                try:
                    # through the put hooks: a committed message with a delay level is delayed
                    message = broker.prepare(committed_message(half))
                    await _put(broker, message, "the committed message")
                except Exception:
                    if late:
                        given_up.keep(half)
                    if claimed:
                        decisions.release(half.queue_offset)
                    raise
            decisions.stored(half.queue_offset)  # the claim stands, whatever the op's fate
            try:
                if late:  # first, whatever the op's fate: what a restart reads, so that
                    # no END decides it again (the op does not: its half is passed)
                    marker = decided_late_record(broker, half, commit)
                    await _put(broker, marker, "the record of the late decision")
            finally:
                await _put(broker, op_message(broker, half), "the transaction's op message")
        finally:
            decisions.stored(half.queue_offset)
    return request.response()


async def _half_message(broker: Broker, header: EndTransactionRequestHeader) -> StoredMessage:
    """The half message the request names, checked against what the request says of it."""
    record = await broker.store.message_at(header.commit_log_offset)
    try:
        half = decode_record(record) if record is not None else None
    except RecordError:
        half = None
    if half is None or half.topic != TRANS_HALF_TOPIC or REAL_TOPIC not in half.properties:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR,
            f"Find prepared transaction message failed: no half message at commitLogOffset"
            f" {header.commit_log_offset}",
        )
    group = half.properties.get(PGROUP)
    if group != header.producer_group:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR,
            f"The producer group wrong: the half message belongs to group {group!r},"
            f" not {header.producer_group!r}",
        )
    if half.queue_offset != header.tran_state_table_offset:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR,
            f"The transaction state table offset wrong: the half message is at"
            f" {half.queue_offset}, not {header.tran_state_table_offset}",
        )
    if half.commit_log_offset != header.commit_log_offset:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR,
            f"The commit log offset wrong: the half message is at {half.commit_log_offset}",
        )
    return half


async def _copy_of(broker: Broker, half: StoredMessage, copy: int) -> StoredMessage:
    """The check-back's copy of ``half`` at queue offset ``copy``; ``half`` itself if the
    copy cannot be read (the END is then ignored as a second decision, or, for a
    transaction the check-back gave up on, decides the half it names)."""
    result = await broker.store.get(TRANS_HALF_TOPIC, HALF_QUEUE, copy, 1)
    try:
        found = decode_record(result.records[0]) if result.queue_offsets[:1] == [copy] else None
    except RecordError:
        found = None
    same = found is not None and (
        first_half(found) == first_half(half)
        and all(found.properties.get(name) == half.properties.get(name) for name in _SAME)
    )
    if found is None or not same:
        log.warning("the copy %d of half message %d is gone", copy, half.queue_offset)
        return half
    return found


# what a check-back's copy has as its first half has
_SAME = (UNIQ_KEY, PGROUP, REAL_TOPIC)


async def _put(broker: Broker, message: MessageToStore, what: str) -> None:
    result = await broker.put(message)
    if not result.status.stored:  # stored but on no slave (yet) still ends the transaction
        log.error("%s was not stored: %s %s", what, result.status.name, result.remark)
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR,
            f"{what} was not stored: {result.status.name} {result.remark}".rstrip(),
        )


def committed_message(half: StoredMessage) -> MessageToStore:
    """The half as its real topic gets it: same body, flag, born time and host, keys,
    tags and id, type COMMIT, pointing back at the half."""
    properties = dict(half.properties)
    topic = properties[REAL_TOPIC]
    queue_id = int(properties.get(REAL_QID) or 0)
    for name in HALF_ONLY:
        properties.pop(name, None)
    return MessageToStore.again(
        half,
        topic,
        queue_id,
        properties,
        sys_flag=(half.sys_flag & ~TRANSACTION_MASK) | TRANSACTION_COMMIT,
        prepared_transaction_offset=half.commit_log_offset,
    )


def given_up_record(half: StoredMessage) -> MessageToStore:
    """``half`` as TRANS_CHECK_MAX_TIME_TOPIC keeps it once the check-back gave up on it:
    naming its transaction's first half and where it waited, for a late END."""
    properties = {
        **half.properties,
        FIRST_HALF: str(first_half(half)),
        GIVEN_UP_HALF: str(half.queue_offset),
    }
    return MessageToStore.again(half, TRANS_CHECK_MAX_TIME_TOPIC, 0, properties)


def decided_late_record(broker: Broker, half: StoredMessage, commit: bool) -> MessageToStore:
    """The record, in TRANS_CHECK_MAX_TIME_TOPIC after the half itself, that a late END
    decided ``half``'s transaction (no body; the decision is named for operators)."""
    properties = {
        FIRST_HALF: str(first_half(half)),
        DECIDED_LATE: "commit" if commit else "rollback",
        UNIQ_KEY: half.properties.get(UNIQ_KEY, ""),
        "WAIT": "false",
    }
    return MessageToStore(
        TRANS_CHECK_MAX_TIME_TOPIC,
        0,
        b"",
        encode_properties(properties).encode(),
        born_timestamp=now_ms(),
        born_host=broker.store.config.store_host,
    )


def op_message(broker: Broker, half: StoredMessage) -> MessageToStore:
    """The record that ``half`` is decided: its queue offset, in decimal, tagged ``d``."""
    return MessageToStore(
        TRANS_OP_HALF_TOPIC,
        half.queue_id,
        str(half.queue_offset).encode(),
        encode_properties({"TAGS": OP_TAG, "WAIT": "false"}).encode(),
        born_timestamp=now_ms(),
        born_host=broker.store.config.store_host,
    )
