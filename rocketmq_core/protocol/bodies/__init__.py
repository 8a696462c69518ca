"""Every JSON body of the name-server and admin families, one typed class each (ROUTE.md
§1-2, CODES.md §5.3-5.4); the client family (heartbeats, locks) is in ``heartbeat``.

Each body is a dataclass. ``encode``/``to_json`` write the bean as Java's fastjson does
(properties in alphabetical order, nulls left out; bare or object map keys where Java
writes them); ``decode``/``from_json`` read what Java and C++ peers send, lenient about
fastjson's bare keys and old field names, and raise BodyError naming the body. Sans-IO.

One module per family; everything is importable from here.
"""

from __future__ import annotations

from ..json_body import body_decoder
from .connections import Connection, ConsumerConnection, ProducerConnection
from .consume_directly import CMResult, ConsumeMessageDirectlyResult
from .groups import SubscriptionGroupConfig, SubscriptionGroupWrapper
from .lists import GroupList, KVTable, TopicList
from .offsets import ConsumerOffsetWrapper, ResetOffsetBody
from .queue_keys import queue_key, queue_of_key
from .registration import RegisterBrokerBody
from .routes import BrokerData, BrokerMemberGroup, ClusterInfo, QueueData, TopicRouteData
from .running import ConsumerRunningInfo, ConsumeStatus, ProcessQueueInfo
from .stats import (
    BrokerStatsData,
    BrokerStatsItem,
    ConsumeStats,
    ConsumeStatsList,
    OffsetWrapper,
    QueryConsumeTimeSpanBody,
    QueueTimeSpan,
    TopicOffset,
    TopicStatsTable,
)
from .topics import DataVersion, TopicConfig, TopicConfigWrapper

__all__ = [
    "BrokerData",
    "BrokerMemberGroup",
    "BrokerStatsData",
    "BrokerStatsItem",
    "CMResult",
    "ClusterInfo",
    "Connection",
    "ConsumeMessageDirectlyResult",
    "ConsumeStats",
    "ConsumeStatsList",
    "ConsumeStatus",
    "ConsumerConnection",
    "ConsumerOffsetWrapper",
    "ConsumerRunningInfo",
    "DataVersion",
    "GroupList",
    "KVTable",
    "OffsetWrapper",
    "ProcessQueueInfo",
    "ProducerConnection",
    "QueryConsumeTimeSpanBody",
    "QueueData",
    "QueueTimeSpan",
    "RegisterBrokerBody",
    "ResetOffsetBody",
    "SubscriptionGroupConfig",
    "SubscriptionGroupWrapper",
    "TopicConfig",
    "TopicConfigWrapper",
    "TopicList",
    "TopicOffset",
    "TopicRouteData",
    "TopicStatsTable",
    "body_decoder",
    "queue_key",
    "queue_of_key",
]
