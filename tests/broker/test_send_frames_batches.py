"""Batches in runs of sends (send_frames.py; _send_fast.c's SEND_BATCH_MESSAGE frames):
a usual batch is read where it was received, its records made and put as the general
path makes and puts them, and answered with every record's message id. Held here to the
general path's answers, stored bytes and counts, for batches of every shape, written one
at a time and all at once, on an ASYNC and a SYNC master."""

from __future__ import annotations

import struct

import anyio
import pytest

from rocketmq_core.broker.processors import send_frames
from rocketmq_core.protocol.codec import FrameDecoder
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.compression import CompressionType, compress
from rocketmq_core.protocol.message import TRANSACTION_PREPARED, BatchItem, encode_batch
from rocketmq_core.protocol.message import encode_properties as props

from .test_send_fast_path import send
from .test_send_frames import (
    codes,
    codes_of_answers,
    counted_both_ways,
    frames_against_general,
    sync_master_told_acks,
    write_requests,
)

pytestmark = pytest.mark.anyio

MOST = 8  # maxBatchMessageCount of these brokers


def batch(
    records: int = 4,
    *,
    level: str | None = props({"TAGS": "Level", "KEYS": "k"}),
    own: dict[str, str] | None = None,
    body: bytes = b"record",
    code: int = RequestCode.SEND_BATCH_MESSAGE,
    **options,
) -> RemotingCommand:
    """A SEND_BATCH_MESSAGE of ``records`` records, each with properties ``own`` (and a
    UNIQ_KEY of its own), batch-level properties ``level``."""
    items = [
        BatchItem(n, body + b" %d" % n, props({**(own or {}), "UNIQ_KEY": f"B{n:04X}"}).encode())
        for n in range(records)
    ]
    return send(
        code=code,
        body=encode_batch(items),
        properties=level,
        batch=True,
        **options,
    )


def usual_batches() -> list[RemotingCommand]:
    """Batches the runs take, once their queue had its first put."""
    return [
        batch(queue_id=0),
        batch(1, queue_id=1),
        batch(MOST, queue_id=2, body=b"x" * 1000),
        batch(queue_id=3, level=None),
        batch(queue_id=0, level=props({"TAGS": "Level", "WAIT": "true"}), own={"TAGS": "Own"}),
        batch(queue_id=1, level=props({"CLUSTER": "elsewhere"})),
        batch(topic="Tagged", queue_id=1, own={"TAGS": "a||b"}),
        batch(queue_id=2, code=RequestCode.SEND_MESSAGE),  # by its batch field, as Java reads it
        batch(queue_id=3, code=RequestCode.SEND_MESSAGE_V2, change={"m": "1"}),  # the C++ form
        # the flag alone, no hook's marker: the store's usual append declines it (a
        # prepared record goes to no consume queue), the general path puts it
        batch(queue_id=0, sys_flag=TRANSACTION_PREPARED),
    ]


def left_batches() -> list[RemotingCommand]:
    """Batches the runs leave to the general path (each refused or put there)."""
    truncated = batch()
    truncated.body = truncated.body[:-3]
    single = batch(1, queue_id=2)
    single.ext_fields["m"] = "false"  # the batch code, one message: a single send's header
    single.body = b"batch code, one message"
    compressed = batch()
    compressed.body = compress(compressed.body, CompressionType.ZLIB)
    compressed.ext_fields["f"] = str(CompressionType.ZLIB.sys_flag)
    return [
        batch(MOST + 1),  # more than maxBatchMessageCount: refused
        truncated,  # refused: a record cut short
        batch(own={"DELAY": "1"}),  # a put hook's (delayed records)
        batch(level=props({"DELAY": "1"})),  # the same, from the batch level
        batch(queue_id=-1),  # a queue drawn at random
        batch(topic="ReadOnly"),  # refused
        batch(topic="%RETRY%CG"),  # refused: no batch to a retry topic
        single,
        compressed,  # inflated and put by the general path
        batch(MOST, body=b"x" * 600_000),  # over maxMessageSize: refused
        batch(0),  # no records: refused
        batch(change={"m": "True"}),  # a spelling the codec reads as true
        batch(change={"m": None}),  # the batch code, no batch field: a single send
    ]


def frame_codes(answers) -> list[int]:
    return [FrameDecoder().feed(answer)[0].code for answer in answers]


@pytest.mark.parametrize("pipelined", [False, True], ids=["one-at-a-time", "at-once"])
async def test_batches_answer_and_store_as_the_general_path(
    tmp_path,
    plugin_host,
    monkeypatch,
    runs,
    pipelined,
):
    def requests():
        warm = [batch(1, queue_id=n) for n in range(4)]  # each queue's first put
        tagged = batch(1, topic="Tagged", queue_id=1)
        return [*warm, tagged, *usual_batches(), send(body=b"single"), *usual_batches()]

    answers = await frames_against_general(
        tmp_path, plugin_host, monkeypatch, requests, pipelined=pipelined,
        max_batch_message_count=MOST,
    )  # fmt: skip
    assert set(codes(answers)) == {ResponseCode.SUCCESS}
    ids = [FrameDecoder().feed(a)[0].ext_fields["msgId"].split(",") for a in answers[5:15]]
    assert [len(batch_ids) for batch_ids in ids] == [4, 1, MOST, 4, 4, 4, 4, 4, 4, 4]
    served = 2 * (len(usual_batches()) - 1) + 1  # but the prepared ones
    assert runs.served == served if pipelined is False else 0 < runs.served <= served


