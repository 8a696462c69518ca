"""Transactional messages end to end: half messages, END_TRANSACTION, the check-back,
a broker restart, the blocking producer and a producer killed before its decision."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from rocketmq_core.broker.transactions import CHECK_IMMUNITY, decisions_of
from rocketmq_core.client import sync
from rocketmq_core.client.config import ClientConfig
from rocketmq_core.client.message import Message, ReceivedMessage
from rocketmq_core.client.producer import MQClientError, Producer
from rocketmq_core.client.push import PushConsumer
from rocketmq_core.client.transaction import (
    LocalTransactionState,
    TransactionProducer,
    TransactionSendResult,
)
from rocketmq_core.errors import RequestRefused
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.constants import (
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from rocketmq_core.protocol.headers import EndTransactionRequestHeader
from rocketmq_core.protocol.message import (
    TRANSACTION_COMMIT,
    TRANSACTION_MASK,
    TRANSACTION_ROLLBACK,
    decode_offset_msg_id,
    decode_record,
)
from rocketmq_core.testing.cluster import EmbeddedCluster

from .conftest import TOPIC, eventually

pytestmark = pytest.mark.anyio

COMMIT, ROLLBACK, UNKNOWN = (
    LocalTransactionState.COMMIT,
    LocalTransactionState.ROLLBACK,
    LocalTransactionState.UNKNOWN,
)
HELPER = Path(__file__).with_name("transaction_producer_process.py")
# a half older than 300 ms is checked back, at most 200 ms later
CHECKING = {"transaction_check_interval": 200, "transaction_time_out": 300}
checking = pytest.mark.rocketmq(**CHECKING)
# rounds run only when a test runs them: none between a restart and what follows it
MANUAL_ROUNDS = {"transaction_check_interval": 60_000, "transaction_time_out": 300}
# no check-back within a test: only the producer decides
patient = pytest.mark.rocketmq(transaction_check_interval=200, transaction_time_out=60_000)


def answer(state: LocalTransactionState):
    """A checker answering ``state``, and the messages it was asked about."""
    asked: list[ReceivedMessage] = []

    def checker(message: ReceivedMessage) -> LocalTransactionState:
        asked.append(message)
        return state

    return checker, asked


async def undecided(message: Message, arg: object) -> LocalTransactionState:
    return UNKNOWN


@asynccontextmanager
async def consuming(cluster: EmbeddedCluster, group: str) -> AsyncIterator[list[ReceivedMessage]]:
    """What a push consumer of TOPIC receives, once it pulls from every queue."""
    received: list[ReceivedMessage] = []

    async def listener(messages: list[ReceivedMessage]) -> None:
        received.extend(messages)

    consumer = PushConsumer(group, cluster.namesrv_address, listener=listener, consume_from="first")
    consumer.subscribe(TOPIC)
    async with consumer:
        await eventually(lambda: any(len(q) == 4 for q in in_broker(cluster, held_queues)))
        yield received


@asynccontextmanager
async def consumer_and_producer(
    cluster: EmbeddedCluster, name, executor, checker
) -> AsyncIterator[tuple[list[ReceivedMessage], TransactionProducer]]:
    """What a consumer of TOPIC receives, and a TransactionProducer of the test's group."""
    async with (
        consuming(cluster, name("CG")) as received,
        TransactionProducer(
            name("PG"), cluster.namesrv_address, executor=executor, checker=checker
        ) as producer,
    ):
        yield received, producer


async def delivered(cluster: EmbeddedCluster, name, *, rounds: int) -> list[ReceivedMessage]:
    """What a consumer of TOPIC receives: once something arrives, and after ``rounds``
    more check-back rounds and a moment, in which nothing more may come."""
    async with consuming(cluster, name("CG")) as received:
        await eventually(lambda: received)
        await check_rounds(cluster, rounds)
        await anyio.sleep(0.5)
    return received


async def held_queues(cluster: EmbeddedCluster) -> list[set[int]]:
    return list(cluster.broker.pulls.held_queues(TOPIC).values())


def in_broker(cluster: EmbeddedCluster, function, *args):
    """``function(cluster, *args)`` run in the broker's event loop (blocking)."""
    return cluster.call(function, cluster, *args)


async def check_now(cluster: EmbeddedCluster) -> None:
    await cluster.broker.services["transaction_check"].check_now()


async def check_rounds(cluster: EmbeddedCluster, count: int = 1) -> None:
    """Run check-back rounds at once, rather than wait for them."""
    for _ in range(count):
        await anyio.to_thread.run_sync(in_broker, cluster, check_now)


async def checked_up_to(cluster: EmbeddedCluster) -> int:
    """The check-back's half offset: every half below it is settled."""
    return decisions_of(cluster.broker).half_offset


