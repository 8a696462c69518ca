"""Heartbeat bodies from Java and C++ clients, and the consumer/producer registries."""

from __future__ import annotations

import pytest

from rocketmq_core.broker.clients import ConsumerManager, ProducerManager
from rocketmq_core.errors import BodyError
from rocketmq_core.protocol.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumerIdList,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    SubscriptionData,
)
from rocketmq_core.protocol.message import tags_code

JAVA = (
    b'{"clientID":"192.168.0.10@12345#1700000000000","consumerDataSet":[{"consumeFromWhere":'
    b'"CONSUME_FROM_FIRST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"CG",'
    b'"messageModel":"BROADCASTING","subscriptionDataSet":[{"classFilterMode":false,'
    b'"codeSet":[2598919],"expressionType":"TAG","subString":"TagA","subVersion":1700000000000,'
    b'"tagsSet":["TagA"],"topic":"T"}],"unitMode":false}],"heartbeatFingerprint":0,'
    b'"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"},{"groupName":"PG"}]}'
)
# the C++ client: ordinals, subVersion as a string, no producer set, codeSet = atoi(tag)
CPP = (
    b'{"clientID":"127.0.0.1@4242#DEFAULT","consumerDataSet":[{"consumeFromWhere":4,'
    b'"consumeType":1,"groupName":"CG","messageModel":1,"subscriptionDataSet":[{"codeSet":[0,0],'
    b'"subString":"TagA || TagB","subVersion":"1700000000123","tagsSet":["TagA","TagB"],'
    b'"topic":"T"}]}]}\n'
)


def test_java_heartbeat():
    beat = HeartbeatData.decode(JAVA)
    assert beat.client_id == "192.168.0.10@12345#1700000000000"
    assert beat.producer_groups == ["CLIENT_INNER_PRODUCER", "PG"]
    (consumer,) = beat.consumers
    assert consumer.message_model is MessageModel.BROADCASTING
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert consumer.subscriptions[0].tag_filter == frozenset({2598919})


def test_cpp_heartbeat_ordinals_string_versions_and_bogus_code_sets():
    (consumer,) = HeartbeatData.decode(CPP).consumers
    assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert consumer.message_model is MessageModel.CLUSTERING
    (subscription,) = consumer.subscriptions
    assert subscription.sub_version == 1700000000123
    assert subscription.tag_filter == frozenset({tags_code("TagA"), tags_code("TagB")})


def test_heartbeat_round_trip_and_errors():
    beat = HeartbeatData.decode(JAVA)
    assert HeartbeatData.decode(beat.encode()) == beat
    for bad in (b"[]", b"{}", b"not json", b'{"clientID":"c","consumerDataSet":[{}]}'):
        with pytest.raises(BodyError):
            HeartbeatData.decode(bad)
    with pytest.raises(BodyError, match="not a MessageModel"):
        HeartbeatData.decode(
            b'{"clientID":"c","consumerDataSet":[{"groupName":"G","messageModel":"ODD"}]}'
        )


def test_expressions():
    assert SubscriptionData.of("T", "*").tag_filter is None
    assert SubscriptionData.of("T", " TagA ||TagB|| ").tags_set == ["TagA", "TagB"]
    assert SubscriptionData.of("T", None).sub_string == "*"


def consumer(group="CG", topics=("T",), model=MessageModel.CLUSTERING, version=1):
    return ConsumerData(
        group,
        message_model=model,
        subscriptions=[SubscriptionData.of(topic, "*", version) for topic in topics],
    )


def test_membership_changes_are_reported():
    manager = ConsumerManager()
    assert manager.register(consumer(), "ch1", "c1", now=0) is True  # new member
    assert manager.register(consumer(), "ch1", "c1", now=10) is False  # a plain heartbeat
    assert manager.register(consumer(), "ch2", "c2", now=10) is True
    assert manager.group("CG").client_ids() == ["c1", "c2"]
    assert manager.register(consumer(topics=("T", "U")), "ch1", "c1", now=20) is True
    assert manager.groups_of_topic("U") == ["CG"]
    # a newer filter for the same topic is taken quietly
    newer = ConsumerData("CG", subscriptions=[SubscriptionData.of("T", "TagA", 5)])
    assert manager.register(newer, "ch1", "c1", now=30) is True  # U went away
    assert manager.subscription("CG", "T").tags_set == ["TagA"]
    stale = ConsumerData("CG", subscriptions=[SubscriptionData.of("T", "TagB", 2)])
    manager.register(stale, "ch1", "c1", now=31)
    assert manager.subscription("CG", "T").tags_set == ["TagA"]  # older version ignored


def test_members_leave_by_unregister_close_or_silence():
    manager = ConsumerManager()
    manager.register(consumer(), "ch1", "c1", now=0)
    manager.register(consumer(), "ch2", "c2", now=100)
    manager.register(consumer("Other"), "ch1", "c1", now=0)
    assert manager.channel_closed("ch1") == ["CG", "Other"]
    assert manager.group("CG").client_ids() == ["c2"] and manager.group("Other") is None
    assert manager.expire(now=1000, timeout=1000) == []
    assert manager.expire(now=1101, timeout=1000) == [("CG", "ch2")]
    assert manager.groups == {}
    assert manager.unregister("CG", "ch9") is False


def test_broadcasting_groups_do_not_notify():
    manager = ConsumerManager()
    manager.register(consumer(model=MessageModel.BROADCASTING), "ch1", "c1", now=0)
    assert not manager.group("CG").notifies


def test_producers():
    producers = ProducerManager()
    producers.register("PG", "ch1", "p1", now=0)
    producers.register("PG", "ch2", "p2", now=5)
    # each check of a transaction asks the next member: one that cannot answer is not
    # asked every time
    assert [producers.any_channel("PG", turn) for turn in range(1, 5)] == ["ch2", "ch1"] * 2
    producers.channel_closed("ch2")
    assert producers.any_channel("PG") == "ch1"
    assert producers.expire(now=200_000, timeout=120_000) == [("PG", "ch1")]
    assert producers.any_channel("PG") is None


def test_consumer_list_body_is_strict_json():
    assert ConsumerIdList(["a", "b"]).encode() == b'{"consumerIdList":["a","b"]}'