async def test_batches_the_runs_leave_are_the_general_paths(
    tmp_path,
    plugin_host,
    monkeypatch,
    runs,
):
    def requests():
        warm = [batch(1, queue_id=n) for n in range(4)]
        return [*warm, *[r for left in left_batches() for r in (left, batch(queue_id=3))]]

    answers = await frames_against_general(
        tmp_path, plugin_host, monkeypatch, requests, max_batch_message_count=MOST
    )
    got = codes(answers)[4:]
    assert got[1::2] == [ResponseCode.SUCCESS] * len(left_batches())  # the usual ones between
    assert got[0::2] == [
        ResponseCode.MESSAGE_ILLEGAL,
        ResponseCode.MESSAGE_ILLEGAL,
        ResponseCode.SUCCESS,
        ResponseCode.SUCCESS,
        ResponseCode.SUCCESS,
        ResponseCode.NO_PERMISSION,
        ResponseCode.MESSAGE_ILLEGAL,
        ResponseCode.SUCCESS,
        ResponseCode.SUCCESS,
        ResponseCode.MESSAGE_ILLEGAL,
        ResponseCode.MESSAGE_ILLEGAL,
        ResponseCode.SUCCESS,
        ResponseCode.SUCCESS,
    ]
    assert runs.served == len(left_batches())  # the usual batch after each


async def test_stored_batches_are_counted_as_the_general_path_counts_them(
    tmp_path,
    plugin_host,
    monkeypatch,
    runs,
):
    def writes():
        warm = [batch(1, queue_id=n) for n in range(4)]
        return [warm, [batch(n % MOST + 1, queue_id=n % 4) for n in range(20)]]

    counted = await counted_both_ways(
        tmp_path, plugin_host, monkeypatch, writes, max_batch_message_count=MOST
    )
    assert counted[True][1] == 4 + sum(n % MOST + 1 for n in range(20))
    assert runs.served > 0


@pytest.mark.parametrize("acks", [True, False], ids=["acked", "never-acked"])
async def test_a_sync_masters_batches_answer_once_the_slave_has_them(
    tmp_path,
    plugin_host,
    monkeypatch,
    runs,
    acks,
):
    no_wait = props({"TAGS": "Level", "WAIT": "false"})

    def requests():
        warm = [batch(1, queue_id=n) for n in range(4)]
        usual = [batch(n % 5 + 1, queue_id=n % 4) for n in range(12)]
        return [*warm, *usual, batch(queue_id=1, level=no_wait)]  # answered at once

    answers = await frames_against_general(
        tmp_path, plugin_host, monkeypatch, requests, pipelined=True, slave=True,
        slave_acks=acks, broker_role="SYNC_MASTER", slave_timeout=300,
    )  # fmt: skip
    expected = ResponseCode.SUCCESS if acks else ResponseCode.FLUSH_SLAVE_TIMEOUT
    assert set(codes(answers[:-1])) == {expected}
    assert codes(answers)[-1] == ResponseCode.SUCCESS
    assert 0 < runs.served <= 12  # written at once: a read may end inside a frame


def commit_log_offset(record: bytes) -> int:
    """A stored record's own CommitLog offset (its PHYSICALOFFSET field)."""
    return struct.unpack_from(">q", record, 28)[0]


@pytest.mark.parametrize("frames", [True, False], ids=["runs", "general"])
async def test_a_slave_that_acks_up_to_a_send_between_batches(
    tmp_path, plugin_host, monkeypatch, runs, frames
):
    """A run's answers on a SYNC_MASTER, each as far as the slave acked its own records:
    a send before a batch ends where the batch's first record begins."""
    monkeypatch.setattr(send_frames, "ENABLED", frames)
    async with sync_master_told_acks(tmp_path, plugin_host) as (broker, slave, peer, buffered):
        requests = [batch(3), send(body=b"between"), batch(3), send(body=b"last")]
        await write_requests(peer, requests)
        with anyio.fail_after(10):
            while broker.store.max_offset("Orders", 0) < 1 + 8:
                await anyio.sleep(0.01)
        second_batch = await broker.store.get("Orders", 0, 1 + 4, 1)
        await slave.report(commit_log_offset(second_batch.records[0]))  # up to "between"
        answers = await codes_of_answers(peer, buffered, len(requests))
    assert answers == [ResponseCode.SUCCESS] * 2 + [ResponseCode.FLUSH_SLAVE_TIMEOUT] * 2
    assert (runs.served == 4) is frames