async def queue_size(cluster: EmbeddedCluster, topic: str) -> int:
    return cluster.broker.store.max_offset(topic, 0)


def restart_proof_producer(cluster: EmbeddedCluster, name, checker) -> TransactionProducer:
    """A TransactionProducer of the test's group that leaves its transactions undecided,
    and whose heartbeat finds a restarted broker within 0.2 s."""
    config = ClientConfig(namesrv_addr=cluster.namesrv_address, heartbeat_interval=0.2)
    return TransactionProducer(name("PG"), config=config, executor=undecided, checker=checker)


async def copied_immune_half(
    cluster: EmbeddedCluster,
    producer: TransactionProducer,
    body: bytes,
    immunity: int,
    *,
    rounds: int,
) -> TransactionSendResult:
    """A half asking for ``immunity`` seconds, appended again by ``rounds`` rounds (past
    MANUAL_ROUNDS' transactionTimeOut, within the immunity: nobody is asked)."""
    message = Message(TOPIC, body, properties={CHECK_IMMUNITY: str(immunity)})
    result = await producer.send_in_transaction(message)
    await anyio.sleep(0.4)
    await check_rounds(cluster, rounds)
    assert in_broker(cluster, queue_size, TRANS_HALF_TOPIC) == 1 + rounds
    return result


async def given_up_half(
    cluster: EmbeddedCluster, producer: TransactionProducer, body: bytes
) -> TransactionSendResult:
    """A half the check-back gave up on (transactionCheckMax=1, MANUAL_ROUNDS): checked
    once, then moved to TRANS_CHECK_MAX_TIME_TOPIC."""
    result = await producer.send_in_transaction(Message(TOPIC, body))
    await anyio.sleep(0.4)
    await check_rounds(cluster, 2)
    assert in_broker(cluster, queue_size, TRANS_CHECK_MAX_TIME_TOPIC) == 1
    return result


async def end(
    producer: TransactionProducer,
    cluster: EmbeddedCluster,
    result: TransactionSendResult,
    decision: int = TRANSACTION_COMMIT,
    **wrong,
):
    """END_TRANSACTION as a request with a response (clients send it oneway)."""
    header = EndTransactionRequestHeader(
        producer_group=wrong.get("group", producer.group),
        tran_state_table_offset=wrong.get("offset", result.queue_offset),
        commit_log_offset=wrong.get(
            "commit_log_offset", decode_offset_msg_id(result.offset_msg_id)[1]
        ),
        commit_or_rollback=decision,
        msg_id=result.msg_id,
        transaction_id=result.transaction_id,
    )
    return await producer.instance.invoke(
        cluster.broker_address,
        RequestCode.END_TRANSACTION,
        header,
        accept=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR, ResponseCode.INVALID_PARAMETER),
    )


@patient
async def test_a_commit_delivers_the_message_a_rollback_never_and_a_half_is_unseen(cluster, name):
    decide = anyio.Event()

    async def executor(message: Message, state: LocalTransactionState) -> LocalTransactionState:
        await decide.wait()
        return state

    checker, asked = answer(UNKNOWN)
    results: dict[bytes, TransactionSendResult] = {}
    async with (
        consuming(cluster, name("CG")) as received,
        TransactionProducer(
            name("PG"), cluster.namesrv_address, executor=executor, checker=checker
        ) as producer,
    ):

        async def send(body: bytes, state: LocalTransactionState) -> None:
            message = Message(TOPIC, body, tags="TagA", keys=["k1", "k2"], properties={"a": "1"})
            results[body] = await producer.send_in_transaction(message, state)

        async with anyio.create_task_group() as group:
            group.start_soon(send, b"commit", COMMIT)
            group.start_soon(send, b"rollback", ROLLBACK)
            await eventually(lambda: in_broker(cluster, queue_size, TRANS_HALF_TOPIC) == 2)
            await anyio.sleep(0.3)
            assert received == [], "a half message reached a consumer"
            decide.set()
        await eventually(lambda: len(received) == 1)
        await check_rounds(cluster)
        await anyio.sleep(0.3)
    [message] = received
    committed = results[b"commit"]
    assert committed.local_state is COMMIT and results[b"rollback"].local_state is ROLLBACK
    assert (message.body, message.tags, message.keys) == (b"commit", "TagA", ["k1", "k2"])
    assert message.msg_id == committed.msg_id == committed.transaction_id
    assert message.topic == TOPIC and message.queue == committed.queue
    assert message.properties["a"] == "1" and message.properties["PGROUP"] == producer.group
    assert (
        not {"TRAN_MSG", "REAL_TOPIC", "REAL_QID", "__transactionId__"} & message.properties.keys()
    )
    assert message.sys_flag & TRANSACTION_MASK == TRANSACTION_COMMIT
    assert asked == []


