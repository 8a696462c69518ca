"""Request code -> needed resources (ACL.md §3)."""

from __future__ import annotations

import pytest

from rocketmq_core.acl.permissions import PUB, SUB
from rocketmq_core.acl.resources import needed_resources
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
