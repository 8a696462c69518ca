"""Orderly POP on a real broker over TCP: one batch of a queue in flight at a time, in
order; the queue unblocks when the batch is acked, or hands the same batch out again
(with its delivery count in orderCountInfo) once the invisible time is over."""

from __future__ import annotations

import pytest

from rocketmq_core.broker.pop.handles import parse_offset_info
from rocketmq_core.protocol.codes import ResponseCode
from tests.broker.pop_wire import TOPIC, ack_request, pop_request, pop_until, popped_messages
from tests.broker.test_pop import setup

pytestmark = pytest.mark.anyio


async def test_an_orderly_pop_blocks_the_queue_until_its_batch_is_acked(broker, client):
    await setup(broker, client, count=3)
    first = await client.invoke(
        broker.address, pop_request(order=True, max_nums=2, attempt_id="a1")
    )
    assert first.code == ResponseCode.SUCCESS, first.remark
    assert first.ext_fields["reviveQid"] == "999"
    batch = popped_messages(first)
    assert [p.body for p in batch] == [b"m0", b"m1"]
    assert parse_offset_info(first.ext_fields["orderCountInfo"]) == {
        "0@qo0%0": "0",
        "0@qo0%1": "0",
        "0@0": "0",
    }

    blocked = await client.invoke(broker.address, pop_request(order=True, attempt_id="a2"))
    assert blocked.code == ResponseCode.POLLING_TIMEOUT  # m2 waits behind the batch

    assert (await client.invoke(broker.address, ack_request(batch[0]))).code == ResponseCode.SUCCESS
    still = await client.invoke(broker.address, pop_request(order=True, attempt_id="a3"))
    assert still.code == ResponseCode.POLLING_TIMEOUT  # m1 is still out
    assert broker.offsets.query("PopGroup", TOPIC, 0) == 1  # moved over the acked m0 only

    assert (await client.invoke(broker.address, ack_request(batch[1]))).code == ResponseCode.SUCCESS
    after = popped_messages(await client.invoke(broker.address, pop_request(order=True)))
    assert [p.body for p in after] == [b"m2"]


async def test_an_unacked_orderly_batch_comes_back_in_order_with_its_count(broker, client):
    await setup(broker, client, count=2)
    first = popped_messages(
        await client.invoke(broker.address, pop_request(order=True, invisible_ms=1000))
    )
    assert [p.body for p in first] == [b"m0", b"m1"]
    again = await pop_until(client, broker.address, order=True, invisible_ms=60_000)
    assert [p.body for p in again] == [b"m0", b"m1"]
    response = await client.invoke(broker.address, pop_request(order=True))  # blocked again
    assert response.code == ResponseCode.POLLING_TIMEOUT
    # the count a client makes each message's reconsume times
    counts = parse_offset_info(again[0].fields["orderCountInfo"])
    assert counts["0@qo0%0"] == "1" and counts["0@qo0%1"] == "1"
