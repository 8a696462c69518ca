"""maxMessageSize on the wire: the body as the producer gave it (inflated when it came
compressed; a batch's whole body) must fit, whatever the compressed size."""

from __future__ import annotations

import os
import random
import zlib

import pytest
import zstandard

from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.compression import CompressionType
from rocketmq_core.protocol.headers import SEND_V2_NAMES, SendMessageRequestHeader
from rocketmq_core.protocol.message import COMPRESSED, BatchItem, decode_record, encode_batch

from .wire import send_request

pytestmark = pytest.mark.anyio
LIMIT = 4 * 1024 * 1024  # the default maxMessageSize
ZLIB = CompressionType.ZLIB.sys_flag


def compressed_send(topic, body, sys_flag=ZLIB):
    request = send_request(topic=topic, body=body)
    request.ext_fields[SEND_V2_NAMES["sys_flag"]] = str(sys_flag)
    return request


def batch_send(topic, body, sys_flag=0):
    header = SendMessageRequestHeader(
        producer_group="PG",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=0,
        sys_flag=sys_flag,
        born_timestamp=1700000000000,
        flag=0,
        properties="",
        batch=True,
    )
    fields = header.to_ext_fields(SEND_V2_NAMES)
    return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, fields, body)


async def stored(broker, topic, offset=0):
    result = await broker.store.get(topic, 0, offset, 1)
    (record,) = result.records
    return decode_record(bytes(record))


def nothing_stored(broker, topic):
    return broker.store.max_offset(topic, 0) <= 0


async def test_five_mib_of_zeros_sent_compressed_is_refused(broker, client):
    zeros = zlib.compress(bytes(5 * 1024 * 1024))
    assert len(zeros) < 10_000  # what a size check after compression let through
    reply = await client.invoke(broker.address, compressed_send("Zeros", zeros))
    assert reply.code == ResponseCode.MESSAGE_ILLEGAL
    assert "is 5242880 bytes (inflated); maxMessageSize is 4194304" in reply.remark
    assert nothing_stored(broker, "Zeros")


async def test_zstd_bodies_are_measured_inflated_too(broker, client):
    zeros = zstandard.ZstdCompressor().compress(bytes(LIMIT + 1))
    request = compressed_send("ZstdZeros", zeros, CompressionType.ZSTD.sys_flag)
    reply = await client.invoke(broker.address, request)
    assert reply.code == ResponseCode.MESSAGE_ILLEGAL
    assert f"is {LIMIT + 1} bytes (inflated)" in reply.remark


async def test_a_compression_bomb_is_refused_without_inflating_it_all(broker, client):
    bomb = zlib.compress(bytes(64 * 1024 * 1024), 9)
    reply = await client.invoke(broker.address, compressed_send("Bomb", bomb))
    assert reply.code == ResponseCode.MESSAGE_ILLEGAL
    assert f"is more than {2 * LIMIT} bytes (inflated)" in reply.remark


async def test_an_uncompressed_body_over_the_limit_is_refused(broker, client):
    reply = await client.invoke(broker.address, send_request("Big", body=bytes(LIMIT + 1)))
    assert reply.code == ResponseCode.MESSAGE_ILLEGAL
    assert f"the message body is {LIMIT + 1} bytes; maxMessageSize is {LIMIT}" in reply.remark
    exactly = await client.invoke(broker.address, send_request("Big", body=bytes(LIMIT)))
    assert exactly.code == ResponseCode.SUCCESS, exactly.remark


async def test_random_body_that_zlib_made_bigger_than_the_limit_is_stored_raw(broker, client):
    body = os.urandom(LIMIT - 1024)
    grown = zlib.compress(body)
    assert len(grown) > LIMIT  # as the C++ client sends it: compressed whatever the gain
    reply = await client.invoke(broker.address, compressed_send("Random", grown))
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    message = await stored(broker, "Random")
    assert not message.sys_flag & COMPRESSED and message.sys_flag & 0x700 == 0
    assert message.body == body


async def test_a_compressed_body_within_the_limit_is_stored_as_sent(broker, client):
    body = b"0123456789abcdef" * 6400  # 100 KiB
    packed = zlib.compress(body)
    reply = await client.invoke(broker.address, compressed_send("Packed", packed))
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    message = await stored(broker, "Packed")
    assert message.sys_flag & COMPRESSED and message.body == packed


async def test_a_body_that_does_not_inflate_is_refused_when_it_is_measured(broker, client):
    # large enough that deflate's ratio bound says it might be over the limit
    broken = zlib.compress(random.randbytes(LIMIT // 1000))[:-10]
    reply = await client.invoke(broker.address, compressed_send("Broken", broken))
    assert reply.code == ResponseCode.MESSAGE_ILLEGAL
    assert "does not inflate" in reply.remark
    assert nothing_stored(broker, "Broken")


async def test_a_small_compressed_body_is_stored_as_sent_without_inflating_it(broker, client):
    # deflate cannot inflate past 1032:1, so this one cannot break the limit: like a Java
    # broker, this one does not unpack it (a body it cannot inflate is the consumer's to see)
    broken = zlib.compress(b"x" * 10_000)[:-10]
    reply = await client.invoke(broker.address, compressed_send("Small", broken))
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    message = await stored(broker, "Small", 0)
    assert message.sys_flag & COMPRESSED and message.body == broken


async def test_a_batch_body_over_the_limit_is_refused_compressed_or_not(broker, client):
    items = [BatchItem(0, bytes(1024 * 1024), b"") for _ in range(5)]  # each fits, all do not
    body = encode_batch(items)
    for request in (batch_send("Batch", body), batch_send("Batch", zlib.compress(body), ZLIB)):
        reply = await client.invoke(broker.address, request)
        assert reply.code == ResponseCode.MESSAGE_ILLEGAL
        assert f"the batch body is {len(body)} bytes" in reply.remark
        assert f"maxMessageSize is {LIMIT}" in reply.remark
    assert nothing_stored(broker, "Batch")


async def test_a_compressed_batch_within_the_limit_is_stored_record_by_record(broker, client):
    items = [BatchItem(0, b"%d" % i * 1000, b"KEYS\x01k%d\x02" % i) for i in range(3)]
    request = batch_send("SmallBatch", zlib.compress(encode_batch(items)), ZLIB)
    reply = await client.invoke(broker.address, request)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    for i in range(3):
        message = await stored(broker, "SmallBatch", i)
        assert message.body == b"%d" % i * 1000 and not message.sys_flag & COMPRESSED
