"""The producer's size limit and compression against a real broker over TCP: the limit
is on the body as given; a body is sent compressed only when that makes it smaller."""

from __future__ import annotations

import os

import pytest

from rocketmq_core.client.message import Message, SendStatus
from rocketmq_core.client.producer import MQClientError, Producer
from rocketmq_core.protocol.message import COMPRESSED

from .conftest import TOPIC, stored

pytestmark = pytest.mark.anyio
LIMIT = 4 * 1024 * 1024  # the producer's and the broker's default maxMessageSize


async def test_five_mib_of_zeros_is_refused_before_compressing(namesrv):
    async with Producer("PG", namesrv) as producer:
        with pytest.raises(MQClientError) as refused:
            await producer.send(Message(TOPIC, bytes(5 * 1024 * 1024)))
    assert str(refused.value).startswith(
        f"the message body is 5242880 bytes; the limit is {LIMIT} (maxMessageSize)"
    )


async def test_a_random_body_just_under_the_limit_goes_uncompressed_and_comes_back(namesrv):
    body = os.urandom(LIMIT - 1024)  # zlib makes it bigger than the limit
    async with Producer("PG", namesrv) as producer:
        result = await producer.send(Message(TOPIC, body))
    assert result.status is SendStatus.SEND_OK
    message = await stored(namesrv, result.queue, result.queue_offset)
    assert message.body == body
    assert not message.sys_flag & COMPRESSED


async def test_a_compressible_body_is_stored_compressed_and_consumed_intact(namesrv):
    body = b"a compressible line of text\n" * (100 * 1024 // 28)
    async with Producer("PG", namesrv) as producer:
        result = await producer.send(Message(TOPIC, body))
    message = await stored(namesrv, result.queue, result.queue_offset)
    assert message.sys_flag & COMPRESSED
    assert message.body == body


async def test_a_batch_checks_each_body_then_splits_to_the_limit(namesrv):
    async with Producer("PG", namesrv) as producer:
        with pytest.raises(MQClientError, match="message 1 of the batch has a body of"):
            await producer.send_batch([Message(TOPIC, b"x"), Message(TOPIC, bytes(LIMIT + 1))])
        with pytest.raises(MQClientError, match=r"message 0 of the batch is .* send it on its own"):
            await producer.send_batch([Message(TOPIC, bytes(LIMIT))])
        # five 1 MiB bodies fit one by one but not in one batch body: several requests
        bodies = [os.urandom(1024 * 1024) for _ in range(5)]
        results = await producer.send_batch([Message(TOPIC, body) for body in bodies])
    assert [r.status for r in results] == [SendStatus.SEND_OK] * 5
    assert len({(r.queue, r.queue_offset - i) for i, r in enumerate(results)}) > 1
    last = results[-1]
    assert (await stored(namesrv, last.queue, last.queue_offset)).body == bodies[-1]