@checking
@pytest.mark.parametrize("decision", [COMMIT, ROLLBACK], ids=["commit", "rollback"])
@pytest.mark.parametrize("checker_decides", [False, True], ids=["unanswered", "answered"])
async def test_a_decision_later_than_the_check_back_decides_its_copy_once(
    cluster, name, decision, checker_decides
):
    """An executor slower than transactionTimeOut: the check-back has replaced the half by
    a copy, and its checks heard nothing, when the decision comes. The decision is the
    copy's: the transaction ends once, and no check-back asks about it again (it waited
    on an answer the producer group might no longer be there to give). Where the checker
    answers too, at the same moment, the first of the two decides."""
    asked: list[ReceivedMessage] = []

    def checker(message: ReceivedMessage) -> LocalTransactionState:
        asked.append(message)
        return decision if checker_decides and len(asked) >= 3 else UNKNOWN

    async def executor(message: Message, arg: object) -> LocalTransactionState:
        await eventually(lambda: len(asked) >= 3)  # copied, and copied again
        return decision

    async with consumer_and_producer(cluster, name, executor, checker) as (received, producer):
        result = await producer.send_in_transaction(Message(TOPIC, b"late", keys="o-9"))
        assert result.local_state is decision
        if decision is COMMIT:
            await eventually(lambda: len(received) == 1)
        await anyio.sleep(0.3)  # the oneway END lands
        await check_rounds(cluster, 1)
        asked_before = len(asked)
        await check_rounds(cluster, 3)
        await anyio.sleep(0.5)  # a round of the broker's own, and a delivery, if any
        assert len(asked) == asked_before  # decided: asked no more
    assert [m.body for m in received] == ([b"late"] if decision is COMMIT else [])


@checking
@pytest.mark.parametrize(
    ("local", "checked"), [("unknown", COMMIT), ("raises", ROLLBACK)], ids=["commit", "rollback"]
)
async def test_an_undecided_transaction_is_checked_back(cluster, name, local, checked):
    async def executor(message: Message, arg: object) -> LocalTransactionState:
        if local == "raises":
            raise RuntimeError("the local transaction failed to report")
        return UNKNOWN

    checker, asked = answer(checked)
    async with consumer_and_producer(cluster, name, executor, checker) as (received, producer):
        result = await producer.send_in_transaction(Message(TOPIC, b"order", keys="o-1"))
        assert result.local_state is UNKNOWN
        await eventually(lambda: asked)
        if checked is COMMIT:
            await eventually(lambda: len(received) == 1)
        await check_rounds(cluster, 3)
        await anyio.sleep(0.3)
    # a check round may ask again before the oneway answer lands, as RocketMQ's does
    message = asked[0]
    assert (message.topic, message.body, message.keys) == (TOPIC, b"order", ["o-1"])
    assert {m.msg_id for m in asked} == {result.msg_id}
    assert message.properties["TRANSACTION_CHECK_TIMES"] == "1"
    assert [m.body for m in received] == ([b"order"] if checked is COMMIT else [])


@patient
async def test_end_transaction_must_name_the_half_message_rightly(cluster, name):
    checker, _ = answer(UNKNOWN)
    async with (
        consuming(cluster, name("CG")) as received,
        TransactionProducer(
            name("PG"), cluster.namesrv_address, executor=undecided, checker=checker
        ) as producer,
    ):
        result = await producer.send_in_transaction(Message(TOPIC, b"order"))
        refused = [
            await end(producer, cluster, result, group="PG-other"),
            await end(producer, cluster, result, offset=result.queue_offset + 1),
            await end(producer, cluster, result, commit_log_offset=10**9),
        ]
        assert [reply.code for reply in refused] == [ResponseCode.SYSTEM_ERROR] * 3
        assert "producer group wrong" in refused[0].remark and "PG-other" in refused[0].remark
        assert "state table offset wrong" in refused[1].remark
        assert "Find prepared transaction message failed" in refused[2].remark
        odd = await end(producer, cluster, result, decision=5)
        assert odd.code == ResponseCode.INVALID_PARAMETER and "commitOrRollback" in odd.remark
        await anyio.sleep(0.3)
        assert received == []
        assert (await end(producer, cluster, result)).code == ResponseCode.SUCCESS
        await eventually(lambda: len(received) == 1)


