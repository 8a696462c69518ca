"""Requests as clients send them, for the broker tests over TCP."""

from __future__ import annotations

from rocketmq_core.protocol.codes import RequestCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.headers import (
    SEND_V2_NAMES,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
)
from rocketmq_core.protocol.message import encode_properties

R = RequestCode


def send_request(topic="Orders", body=b"hello", queue_id=0, tags="TagA", **fields):
    header = SendMessageRequestHeader(
        producer_group="PG",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=queue_id,
        sys_flag=0,
        born_timestamp=1700000000000,
        flag=0,
        properties=encode_properties({"TAGS": tags, "KEYS": "k1", "UNIQ_KEY": "U1"}),
        **fields,
    )
    return RemotingCommand.request(R.SEND_MESSAGE_V2, header.to_ext_fields(SEND_V2_NAMES), body)


def pull_request(topic="Orders", offset=0, sys_flag=0x4, subscription="*", suspend=10_000):
    header = PullMessageRequestHeader(
        consumer_group="CG",
        topic=topic,
        queue_id=0,
        queue_offset=offset,
        max_msg_nums=32,
        sys_flag=sys_flag,
        commit_offset=0,
        suspend_timeout_millis=suspend,
        sub_version=0,
        subscription=subscription,
    )
    return RemotingCommand.request(R.PULL_MESSAGE, header.to_ext_fields())
