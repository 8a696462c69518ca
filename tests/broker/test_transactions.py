"""The broker's side of transactions: the half-message hook, END_TRANSACTION over TCP
(the op record, a delayed commit) and the record a check-back carries."""

from __future__ import annotations

from types import SimpleNamespace

import anyio
import pytest

from rocketmq_core.broker.config import BrokerConfig
from rocketmq_core.broker.transaction_check import _asked_immunity_ms, encoded_record
from rocketmq_core.broker.transactions import HalfMessageHook
from rocketmq_core.errors import RequestRefused
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.constants import SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rocketmq_core.protocol.headers import (
    SEND_V2_NAMES,
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
)
from rocketmq_core.protocol.message import (
    MULTI_TAGS,
    TRANSACTION_COMMIT,
    TRANSACTION_MASK,
    TRANSACTION_PREPARED,
    TRANSACTION_ROLLBACK,
    decode_offset_msg_id,
    decode_record,
    encode_properties,
    pack_host,
    parse_properties,
)
from rocketmq_core.store.api import MessageToStore
from tests.missing import missing

pytestmark = pytest.mark.anyio

HALF = {"TRAN_MSG": "true", "PGROUP": "PG", "UNIQ_KEY": "U1", "TAGS": "A"}


def hook(**settings) -> HalfMessageHook:
    return HalfMessageHook(SimpleNamespace(config=BrokerConfig(**settings)))


def message(properties: dict[str, str], **fields) -> MessageToStore:
    return MessageToStore("Orders", 3, b"x", encode_properties(properties).encode(), **fields)


def test_the_hook_leaves_other_messages_alone():
    for other in [
        message({"TAGS": "A", "UNIQ_KEY": "U1"}),
        message({**HALF, "TRAN_MSG": "false"}),
        message({**HALF, "DELAY": "3"}, reconsume_times=1),  # a retry: delayed, not a half
    ]:
        assert hook()(other) is other


def test_the_hook_parks_a_transaction_message_in_the_half_topic():
    half = hook()(message(HALF, sys_flag=TRANSACTION_PREPARED | MULTI_TAGS))
    assert (half.topic, half.queue_id, half.sys_flag) == (TRANS_HALF_TOPIC, 0, MULTI_TAGS)
    properties = parse_properties(half.properties.decode())
    assert properties == {
        **HALF,
        "REAL_TOPIC": "Orders",
        "REAL_QID": "3",
        "__transactionId__": "U1",
    }


def test_the_hook_strips_what_only_the_check_back_may_set():
    """A producer's half may not pose as a check-back's copy, a half moved aside or a
    late decision: the check-back reads these properties back at start."""
    internal = {
        "TRAN_PREPARED_QUEUE_OFFSET": "0",
        "TRAN_GIVEN_UP_HALF_OFFSET": "0",
        "TRAN_DECIDED_LATE": "commit",
    }
    half = hook()(message({**HALF, **internal}))
    assert not internal.keys() & parse_properties(half.properties.decode()).keys()


@pytest.mark.parametrize(
    ("asked", "ms"), [(None, 0), ("x", 0), ("-5", -5000), ("60", 60_000), ("999999", 3_600_000)]
)
def test_the_immunity_asked_for_is_honoured_up_to_an_hour(asked, ms):
    """Each round appends an immune half again, no check counted: an hour at most (what
    Apache's proxy lets a 5.x producer ask for), not until the files expire."""
    properties = {} if asked is None else {"CHECK_IMMUNITY_TIME_IN_SECONDS": asked}
    assert _asked_immunity_ms(SimpleNamespace(properties=properties)) == ms


def test_a_broker_rejecting_transactions_refuses_the_half_and_says_why():
    with pytest.raises(RequestRefused) as refused:
        hook(reject_transaction_message=True)(message(HALF))
    assert refused.value.code == ResponseCode.NO_PERMISSION
    assert "rejectTransactionMessage" in str(refused.value)


def test_a_check_back_record_decodes_as_it_was_built():
    copy = SimpleNamespace(
        topic="Orders",
        queue_id=2,
        body=b"body",
        properties={"UNIQ_KEY": "U1"},
        flag=7,
        queue_offset=5,
        commit_log_offset=1234,
        sys_flag=MULTI_TAGS,
        born_timestamp=1,
        born_host=pack_host("::1", 4321),
        store_timestamp=2,
        store_host=pack_host("127.0.0.1", 10911),
        reconsume_times=3,
        prepared_transaction_offset=0,
    )
    stored = decode_record(encoded_record(copy), check_crc=True)
    assert (stored.topic, stored.queue_id, stored.body, stored.flag) == ("Orders", 2, b"body", 7)
    assert (stored.queue_offset, stored.commit_log_offset, stored.reconsume_times) == (5, 1234, 3)
    assert stored.born_host == copy.born_host and stored.properties == copy.properties


def half_request(**properties: str) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="PG",
        topic="Orders",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=0,
        sys_flag=TRANSACTION_PREPARED,
        born_timestamp=1700000000000,
        flag=0,
        properties=encode_properties({**HALF, **properties}),
    )
    return RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2, header.to_ext_fields(SEND_V2_NAMES), b"hello"
    )


def end_request(sent: RemotingCommand, decision: int) -> RemotingCommand:
    header = EndTransactionRequestHeader(
        producer_group="PG",
        tran_state_table_offset=int(sent.ext_fields["queueOffset"]),
        commit_log_offset=decode_offset_msg_id(sent.ext_fields["msgId"])[1],
        commit_or_rollback=decision,
        msg_id="U1",
    )
    return RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext_fields())


async def first_record(broker, topic: str, queue_id: int = 0):
    result = await broker.store.get(topic, queue_id, 0, 1)
    return decode_record(result.records[0]) if result.records else None


async def test_a_rollback_writes_only_the_op_record_once(broker, client):
    sent = await client.invoke(broker.address, half_request())
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    for _ in range(2):
        ended = await client.invoke(broker.address, end_request(sent, TRANSACTION_ROLLBACK))
        assert ended.code == ResponseCode.SUCCESS, ended.remark
    assert broker.store.max_offset("Orders", 0) == 0
    assert broker.store.max_offset(TRANS_OP_HALF_TOPIC, 0) == 1
    op = await first_record(broker, TRANS_OP_HALF_TOPIC)
    assert (op.body, op.tags) == (sent.ext_fields["queueOffset"].encode(), "d")


async def test_a_committed_message_with_a_delay_level_is_delayed(broker, client):
    if "delay_levels" not in broker.services:
        missing("the delay_scheduler plugin (requirements.txt) is not installed")
    sent = await client.invoke(broker.address, half_request(DELAY="1"))
    ended = await client.invoke(broker.address, end_request(sent, TRANSACTION_COMMIT))
    assert ended.code == ResponseCode.SUCCESS, ended.remark
    parked = await first_record(broker, SCHEDULE_TOPIC)
    assert parked is not None and parked.properties["REAL_TOPIC"] == "Orders"
    assert broker.store.max_offset("Orders", 0) == 0
    with anyio.fail_after(5):
        while (delivered := await first_record(broker, "Orders")) is None:
            await anyio.sleep(0.05)
    assert (delivered.body, delivered.properties["UNIQ_KEY"]) == (b"hello", "U1")
    assert delivered.sys_flag & TRANSACTION_MASK == TRANSACTION_COMMIT
    assert "TRAN_MSG" not in delivered.properties
