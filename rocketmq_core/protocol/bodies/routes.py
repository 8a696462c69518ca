"""Routes and cluster membership: TopicRouteData and its parts, ClusterInfo,
BrokerMemberGroup (ROUTE.md §1-2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...errors import BodyError
from .. import fastjson
from ..constants import MASTER_ID
from ..json_body import body_decoder, load_object, to_int
from .topics import TopicConfig


@dataclass(slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, value: Any) -> QueueData:
        if not isinstance(value, dict) or not isinstance(value.get("brokerName"), str):
            raise BodyError("a queueDatas entry has no brokerName")
        # releases before 4.9.0 spell the flag topicSynFlag
        flag = value.get("topicSysFlag", value.get("topicSynFlag", 0))
        return cls(
            broker_name=value["brokerName"],
            read_queue_nums=to_int(value.get("readQueueNums", 0), "readQueueNums", "queueData"),
            write_queue_nums=to_int(value.get("writeQueueNums", 0), "writeQueueNums", "queueData"),
            perm=to_int(value.get("perm", 0), "perm", "queueData"),
            topic_sys_flag=to_int(flag, "topicSysFlag", "queueData"),
        )

    @classmethod
    def of(cls, broker_name: str, config: TopicConfig) -> QueueData:
        return cls(
            broker_name,
            config.read_queue_nums,
            config.write_queue_nums,
            config.perm,
            config.topic_sys_flag,
        )


@dataclass(slots=True)
class BrokerData:
    """One broker name: its cluster and the address of each member (0 = master).

    ``endpoints`` is rocketmq-py's: each member's other addresses, with their
    transport (``quic://ip:port``). It is written only when some member has one, and
    clients that do not know it ignore it.
    """

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    zone_name: str | None = None
    enable_acting_master: bool = False
    endpoints: dict[int, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "brokerAddrs": self.broker_addrs,
            "brokerName": self.broker_name,
            "cluster": self.cluster,
            "enableActingMaster": self.enable_acting_master,
        }
        if self.zone_name is not None:
            result["zoneName"] = self.zone_name
        if self.endpoints:
            result["endpoints"] = self.endpoints
        return result

    @classmethod
    def from_json(cls, value: Any) -> BrokerData:
        if not isinstance(value, dict) or not isinstance(value.get("brokerName"), str):
            raise BodyError("a brokerDatas entry has no brokerName")
        addrs = value.get("brokerAddrs") or {}
        endpoints = value.get("endpoints") or {}
        return cls(
            cluster=str(value.get("cluster", "")),
            broker_name=value["brokerName"],
            broker_addrs={to_int(k, "broker id", "brokerAddrs"): str(v) for k, v in addrs.items()},
            zone_name=value.get("zoneName"),
            enable_acting_master=bool(value.get("enableActingMaster", False)),
            endpoints={
                to_int(k, "broker id", "endpoints"): [str(address) for address in v]
                for k, v in endpoints.items()
            },
        )

    def copy(self) -> BrokerData:
        return BrokerData(
            self.cluster,
            self.broker_name,
            dict(self.broker_addrs),
            self.zone_name,
            self.enable_acting_master,
            {broker_id: list(addresses) for broker_id, addresses in self.endpoints.items()},
        )

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)


@dataclass(slots=True)
class TopicRouteData:
    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None

    def to_json(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "brokerDatas": [broker.to_json() for broker in self.broker_datas],
            "filterServerTable": self.filter_server_table,
        }
        if self.order_topic_conf is not None:
            result["orderTopicConf"] = self.order_topic_conf
        result["queueDatas"] = [queue.to_json() for queue in self.queue_datas]
        return result

    def encode(self, *, standard: bool = True) -> bytes:
        """Standard JSON for clients >= 4.9.4; bare numeric keys for older ones."""
        return fastjson.dumps(self.to_json(), standard=standard)

    @classmethod
    @body_decoder("topic route")
    def decode(cls, data: bytes) -> TopicRouteData:
        value = load_object(data, "topic route")
        filters = value.get("filterServerTable") or {}
        order = value.get("orderTopicConf")
        return cls(
            queue_datas=[QueueData.from_json(q) for q in value.get("queueDatas") or []],
            broker_datas=[BrokerData.from_json(b) for b in value.get("brokerDatas") or []],
            filter_server_table={str(k): [str(s) for s in v] for k, v in filters.items()},
            order_topic_conf=str(order) if order is not None else None,
        )


@dataclass(slots=True)
class ClusterInfo:
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)

    def encode(self) -> bytes:
        # Java writes this with fastjson's defaults whatever the client: bare numeric keys
        return fastjson.dumps(
            {
                "brokerAddrTable": {
                    name: broker.to_json() for name, broker in self.broker_addr_table.items()
                },
                "clusterAddrTable": self.cluster_addr_table,
            },
            standard=False,
        )

    @classmethod
    @body_decoder("cluster info")
    def decode(cls, data: bytes) -> ClusterInfo:
        value = load_object(data, "cluster info")
        brokers = value.get("brokerAddrTable") or {}
        clusters = value.get("clusterAddrTable") or {}
        return cls(
            {str(name): BrokerData.from_json(broker) for name, broker in brokers.items()},
            {str(name): [str(b) for b in names] for name, names in clusters.items()},
        )


@dataclass(slots=True)
class BrokerMemberGroup:
    """GET_BROKER_MEMBER_GROUP: the members of one broker name."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        return fastjson.dumps(
            {
                "brokerAddrs": self.broker_addrs,
                "brokerName": self.broker_name,
                "cluster": self.cluster,
            }
        )

    @classmethod
    @body_decoder("broker member group")
    def decode(cls, data: bytes) -> BrokerMemberGroup:
        value = load_object(data, "broker member group")
        addrs = value.get("brokerAddrs") or {}
        return cls(
            str(value.get("cluster", "")),
            str(value.get("brokerName", "")),
            {to_int(k, "broker id", "brokerAddrs"): str(v) for k, v in addrs.items()},
        )