@pytest.mark.rocketmq(transaction_check_interval=60_000, transaction_time_out=300)
async def test_a_commit_whose_store_fails_while_a_round_runs_is_checked_back_later(
    cluster, name, monkeypatch
):
    """A commit's message is refused by the store after a slow put, while a check-back
    round runs: the round stops before the half (its decision is being stored), so the
    failed decision leaves the half to the check-back, whose answer commits it. A round
    that passed it then would have left it settled with nothing stored."""
    checker, asked = answer(COMMIT)
    broker = cluster.broker
    put, entered, gate = broker.put, threading.Event(), threading.Event()

    async def slow_then_refused(message):  # the committed message's put, held, then failed
        if message.topic == TOPIC and not asked:
            entered.set()
            await anyio.to_thread.run_sync(gate.wait, 10)
            raise RequestRefused(ResponseCode.SYSTEM_ERROR, "the store failed (the test)")
        return await put(message)

    async with consumer_and_producer(cluster, name, undecided, checker) as (received, producer):
        result = await producer.send_in_transaction(Message(TOPIC, b"retried"))
        monkeypatch.setattr(broker, "put", slow_then_refused)
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(end, producer, cluster, result)
            try:
                assert await anyio.to_thread.run_sync(entered.wait, 10)
                await anyio.sleep(0.5)  # older than transactionTimeOut (300 ms)
                await check_rounds(cluster, 1)  # the only rounds: the interval is a minute
                half_offset = await anyio.to_thread.run_sync(in_broker, cluster, checked_up_to)
                assert half_offset <= result.queue_offset  # the round stopped before it
            finally:
                gate.set()
        await check_rounds(cluster, 1)
        await eventually(lambda: len(received) == 1)
    assert [m.body for m in received] == [b"retried"] and asked


@pytest.mark.rocketmq(reject_transaction_message=True)
async def test_a_broker_that_rejects_transactions_says_so(cluster, name):
    ran: list[Message] = []

    def executor(message: Message, arg: object) -> LocalTransactionState:
        ran.append(message)
        return COMMIT

    async with TransactionProducer(
        name("PG"), cluster.namesrv_address, executor=executor, checker=answer(UNKNOWN)[0]
    ) as producer:
        with pytest.raises(MQClientError, match="transaction message is forbidden"):
            await producer.send_in_transaction(Message(TOPIC, b"order"))
    assert ran == []


@pytest.mark.rocketmq(store="mmap", transaction_check_interval=200, transaction_time_out=60_000)
async def test_a_decision_counts_once_even_across_broker_restarts(cluster, name):
    checker, asked = answer(ROLLBACK)
    async with restart_proof_producer(cluster, name, checker) as producer:
        first = await producer.send_in_transaction(Message(TOPIC, b"first"))
        second = await producer.send_in_transaction(Message(TOPIC, b"second"))
        assert (await end(producer, cluster, second)).code == ResponseCode.SUCCESS
        assert (await end(producer, cluster, second)).code == ResponseCode.SUCCESS
        # the undecided first half stops the check-back: the second's decision is only
        # in the op topic when the broker restarts
        await check_rounds(cluster)
        await anyio.to_thread.run_sync(cluster.restart_broker)
        assert (await end(producer, cluster, second)).code == ResponseCode.SUCCESS
        assert (await end(producer, cluster, first)).code == ResponseCode.SUCCESS
        # now the check-back has passed both: below its offset, they count as decided
        await check_rounds(cluster)
        await anyio.to_thread.run_sync(cluster.restart_broker)
        assert (await end(producer, cluster, first)).code == ResponseCode.SUCCESS
        assert (await end(producer, cluster, second, decision=12)).code == ResponseCode.SUCCESS
        async with consuming(cluster, name("CG")) as received:
            await eventually(lambda: len(received) == 2)
            await check_rounds(cluster)
            await anyio.sleep(0.3)
    assert sorted(m.body for m in received) == [b"first", b"second"]
    assert asked == []


@pytest.mark.rocketmq(transaction_check_max=2, **CHECKING)
async def test_a_transaction_nobody_decides_is_moved_aside_after_the_last_check(cluster, name):
    checker, asked = answer(UNKNOWN)
    async with TransactionProducer(
        name("PG"), cluster.namesrv_address, executor=undecided, checker=checker
    ) as producer:
        result = await producer.send_in_transaction(Message(TOPIC, b"limbo"))
        await eventually(lambda: in_broker(cluster, queue_size, TRANS_CHECK_MAX_TIME_TOPIC) == 1)

    async def moved(cluster: EmbeddedCluster):
        got = await cluster.broker.store.get(TRANS_CHECK_MAX_TIME_TOPIC, 0, 0, 1)
        return decode_record(got.records[0])

    record = in_broker(cluster, moved)
    assert record.body == b"limbo" and record.properties["UNIQ_KEY"] == result.msg_id
    assert record.properties["REAL_TOPIC"] == TOPIC
    assert [m.properties["TRANSACTION_CHECK_TIMES"] for m in asked] == ["1", "2"]


