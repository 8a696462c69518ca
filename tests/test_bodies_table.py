"""Every JSON body, from one table of (typed body, wire bytes) that drives both the encoder
and the decoder: what we write is what Java's fastjson writes, and what we read back
is the body we started from. Then the forms only peers send, and bodies that are wrong.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from rocketmq_core.errors import BodyError
from rocketmq_core.protocol.bodies import (
    BrokerData,
    BrokerMemberGroup,
    BrokerStatsData,
    BrokerStatsItem,
    ClusterInfo,
    CMResult,
    Connection,
    ConsumeMessageDirectlyResult,
    ConsumerConnection,
    ConsumerOffsetWrapper,
    ConsumerRunningInfo,
    ConsumeStats,
    ConsumeStatsList,
    ConsumeStatus,
    DataVersion,
    GroupList,
    KVTable,
    OffsetWrapper,
    ProcessQueueInfo,
    ProducerConnection,
    QueryConsumeTimeSpanBody,
    QueueData,
    QueueTimeSpan,
    RegisterBrokerBody,
    ResetOffsetBody,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigWrapper,
    TopicList,
    TopicOffset,
    TopicRouteData,
    TopicStatsTable,
)
from rocketmq_core.protocol.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumerIdList,
    ConsumeType,
    HeartbeatData,
    LockBatchRequest,
    LockBatchResponse,
    MessageModel,
    MessageQueue,
    SubscriptionData,
)

Q0 = MessageQueue("T", "broker-a", 0)
Q1 = MessageQueue("T", "broker-a", 1)
ORDERS = MessageQueue("订单", "broker-a", 0)  # non-ASCII: raw UTF-8 in Java's form, \u in JSON
BEYOND_JS = 2**53 + 5  # a long no JavaScript number holds: quoted in standard JSON only
MQ0 = b'{"brokerName":"broker-a","queueId":0,"topic":"T"}'
MQ1 = b'{"brokerName":"broker-a","queueId":1,"topic":"T"}'


@dataclass(frozen=True)
class Case:
    id: str
    body: Any
    wire: bytes
    encode: Callable[[Any], bytes] = lambda body: body.encode()
    decode: Callable[[bytes], Any] | None = None  # the body's own decode when None

    def decoded(self) -> Any:
        return (self.decode or type(self.body).decode)(self.wire)


CASES = [
    # --- name-server lists and tables
    Case("topic-list", TopicList(["A", "B"]), b'{"topicList":["A","B"]}'),
    Case(
        "topic-list-of-a-broker",
        TopicList([], "10.0.0.1:10911"),
        b'{"brokerAddr":"10.0.0.1:10911","topicList":[]}',
    ),
    Case("topic-list-unicode", TopicList(["订单"]), b'{"topicList":["\\u8ba2\\u5355"]}'),
    Case("group-list", GroupList(["CG-1", "CG-2"]), b'{"groupList":["CG-1","CG-2"]}'),
    Case("group-list-empty", GroupList(), b'{"groupList":[]}'),
    Case("kv-table-sorted", KVTable({"k": "v", "a": "b"}), b'{"table":{"a":"b","k":"v"}}'),
    Case("kv-table-empty", KVTable(), b'{"table":{}}'),
    Case("consumer-id-list", ConsumerIdList(["a@1", "b@2"]), b'{"consumerIdList":["a@1","b@2"]}'),
    Case(
        "data-version",
        DataVersion(3, 1700000000000, 0),
        b'{"counter":3,"stateVersion":0,"timestamp":1700000000000}',
    ),
    # --- topics, registration and routes
    Case(
        "topic-config",
        TopicConfig("T", 8, 4, 6, attributes={"+message.type": "NORMAL"}),
        b'{"attributes":{"+message.type":"NORMAL"},"order":false,"perm":6,"readQueueNums":8,'
        b'"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4}',
    ),
    Case(
        "register-broker",
        RegisterBrokerBody(
            TopicConfigWrapper({"T": TopicConfig("T", 1, 1, 6)}, DataVersion(1, 5)),
            ["10.0.0.9:30000"],
        ),
        b'{"filterServerList":["10.0.0.9:30000"],"topicConfigSerializeWrapper":{"dataVersion":'
        b'{"counter":1,"stateVersion":0,"timestamp":5},"topicConfigTable":{"T":{"attributes":{},'
        b'"order":false,"perm":6,"readQueueNums":1,"topicFilterType":"SINGLE_TAG",'
        b'"topicName":"T","topicSysFlag":0,"writeQueueNums":1}}}}',
    ),
    Case(
        "route-standard",
        TopicRouteData([QueueData("b", 4, 4, 6)], [BrokerData("C", "b", {0: "10.0.0.1:10911"})]),
        b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"b","cluster":"C",'
        b'"enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"b",'
        b'"perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}',
    ),
    Case(
        "route-for-old-clients",
        TopicRouteData([], [BrokerData("C", "b", {0: "a:1", 1: "a:2"})]),
        b'{"brokerDatas":[{"brokerAddrs":{0:"a:1",1:"a:2"},"brokerName":"b","cluster":"C",'
        b'"enableActingMaster":false}],"filterServerTable":{},"queueDatas":[]}',
        encode=lambda body: body.encode(standard=False),
    ),
    Case(
        "cluster-info",
        ClusterInfo({"b": BrokerData("C", "b", {0: "a:1"})}, {"C": ["b"]}),
        b'{"brokerAddrTable":{"b":{"brokerAddrs":{0:"a:1"},"brokerName":"b","cluster":"C",'
        b'"enableActingMaster":false}},"clusterAddrTable":{"C":["b"]}}',
    ),
    Case(
        "broker-member-group",
        BrokerMemberGroup("C", "b", {0: "a:1", 1: "a:2"}),
        b'{"brokerAddrs":{"0":"a:1","1":"a:2"},"brokerName":"b","cluster":"C"}',
    ),
    # --- subscription groups
    Case(
        "subscription-group",
        SubscriptionGroupConfig("G", retry_max_times=3),
        b'{"attributes":{},"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,'
        b'"consumeFromMinEnable":true,"consumeMessageOrderly":false,"consumeTimeoutMinute":15,'
        b'"groupName":"G","groupSysFlag":0,"notifyConsumerIdsChangedEnable":true,'
        b'"retryMaxTimes":3,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}',
    ),
    Case(
        "subscription-group-table",
        SubscriptionGroupWrapper({"G": SubscriptionGroupConfig("G")}, DataVersion(1, 2)),
        b'{\n  "subscriptionGroupTable": {\n    "G": {\n      "groupName": "G",\n'
        b'      "consumeEnable": true,\n      "consumeFromMinEnable": true,\n'
        b'      "consumeBroadcastEnable": true,\n      "consumeMessageOrderly": false,\n'
        b'      "retryQueueNums": 1,\n      "retryMaxTimes": 16,\n      "brokerId": 0,\n'
        b'      "whichBrokerWhenConsumeSlowly": 1,\n'
        b'      "notifyConsumerIdsChangedEnable": true,\n      "groupSysFlag": 0,\n'
        b'      "consumeTimeoutMinute": 15,\n      "attributes": {}\n    }\n  },\n'
        b'  "forbiddenTable": {},\n  "dataVersion": {\n    "counter": 1,\n'
        b'    "stateVersion": 0,\n    "timestamp": 2\n  }\n}',
    ),
    Case(
        "subscription-group-table-empty",
        SubscriptionGroupWrapper(),
        b'{\n  "subscriptionGroupTable": {},\n  "forbiddenTable": {},\n  "dataVersion": {\n'
        b'    "counter": 0,\n    "stateVersion": 0,\n    "timestamp": 0\n  }\n}',
    ),
    # --- MessageQueue-keyed tables: the queue object itself is the key
    Case(
        "topic-stats",
        TopicStatsTable({Q0: TopicOffset(3, BEYOND_JS, 1700000000123)}),
        b'{"offsetTable":{' + MQ0 + b':{"lastUpdateTimestamp":1700000000123,'
        b'"maxOffset":9007199254740997,"minOffset":3}}}',
    ),
    Case("topic-stats-empty", TopicStatsTable(), b'{"offsetTable":{}}'),
    Case(
        "consume-stats",
        ConsumeStats(
            {Q0: OffsetWrapper(10, 7, 7, 1700000000000), Q1: OffsetWrapper(0, 0, 0, 0)}, 1.5
        ),
        b'{"consumeTps":1.5,"offsetTable":{'
        + MQ0
        + b':{"brokerOffset":10,"consumerOffset":7,"lastTimestamp":1700000000000,"pullOffset":7},'
        + MQ1
        + b':{"brokerOffset":0,"consumerOffset":0,"lastTimestamp":0,"pullOffset":0}}}',
    ),
    Case("consume-stats-empty", ConsumeStats(), b'{"consumeTps":0.0,"offsetTable":{}}'),
    Case(
        "consume-stats-list",
        ConsumeStatsList(
            "10.0.0.1:10911", [{"G": [ConsumeStats({Q0: OffsetWrapper(10, 8, 8, 0)}, 1.0)]}], 2
        ),
        b'{"brokerAddr":"10.0.0.1:10911","consumeStatsList":[{"G":[{"consumeTps":1.0,'
        b'"offsetTable":{'
        + MQ0
        + b':{"brokerOffset":10,"consumerOffset":8,"lastTimestamp":0,"pullOffset":8}}}]}],'
        b'"totalDiff":2}',
    ),
    Case(
        "broker-stats-data",
        BrokerStatsData(
            BrokerStatsItem(60, 1.0, 1.0), BrokerStatsItem(), BrokerStatsItem(1200, 0.01)
        ),
        b'{"statsDay":{"avgpt":0.0,"sum":1200,"tps":0.01},"statsHour":{"avgpt":0.0,"sum":0,'
        b'"tps":0.0},"statsMinute":{"avgpt":1.0,"sum":60,"tps":1.0}}',
    ),
    Case(
        "reset-offset-java",
        ResetOffsetBody({ORDERS: 5, Q1: BEYOND_JS}),
        b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"\xe8\xae\xa2\xe5\x8d\x95"}'
        b":5," + MQ1 + b":9007199254740997}}",
    ),
    Case(
        "reset-offset-cpp",
        ResetOffsetBody({ORDERS: 5, Q1: BEYOND_JS}),
        b'{"offsetTable":[{"brokerName":"broker-a","offset":5,"queueId":0,'
        b'"topic":"\\u8ba2\\u5355"},{"brokerName":"broker-a","offset":"9007199254740997",'
        b'"queueId":1,"topic":"T"}]}',
        encode=lambda body: body.encode(for_cpp=True),
    ),
    Case("reset-offset-empty", ResetOffsetBody(), b'{"offsetTable":{}}'),
    Case(
        "consumer-offsets",
        ConsumerOffsetWrapper({"T@G": {0: 250, 1: 2**60}, "订单@G": {}}),
        b'{"offsetTable":{"T@G":{0:250,1:1152921504606846976},"\xe8\xae\xa2\xe5\x8d\x95@G":{}}}',
    ),
    Case(
        "consume-time-span",
        QueryConsumeTimeSpanBody([QueueTimeSpan(Q0, 0, 1700000000123, 1700000000000, 42)]),
        b'{"consumeTimeSpanSet":[{"consumeTimeStamp":1700000000000,'
        b'"consumeTimeStampStr":"2023-11-14#22:13:20:000","delayTime":42,'
        b'"maxTimeStamp":1700000000123,"maxTimeStampStr":"2023-11-14#22:13:20:123",'
        b'"messageQueue":' + MQ0 + b',"minTimeStamp":0,'
        b'"minTimeStampStr":"1970-01-01#00:00:00:000"}]}',
    ),
    Case("consume-time-span-empty", QueryConsumeTimeSpanBody(), b'{"consumeTimeSpanSet":[]}'),
    # --- connections
    Case(
        "consumer-connection",
        ConsumerConnection(
            [Connection("10.0.0.1@1", "10.0.0.1:50000", "JAVA", 401)],
            {"T": SubscriptionData.of("T", "a || b", 1700000000000)},
            ConsumeType.CONSUME_PASSIVELY,
            MessageModel.CLUSTERING,
            ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        ),
        b'{"connectionSet":[{"clientAddr":"10.0.0.1:50000","clientId":"10.0.0.1@1",'
        b'"language":"JAVA","version":401}],"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",'
        b'"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","subscriptionTable":'
        b'{"T":{"classFilterMode":false,"codeSet":[97,98],"expressionType":"TAG",'
        b'"subString":"a || b","subVersion":1700000000000,"tagsSet":["a","b"],"topic":"T"}}}',
    ),
    Case(
        "consumer-connection-empty",
        ConsumerConnection(),
        b'{"connectionSet":[],"subscriptionTable":{}}',
    ),
    Case(
        "producer-connection",
        ProducerConnection([Connection("c@1", "", "CPP", 333), Connection("d@2", "x:1", "GO", 0)]),
        b'{"connectionSet":[{"clientAddr":"","clientId":"c@1","language":"CPP","version":333},'
        b'{"clientAddr":"x:1","clientId":"d@2","language":"GO","version":0}]}',
    ),
    # --- what a consumer reports about itself
    Case(
        "consumer-running-info",
        ConsumerRunningInfo(
            {"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "consumerGroup": "CG"},
            [SubscriptionData.of("%RETRY%CG", "*"), SubscriptionData.of("T", "a || b")],
            {
                Q1: ProcessQueueInfo(7, 7, 8, 2, locked=True, last_pull_timestamp=BEYOND_JS),
                Q0: ProcessQueueInfo(dropped=True),
            },
            {"T": ConsumeStatus(1.5, 20.0, 3.25, 19.5, 0.5, 2)},
            "thread dump",
        ),
        b'{"jstack":"thread dump","mqTable":{' + MQ0 + b':{"cachedMsgCount":0,'
        b'"cachedMsgMaxOffset":0,"cachedMsgMinOffset":0,"commitOffset":0,"droped":true,'
        b'"lastConsumeTimestamp":0,"lastLockTimestamp":0,"lastPullTimestamp":0,"locked":false,'
        b'"transactionMsgCount":0,"transactionMsgMaxOffset":0,"transactionMsgMinOffset":0,'
        b'"tryUnlockTimes":0},' + MQ1 + b':{"cachedMsgCount":2,"cachedMsgMaxOffset":8,'
        b'"cachedMsgMinOffset":7,"commitOffset":7,"droped":false,"lastConsumeTimestamp":0,'
        b'"lastLockTimestamp":0,"lastPullTimestamp":9007199254740997,"locked":true,'
        b'"transactionMsgCount":0,"transactionMsgMaxOffset":0,"transactionMsgMinOffset":0,'
        b'"tryUnlockTimes":0}},"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY",'
        b'"consumerGroup":"CG"},"statusTable":{"T":{"consumeFailedMsgs":2,'
        b'"consumeFailedTPS":0.5,"consumeOKTPS":19.5,"consumeRT":3.25,"pullRT":1.5,'
        b'"pullTPS":20.0}},"subscriptionSet":[{"classFilterMode":false,"codeSet":[],'
        b'"expressionType":"TAG","subString":"*","subVersion":0,"tagsSet":[],'
        b'"topic":"%RETRY%CG"},{"classFilterMode":false,"codeSet":[97,98],'
        b'"expressionType":"TAG","subString":"a || b","subVersion":0,"tagsSet":["a","b"],'
        b'"topic":"T"}]}',
    ),
    Case(
        "consumer-running-info-empty",
        ConsumerRunningInfo(),
        b'{"mqTable":{},"properties":{},"statusTable":{},"subscriptionSet":[]}',
    ),
    Case(
        "consume-directly-result",
        ConsumeMessageDirectlyResult(CMResult.CR_SUCCESS, spent_time_mills=12),
        b'{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"spentTimeMills":12}',
    ),
    Case(
        "consume-directly-result-thrown",
        ConsumeMessageDirectlyResult(
            CMResult.CR_THROW_EXCEPTION, order=True, remark="ValueError: x, a.py:1 in f"
        ),
        b'{"autoCommit":true,"consumeResult":"CR_THROW_EXCEPTION","order":true,'
        b'"remark":"ValueError: x, a.py:1 in f","spentTimeMills":0}',
    ),
    # --- the client family
    Case(
        "heartbeat",
        HeartbeatData("c@1", ["PG"], [ConsumerData("CG", subscriptions=[SubscriptionData("T")])]),
        b'{"clientID":"c@1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
        b'"consumeType":"CONSUME_PASSIVELY","groupName":"CG","messageModel":"CLUSTERING",'
        b'"subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG",'
        b'"subString":"*","subVersion":0,"tagsSet":[],"topic":"T"}],"unitMode":false}],'
        b'"producerDataSet":[{"groupName":"PG"}]}',
    ),
    Case(
        "lock-request",
        LockBatchRequest("CG", "c@1", [Q0]),
        b'{"clientId":"c@1","consumerGroup":"CG","mqSet":[' + MQ0 + b'],"onlyThisBroker":false}',
    ),
    Case("lock-reply", LockBatchResponse([Q0, Q1]), b'{"lockOKMQSet":[' + MQ0 + b"," + MQ1 + b"]}"),
    Case("lock-reply-none", LockBatchResponse(), b'{"lockOKMQSet":[]}'),
]


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """QueueTimeSpan's *Str fields are local time, as Java writes them: pin the zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_encode(case):
    assert case.encode(case.body) == case.wire


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_decode(case):
    assert case.decoded() == case.body


