"""Request code -> needed resources (ACL.md §3)."""

from __future__ import annotations

import orjson
import pytest

from rocketmq_core.acl.permissions import PUB, SUB
from rocketmq_core.acl.resources import needed_resources
from rocketmq_core.broker.pop.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    NotificationRequestHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PopMessageRequestHeader,
)
from rocketmq_core.broker.pop.records import encode_bitset
from rocketmq_core.errors import ProtocolError
from rocketmq_core.protocol.codes import RequestCode as R
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.heartbeat import ConsumerData, HeartbeatData, SubscriptionData


def request(code, body=b"", **fields):
    return RemotingCommand.request(code, {k: str(v) for k, v in fields.items()}, body)


@pytest.mark.parametrize(
    ("command", "needed"),
    [
        (request(R.SEND_MESSAGE, topic="Orders", producerGroup="PG"), {"Orders": PUB}),
        (request(R.SEND_MESSAGE, topic="%RETRY%CG"), {}),  # V1 has no group field
        (request(R.SEND_MESSAGE, topic="%RETRY%CG", group="CG"), {"%RETRY%CG": SUB}),
        (request(R.SEND_MESSAGE_V2, a="PG", b="Orders"), {"Orders": PUB}),
        (request(R.SEND_MESSAGE_V2, a="CG", b="%RETRY%CG"), {"%RETRY%CG": SUB}),
        (request(R.SEND_BATCH_MESSAGE, a="PG", b="Orders"), {"Orders": PUB}),
        (request(R.CONSUMER_SEND_MSG_BACK, group="CG", offset=1), {"%RETRY%CG": SUB}),
        (
            request(R.PULL_MESSAGE, topic="Orders", consumerGroup="CG"),
            {"Orders": SUB, "%RETRY%CG": SUB},
        ),
        (request(R.QUERY_MESSAGE, topic="Orders"), {"Orders": SUB}),
        (request(R.UNREGISTER_CLIENT, clientID="c1", consumerGroup=""), {"%RETRY%": SUB}),
        (request(R.UNREGISTER_CLIENT, clientID="c1", producerGroup="PG"), {}),
        (request(R.GET_CONSUMER_LIST_BY_GROUP, consumerGroup="CG"), {"%RETRY%CG": SUB}),
        (
            request(
                R.UPDATE_CONSUMER_OFFSET,
                consumerGroup="CG",
                topic="Orders",
                queueId=0,
                commitOffset=5,
            ),
            {"%RETRY%CG": SUB, "Orders": SUB},
        ),
        (request(R.QUERY_CONSUMER_OFFSET, consumerGroup="CG", topic="Orders", queueId=0), {}),
        (request(R.END_TRANSACTION), {}),
    ],
)
def test_needed(command, needed):
    assert needed_resources(command) == needed


def test_heartbeat_consumers_and_their_topics_not_producers():
    body = HeartbeatData(
        "client-1",
        producer_groups=["PG"],
        consumers=[
            ConsumerData("CG", subscriptions=[SubscriptionData.from_json({"topic": "Orders"})]),
        ],
    ).encode()
    assert needed_resources(request(R.HEART_BEAT, body)) == {"%RETRY%CG": SUB, "Orders": SUB}


def test_unreadable_heartbeat_or_header_raises():
    with pytest.raises(ProtocolError):
        needed_resources(request(R.HEART_BEAT, b"{not json"))
    with pytest.raises(ProtocolError):
        needed_resources(request(R.GET_CONSUMER_LIST_BY_GROUP))


def pop_request(code, header):
    return RemotingCommand.request(code, header.to_ext_fields())


HANDLE = "0 1700000000000 30000 0 0 broker-a 0 5"
POP_HEADERS = [
    (
        R.POP_MESSAGE,
        PopMessageRequestHeader(
            consumer_group="CG",
            topic="Orders",
            queue_id=-1,
            max_msg_nums=32,
            invisible_time=30_000,
            poll_time=0,
            born_time=0,
            init_mode=0,
        ),
    ),
    (
        R.PEEK_MESSAGE,
        PeekMessageRequestHeader(consumer_group="CG", topic="Orders", queue_id=0, max_msg_nums=1),
    ),
    (
        R.NOTIFICATION,
        NotificationRequestHeader(
            consumer_group="CG", topic="Orders", queue_id=-1, poll_time=0, born_time=0
        ),
    ),
    (R.POLLING_INFO, PollingInfoRequestHeader(consumer_group="CG", topic="Orders", queue_id=0)),
    (
        R.ACK_MESSAGE,
        AckMessageRequestHeader(
            consumer_group="CG", topic="Orders", queue_id=0, extra_info=HANDLE, offset=5
        ),
    ),
    (
        R.CHANGE_MESSAGE_INVISIBLETIME,
        ChangeInvisibleTimeRequestHeader(
            consumer_group="CG",
            topic="Orders",
            queue_id=0,
            extra_info=HANDLE,
            offset=5,
            invisible_time=10_000,
        ),
    ),
]


@pytest.mark.parametrize(
    ("code", "header"), POP_HEADERS, ids=[code.name for code, _ in POP_HEADERS]
)
def test_pop_family_needs_sub_on_topic_and_group(code, header):
    assert needed_resources(pop_request(code, header)) == {"Orders": SUB, "%RETRY%CG": SUB}
    # a header the broker could not read is refused, not waved through
    with pytest.raises(ProtocolError):
        needed_resources(request(code, topic="Orders"))


@pytest.mark.parametrize(
    ("topic", "needed"),
    [
        ("%RETRY%CG_Orders", {"Orders": SUB, "%RETRY%CG": SUB}),  # the POP retry topic (v1)
        ("%RETRY%CG+Orders", {"Orders": SUB, "%RETRY%CG": SUB}),  # enableRetryTopicV2
        ("%RETRY%CG", {"%RETRY%CG": SUB}),
        ("%RETRY%Other_Orders", {"%RETRY%Other_Orders": SUB, "%RETRY%CG": SUB}),
    ],
)
def test_an_ack_of_a_retry_message_is_checked_on_the_topic_it_stands_for(topic, needed):
    header = AckMessageRequestHeader(
        consumer_group="CG", topic=topic, queue_id=0, extra_info=HANDLE, offset=5
    )
    assert needed_resources(pop_request(R.ACK_MESSAGE, header)) == needed


def batch_ack(*entries):
    acks = [
        {"c": group, "t": topic, "r": "0", "so": 0, "q": 0, "rq": 0, "pt": 1, "it": 30_000,
         "b": encode_bitset([0])}
        for group, topic in entries
    ]  # fmt: skip
    body = orjson.dumps({"brokerName": "broker-a", "acks": acks})
    return request(R.BATCH_ACK_MESSAGE, body)


def test_batch_ack_needs_every_entrys_topic_and_group():
    needed = needed_resources(batch_ack(("CG", "Orders"), ("CG2", "Refunds"), ("CG", "Orders")))
    assert needed == {"Orders": SUB, "%RETRY%CG": SUB, "Refunds": SUB, "%RETRY%CG2": SUB}
    with pytest.raises(ProtocolError, match="batch ack"):
        needed_resources(request(R.BATCH_ACK_MESSAGE, b'{"acks": [{"c": "CG"}]}'))
    with pytest.raises(ProtocolError, match="batch ack"):
        needed_resources(request(R.BATCH_ACK_MESSAGE, b"not json"))