@pytest.mark.rocketmq(transaction_check_max=2, **CHECKING)
@pytest.mark.parametrize("decision", [COMMIT, ROLLBACK], ids=["commit", "rollback"])
async def test_a_decision_after_the_check_back_gave_up_still_decides_once(cluster, name, decision):
    """A transaction left undecided for transactionCheckMax checks is moved aside; its
    producer's decision, when it comes at last (a Spark batch longer than the checks),
    still ends it, as Java's broker commits it, and a second one is ignored."""
    checker, asked = answer(UNKNOWN)
    codes = {COMMIT: TRANSACTION_COMMIT, ROLLBACK: TRANSACTION_ROLLBACK}
    async with consumer_and_producer(cluster, name, undecided, checker) as (received, producer):
        result = await producer.send_in_transaction(Message(TOPIC, b"patient"))
        await eventually(lambda: in_broker(cluster, queue_size, TRANS_CHECK_MAX_TIME_TOPIC) == 1)
        ops_before = in_broker(cluster, queue_size, TRANS_OP_HALF_TOPIC)
        other = ROLLBACK if decision is COMMIT else COMMIT
        for state in (decision, other):
            assert (await end(producer, cluster, result, codes[state])).code == ResponseCode.SUCCESS
        # the first decided it (its op record), the second found it decided
        assert in_broker(cluster, queue_size, TRANS_OP_HALF_TOPIC) == ops_before + 1
        if decision is COMMIT:
            await eventually(lambda: received)
        await check_rounds(cluster, 3)
        await anyio.sleep(0.3)
    assert [message.msg_id for message in received] == (
        [result.msg_id] if decision is COMMIT else []
    )
    assert len(asked) == 2


@pytest.mark.rocketmq(store="mmap", transaction_check_max=1, **MANUAL_ROUNDS)
async def test_a_transaction_given_up_on_is_decided_once_across_restarts(cluster, name):
    """What the check-back gave up on, and which late END decided it, is in
    TRANS_CHECK_MAX_TIME_TOPIC: after a restart the late END still decides it, and after
    another one a second END is still ignored."""
    checker, asked = answer(UNKNOWN)
    async with restart_proof_producer(cluster, name, checker) as producer:
        result = await given_up_half(cluster, producer, b"patient")
        await anyio.to_thread.run_sync(cluster.restart_broker)
        assert (await end(producer, cluster, result)).code == ResponseCode.SUCCESS
        await anyio.to_thread.run_sync(cluster.restart_broker)
        assert (await end(producer, cluster, result)).code == ResponseCode.SUCCESS  # ignored
        received = await delivered(cluster, name, rounds=2)
    assert [message.msg_id for message in received] == [result.msg_id]
    assert in_broker(cluster, queue_size, TRANS_CHECK_MAX_TIME_TOPIC) == 2  # + the decision
    assert len(asked) == 1


@pytest.mark.rocketmq(store="mmap", transaction_check_max=1, **MANUAL_ROUNDS)
async def test_a_late_decision_whose_op_is_refused_still_counts_after_a_restart(cluster, name):
    """The late END's commit is stored, its op record refused: what says the transaction
    is decided is written first, so a restart does not let a second END commit again."""
    checker, _ = answer(UNKNOWN)
    async with restart_proof_producer(cluster, name, checker) as producer:
        result = await given_up_half(cluster, producer, b"patient")

        async def refuse_one_op(cluster: EmbeddedCluster) -> None:
            broker = cluster.broker
            put = broker.put

            async def refusing(message):
                if message.topic != TRANS_OP_HALF_TOPIC:
                    return await put(message)
                del broker.put  # the broker's own again
                raise RequestRefused(ResponseCode.SYSTEM_ERROR, "injected: op refused")

            broker.put = refusing

        in_broker(cluster, refuse_one_op)
        assert (await end(producer, cluster, result)).code == ResponseCode.SYSTEM_ERROR
        await anyio.to_thread.run_sync(cluster.restart_broker)
        assert (await end(producer, cluster, result)).code == ResponseCode.SUCCESS
        received = await delivered(cluster, name, rounds=2)
    assert [message.msg_id for message in received] == [result.msg_id]


@pytest.mark.rocketmq(transaction_check_max=2, **CHECKING)
async def test_a_half_asking_for_a_longer_immunity_does_not_hold_back_the_halves_after_it(
    cluster, name
):
    """CHECK_IMMUNITY_TIME_IN_SECONDS: the check-back leaves such a half unasked until
    then (each round appends it again, no check counted, or transactionCheckMax=2 would
    discard it), and asks about the halves sent after it meanwhile."""
    asked: list[tuple[float, ReceivedMessage]] = []

    def checker(message: ReceivedMessage) -> LocalTransactionState:
        asked.append((time.monotonic(), message))
        return COMMIT

    async with consumer_and_producer(cluster, name, undecided, checker) as (received, producer):
        sent_at = time.monotonic()
        immune = await producer.send_in_transaction(
            Message(TOPIC, b"immune", properties={CHECK_IMMUNITY: "4"})
        )
        later = await producer.send_in_transaction(Message(TOPIC, b"later"))
        await eventually(lambda: received)
        assert {message.msg_id for _, message in asked} == {later.msg_id}
        await eventually(lambda: len(received) == 2)
        await check_rounds(cluster, 3)
        await anyio.sleep(0.3)
    assert [message.body for message in received] == [b"later", b"immune"]
    [(first_asked, message), *_] = [(at, m) for at, m in asked if m.msg_id == immune.msg_id]
    assert first_asked - sent_at >= 3.9  # the broker's clock counts whole milliseconds
    assert message.properties["TRANSACTION_CHECK_TIMES"] == "1"