def test_every_body_type_has_a_case():
    import rocketmq_core.protocol.bodies as bodies

    covered = {type(case.body) for case in CASES}
    parts = {QueueData, BrokerData, TopicConfigWrapper, Connection, TopicOffset, OffsetWrapper}
    parts |= {QueueTimeSpan, ProcessQueueInfo, ConsumeStatus}  # inside the bodies holding them
    parts |= {BrokerStatsItem}
    parts |= {CMResult}  # ConsumeMessageDirectlyResult's consumeResult
    wire_types = {
        value
        for name, value in vars(bodies).items()
        if isinstance(value, type) and name in bodies.__all__
    }
    assert wire_types - parts - covered == set()


# --- what peers send that we never write ------------------------------------------------

# a C++ push consumer's answer to GET_CONSUMER_RUNNING_INFO (PyPI rocketmq 0.4.4), trimmed to
# one queue: pretty-printed keys and entries, longs quoted, codeSet left as zeros
CPP_RUNNING_INFO = (
    b'{"mqTable":{{\n   "brokerName" : "broker-a",\n   "queueId" : 0,\n   "topic" : "T"\n}:'
    b'{\n   "cachedMsgCount" : 0,\n   "cachedMsgMaxOffset" : "0",\n'
    b'   "cachedMsgMinOffset" : "0",\n   "commitOffset" : "5",\n   "droped" : false,\n'
    b'   "lastConsumeTimestamp" : "0",\n   "lastLockTimestamp" : "0",\n'
    b'   "lastPullTimestamp" : "1795683809941",\n   "locked" : false,\n'
    b'   "transactionMsgCount" : 0,\n   "transactionMsgMaxOffset" : "0",\n'
    b'   "transactionMsgMinOffset" : "0",\n   "tryUnlockTimes" : 0\n}\n},"jstack":"",'
    b'"properties":{"PROP_CLIENT_VERSION":"V3_1_8","PROP_CONSUMEORDERLY":"flase",'
    b'"PROP_CONSUMER_START_TIMESTAMP":"1795683809926","PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"},'
    b'"subscriptionSet":[{"codeSet":[0,0],"subString":"a || b","subVersion":"1795683809928",'
    b'"tagsSet":["a","b"],"topic":"T"}]}\n'
)