@pytest.mark.rocketmq(store="mmap", **MANUAL_ROUNDS)
async def test_a_decision_after_a_restart_decides_the_copy_its_half_waits_in(cluster, name):
    """The check-back has copied the half (here: an immune one, appended again each
    round) and the broker restarts: the producer's late decision still ends the
    transaction, where it was once ignored until the next check asked again."""
    checker, asked = answer(UNKNOWN)
    async with restart_proof_producer(cluster, name, checker) as producer:
        result = await copied_immune_half(cluster, producer, b"late", 60, rounds=2)
        await anyio.to_thread.run_sync(cluster.restart_broker)
        assert (await end(producer, cluster, result)).code == ResponseCode.SUCCESS
        async with consuming(cluster, name("CG")) as received:
            await eventually(lambda: len(received) == 1)
            await check_rounds(cluster, 3)
            await anyio.sleep(0.3)
    assert [message.msg_id for message in received] == [result.msg_id]
    assert asked == []


@pytest.mark.rocketmq(store="mmap", **MANUAL_ROUNDS)
@pytest.mark.parametrize("decided_by", ["check-back", "late END"])
async def test_a_half_offset_persisted_before_its_copies_decides_once(cluster, name, decided_by):
    """The check-back's half offset is persisted every few seconds: a crash can restart
    the broker with it below copies already made (a promoted slave's too). The copies
    read at start stand for the halves they replaced: the transaction is decided once,
    by its latest copy, not once per copy the round meets again."""
    checker, asked = answer(COMMIT if decided_by == "check-back" else UNKNOWN)
    async with restart_proof_producer(cluster, name, checker) as producer:
        result = await copied_immune_half(cluster, producer, b"once", 2, rounds=3)
        await anyio.to_thread.run_sync(cluster.stop_broker)
        rewind_half_offset(cluster, result.queue_offset)
        await anyio.to_thread.run_sync(cluster.start_broker)
        await anyio.sleep(1.7)  # the immunity is over
        if decided_by == "late END":
            assert (await end(producer, cluster, result)).code == ResponseCode.SUCCESS
        async with consuming(cluster, name("CG")) as received:
            await check_rounds(cluster, 3)
            await eventually(lambda: received)
            await check_rounds(cluster, 3)
            await anyio.sleep(0.3)
    assert [message.msg_id for message in received] == [result.msg_id]
    # one chain of copies: each check counted once more (rounds may ask again before the
    # oneway answer lands); each copy met again would have started a chain of its own
    # (the producer answers checks at once: its checker sees them in any order)
    checks = sorted(int(message.properties["TRANSACTION_CHECK_TIMES"]) for message in asked)
    assert checks == list(range(1, len(checks) + 1))
    assert bool(checks) is (decided_by == "check-back")


@pytest.mark.rocketmq(store="mmap", **MANUAL_ROUNDS)
async def test_a_second_decision_after_a_restart_whose_half_offset_lags_is_ignored(cluster, name):
    """Decided at its latest copy before the broker stopped; after a restart whose half
    offset lags the copies, a second END naming the first half must not commit again."""
    checker, asked = answer(UNKNOWN)
    async with restart_proof_producer(cluster, name, checker) as producer:
        result = await copied_immune_half(cluster, producer, b"once", 60, rounds=3)
        assert (await end(producer, cluster, result)).code == ResponseCode.SUCCESS
        await anyio.to_thread.run_sync(cluster.stop_broker)
        rewind_half_offset(cluster, result.queue_offset)
        await anyio.to_thread.run_sync(cluster.start_broker)
        assert (await end(producer, cluster, result)).code == ResponseCode.SUCCESS
        received = await delivered(cluster, name, rounds=3)
    assert [message.msg_id for message in received] == [result.msg_id]
    assert asked == []