PEER_FORMS = [
    pytest.param(
        ConsumeStats.decode,
        b'{"consumeTps":2,"offsetTable":{"' + MQ0.replace(b'"', b'\\"') + b'":{"brokerOffset":4}}}',
        ConsumeStats({Q0: OffsetWrapper(broker_offset=4)}, 2.0),
        id="object-key-quoted-as-a-string",
    ),
    pytest.param(
        ResetOffsetBody.decode,
        b'{"offsetTable":{{"topic":"T","queueId":1,"brokerName":"broker-a"}:"12"}}',
        ResetOffsetBody({Q1: 12}),
        id="object-key-in-another-order",
    ),
    pytest.param(
        ConsumerOffsetWrapper.decode,
        b'{\n\t"offsetTable":{\n\t\t"T@G":{0:250}\n\t},"dataVersion":{"counter":1}\n}',
        ConsumerOffsetWrapper({"T@G": {0: 250}}),
        id="java-pretty-offsets-with-a-5x-data-version",
    ),
    pytest.param(
        ConsumerConnection.decode,
        b'{"connectionSet":[{"clientId":"c","version":"63"}],"consumeType":1,"messageModel":1}',
        ConsumerConnection(
            [Connection("c", version=63)],
            consume_type=ConsumeType.CONSUME_PASSIVELY,
            message_model=MessageModel.CLUSTERING,
        ),
        id="ordinals-and-missing-fields",
    ),
    pytest.param(
        SubscriptionGroupWrapper.decode,
        b'{"subscriptionGroupTable":{"G":{"groupName":"G","groupRetryPolicy":{}}}}',
        SubscriptionGroupWrapper({"G": SubscriptionGroupConfig("G")}),
        id="5x-group-fields-ignored",
    ),
    pytest.param(
        ConsumerRunningInfo.decode,
        CPP_RUNNING_INFO,
        ConsumerRunningInfo(
            {
                "PROP_CLIENT_VERSION": "V3_1_8",
                "PROP_CONSUMEORDERLY": "flase",  # sic
                "PROP_CONSUMER_START_TIMESTAMP": "1795683809926",
                "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY",
            },
            [SubscriptionData.of("T", "a || b", 1795683809928)],
            {Q0: ProcessQueueInfo(commit_offset=5, last_pull_timestamp=1795683809941)},
            jstack="",
        ),
        id="cpp-client-running-info",
    ),
    pytest.param(
        ConsumerRunningInfo.decode,
        b'{"mqTable":},"jstack":"","properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"}}\n',
        ConsumerRunningInfo({"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY"}, jstack=""),
        id="cpp-client-running-info-owning-no-queue",
    ),
    pytest.param(
        ConsumerRunningInfo.decode,
        b'{"properties":{"PROP_CONSUMER_START_TIMESTAMP":1700000000000,"x":true}}',
        ConsumerRunningInfo({"PROP_CONSUMER_START_TIMESTAMP": "1700000000000", "x": "true"}),
        id="running-info-properties-that-are-not-strings",
    ),
    pytest.param(LockBatchResponse.decode, b"", LockBatchResponse(), id="empty-lock-reply"),
    pytest.param(TopicStatsTable.decode, b'{"offsetTable":null}', TopicStatsTable(), id="null"),
]