@pytest.mark.rocketmq(transaction_check_max=2, **CHECKING)
async def test_a_late_decision_that_fails_to_read_its_half_leaves_it_to_the_next(cluster, name):
    """The END deciding a transaction the check-back gave up on cannot read the half it
    decides (the store fails once): nothing is stored, and the next END decides it."""
    checker, _ = answer(UNKNOWN)
    async with consumer_and_producer(cluster, name, undecided, checker) as (received, producer):
        result = await producer.send_in_transaction(Message(TOPIC, b"patient"))
        await eventually(lambda: in_broker(cluster, queue_size, TRANS_CHECK_MAX_TIME_TOPIC) == 1)

        async def fail_one_read(cluster: EmbeddedCluster) -> None:
            store = cluster.broker.store
            own = store.get

            async def get(topic, *args, **kwargs):
                if topic != TRANS_HALF_TOPIC:  # the delay levels and POP revive read too
                    return await own(topic, *args, **kwargs)
                del store.get  # the store's own again
                raise OSError("injected read failure")

            store.get = get

        in_broker(cluster, fail_one_read)
        assert (await end(producer, cluster, result)).code == ResponseCode.SYSTEM_ERROR
        assert (await end(producer, cluster, result)).code == ResponseCode.SUCCESS
        await eventually(lambda: received)
        await check_rounds(cluster, 2)
        await anyio.sleep(0.3)
    assert [message.msg_id for message in received] == [result.msg_id]


@patient
async def test_ends_are_refused_while_the_transactions_state_cannot_be_read_back(cluster, name):
    """The copies and the transactions given up on are read back after a start; while
    that read fails, an END is refused (SYSTEM_ERROR: the producer tries again), since
    with part of that state a transaction could be decided twice. Once a later try
    reads it, the END decides."""
    checker, _ = answer(UNKNOWN)
    async with restart_proof_producer(cluster, name, checker) as producer:
        result = await producer.send_in_transaction(Message(TOPIC, b"waits"))

        async def read_back_failing_once(cluster: EmbeddedCluster) -> bool:
            store = cluster.broker.store

            async def get(topic, *args, **kwargs):
                del store.get  # the store's own again
                raise OSError("injected read failure")

            store.get = get
            decisions = decisions_of(cluster.broker)
            await decisions.read_back_now()
            return decisions.read_back_ok

        assert in_broker(cluster, read_back_failing_once) is False
        refused = await end(producer, cluster, result)
        assert refused.code == ResponseCode.SYSTEM_ERROR
        assert "could not read its transactions' state back" in (refused.remark or "")

        async def read_back(cluster: EmbeddedCluster) -> bool:
            await decisions_of(cluster.broker).read_back_now()
            return decisions_of(cluster.broker).read_back_ok

        assert in_broker(cluster, read_back) is True
        assert (await end(producer, cluster, result)).code == ResponseCode.SUCCESS
        received = await delivered(cluster, name, rounds=1)
    assert [message.msg_id for message in received] == [result.msg_id]


def rewind_half_offset(cluster: EmbeddedCluster, offset: int) -> None:
    """Set the check-back's persisted half offset back to ``offset`` (a stopped broker's)."""
    path = cluster.directory / "broker" / "config" / "consumerOffset.json"
    key = re.escape(f'"{TRANS_HALF_TOPIC}@CID_RMQ_SYS_TRANS"')
    text, count = re.subn(rf"({key}\s*:\s*\{{\s*0\s*:\s*)\d+", rf"\g<1>{offset}", path.read_text())
    assert count == 1, f"no offset of the check-back's in {path}"
    path.write_text(text)


@pytest.mark.rocketmq(store="mmap", **CHECKING)
async def test_a_broker_restart_between_half_and_decision_still_checks_back(cluster, name):
    restarted = False
    asked: list[ReceivedMessage] = []

    def checker(message: ReceivedMessage) -> LocalTransactionState:
        asked.append(message)
        return COMMIT if restarted else UNKNOWN

    async with restart_proof_producer(cluster, name, checker) as producer:
        result = await producer.send_in_transaction(Message(TOPIC, b"survivor"))
        await anyio.to_thread.run_sync(cluster.restart_broker)
        restarted = True
        async with consuming(cluster, name("CG")) as received:
            await eventually(lambda: len(received) == 1)
            await check_rounds(cluster, 3)
            await anyio.sleep(0.3)
    assert [m.msg_id for m in received] == [result.msg_id]
    assert asked[-1].msg_id == result.msg_id


@patient
def test_the_blocking_transaction_producer(cluster, name):
    threads: list[str] = []

    def executor(message: Message, arg: str) -> LocalTransactionState:
        threads.append(threading.current_thread().name)
        return COMMIT if arg == "yes" else ROLLBACK

    received: list[bytes] = []
    consumer = sync.PushConsumer(
        name("CG"),
        cluster.namesrv_address,
        listener=lambda messages: received.extend(m.body for m in messages),
        consume_from="first",
    )
    consumer.subscribe(TOPIC)
    with (
        consumer,
        sync.TransactionProducer(
            name("PG"), cluster.namesrv_address, executor=executor, checker=answer(UNKNOWN)[0]
        ) as producer,
    ):
        assert producer.send_in_transaction(Message(TOPIC, b"yes"), "yes").local_state is COMMIT
        assert producer.send_in_transaction(Message(TOPIC, b"no"), "no").local_state is ROLLBACK
        deadline = time.monotonic() + 10
        while not received and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)
    assert received == [b"yes"]
    assert sync.LOOP_THREAD_NAME not in threads, "a plain executor ran on the event loop"


@checking
async def test_a_producer_killed_before_its_decision_is_replaced_by_its_group(
    cluster, name, tmp_path
):
    group, ready = name("PG"), tmp_path / "half-stored"
    log = tmp_path / "producer.log"
    with log.open("ab") as output:
        process = subprocess.Popen(
            [sys.executable, str(HELPER), cluster.namesrv_address, group, TOPIC, "orphan", ready],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        with anyio.move_on_after(20):
            while not ready.exists() and process.poll() is None:
                await anyio.sleep(0.02)
    finally:
        process.kill()
        process.wait()
    if process.returncode != -signal.SIGKILL or not ready.exists():
        pytest.fail(f"the producer process stored no half message:\n{log.read_text()}")
    checker, asked = answer(COMMIT)
    async with (
        consuming(cluster, name("CG")) as received,
        TransactionProducer(group, cluster.namesrv_address, executor=undecided, checker=checker),
    ):
        await eventually(lambda: len(received) == 1)
        await check_rounds(cluster, 3)
        await anyio.sleep(0.3)
    assert [m.body for m in received] == [b"orphan"]
    assert [m.body for m in asked] == [b"orphan"]


@patient
async def test_a_confirmed_decision_is_visible_when_it_returns(cluster, name):
    checker, _ = answer(UNKNOWN)
    async with TransactionProducer(
        name("PG"), cluster.namesrv_address, executor=undecided, checker=checker
    ) as producer:
        kept = await producer.send_in_transaction(Message(TOPIC, b"kept"))
        dropped = await producer.send_in_transaction(Message(TOPIC, b"dropped"))
        queues = range(4)
        before = [cluster.broker.store.max_offset(TOPIC, queue) for queue in queues]
        await producer.end_transaction(kept, COMMIT, confirm=True)
        await producer.end_transaction(dropped, ROLLBACK, confirm=True)
        after = [cluster.broker.store.max_offset(TOPIC, queue) for queue in queues]
        assert sum(after) == sum(before) + 1  # no waiting: it is stored already
        assert after[kept.queue.queue_id] == before[kept.queue.queue_id] + 1


@checking
async def test_a_plain_producer_asked_about_a_transaction_says_it_cannot_answer(
    cluster, name, caplog
):
    group = name("PG")
    checker, asked = answer(COMMIT)
    async with TransactionProducer(
        group, cluster.namesrv_address, executor=undecided, checker=checker
    ) as producer:
        await producer.send_in_transaction(Message(TOPIC, b"orphan"))
    # the only producer of the group left is a plain one (known to the broker once it
    # sends): the broker asks it
    async with Producer(group, cluster.namesrv_address) as plain:
        await plain.send(Message(TOPIC, b"plain"))
        await eventually(lambda: "sends no transactions" in caplog.text)
        await check_rounds(cluster, 1)  # and asking it again does no harm
    assert asked == []
    warnings = [r for r in caplog.records if "sends no transactions" in r.getMessage()]
    assert warnings and f"producer group {group!r}" in warnings[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info], "a check failed with a traceback"


@pytest.mark.rocketmq(store="mmap", transaction_check_max=1, **MANUAL_ROUNDS)
@pytest.mark.parametrize("restart_between", [False, True], ids=["no-restart", "restart-between"])
async def test_a_transaction_given_up_before_a_lagging_restart_is_decided_once(
    cluster, name, restart_between
):
    """Given up on at its copy, then the broker restarts with its half offset below that
    copy (a crash within the offsets' flush, a promoted slave): the first END claims the
    copy the ordinary way; it is the late decision all the same, so a second END, after
    another such restart or not, is ignored."""
    checker, _ = answer(UNKNOWN)
    async with restart_proof_producer(cluster, name, checker) as producer:
        result = await given_up_half(cluster, producer, b"patient")
        await anyio.to_thread.run_sync(cluster.stop_broker)
        rewind_half_offset(cluster, result.queue_offset)
        await anyio.to_thread.run_sync(cluster.start_broker)
        assert (await end(producer, cluster, result)).code == ResponseCode.SUCCESS
        if restart_between:
            await anyio.to_thread.run_sync(cluster.stop_broker)
            rewind_half_offset(cluster, result.queue_offset)
            await anyio.to_thread.run_sync(cluster.start_broker)
        assert (await end(producer, cluster, result)).code == ResponseCode.SUCCESS  # ignored
        received = await delivered(cluster, name, rounds=2)
    assert [message.msg_id for message in received] == [result.msg_id]