@pytest.mark.parametrize(("decode", "wire", "body"), PEER_FORMS)
def test_decode_what_peers_send(decode, wire, body):
    assert decode(wire) == body


@pytest.mark.parametrize(
    ("decode", "wire", "message"),
    [
        (ConsumeStats.decode, b"[]", "the consume stats body is not a JSON object"),
        (ConsumeStats.decode, b'{"offsetTable":[]}', "offsetTable of the consume stats body"),
        (ConsumeStats.decode, b'{"offsetTable":{"T":{}}}', "not JSON"),
        (TopicStatsTable.decode, b'{"offsetTable":{' + MQ0 + b':{"maxOffset":"x"}}}', "maxOffset"),
        (ResetOffsetBody.decode, b'{"offsetTable":[' + MQ0 + b"]}", "reset offset body"),
        (ResetOffsetBody.decode, b'{"offsetTable":{{"topic":"T"}:1}}', "is not a message queue"),
        (ConsumerConnection.decode, b'{"consumeType":"SOMETIMES"}', "not a ConsumeType"),
        (ProducerConnection.decode, b'{"connectionSet":[5]}', "5 is not a connection"),
        (ConsumerRunningInfo.decode, b'{"mqTable":[]}', "mqTable of the consumer running info"),
        (ConsumerRunningInfo.decode, b'{"properties":[]}', "properties or statusTable"),
        (ConsumerRunningInfo.decode, b'{"statusTable":{"T":1}}', "not a consume status"),
        (
            ConsumerRunningInfo.decode,
            b'{"mqTable":{' + MQ0 + b':{"commitOffset":"x"}}}',
            "commitOffset",
        ),
        (QueryConsumeTimeSpanBody.decode, b'{"consumeTimeSpanSet":[{}]}', "not a message queue"),
        (SubscriptionGroupWrapper.decode, b'{"subscriptionGroupTable":{"G":{}}}', "groupName"),
        (ConsumerOffsetWrapper.decode, b'{"offsetTable":{"T@G":{0:"x"}}}', "consumer offset"),
        (ConsumerIdList.decode, b"not json", "the consumer list body is not JSON"),
        (
            ConsumeMessageDirectlyResult.decode,
            b'{"consumeResult":"CR_MAYBE"}',
            "consume message directly result body",
        ),
    ],
)
def test_bodies_that_are_wrong_say_which_body(decode, wire, message):
    with pytest.raises(BodyError, match=message):
        decode(wire)
