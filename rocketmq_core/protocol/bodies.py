"""Request and response bodies of the name-server family (ROUTE.md §1-2, CODES.md §5.3-5.4).

Each body is a dataclass with ``to_json`` (the bean as fastjson writes it: properties in
alphabetical order, nulls left out) and ``from_json`` (what Java and C++ peers send,
lenient about fastjson's bare keys and old field names). Sans-IO.
"""

from __future__ import annotations

import functools
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from ..errors import BodyError
from . import fastjson
from .codes import ResponseCode
from .constants import MASTER_ID, PERM_RW
from .headers import camel_case

T = TypeVar("T")


def _load_object(data: bytes, what: str) -> dict[Any, Any]:
    try:
        value = fastjson.loads(data)
    except ValueError as exc:  # too deep or not UTF-8 keep their INVALID_PARAMETER
        code = getattr(exc, "response_code", ResponseCode.SYSTEM_ERROR)
        raise BodyError(f"the {what} body is not JSON: {exc}", response_code=code) from None
    if not isinstance(value, dict):
        raise BodyError(f"the {what} body is not a JSON object")
    return value


def body_decoder(what: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """A decoder whose JSON held a value of the wrong type (a number where a list
    belongs) raises BodyError naming ``what``, not the TypeError it ran into."""

    def decorate(decode: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(decode)
        def checked(*args: Any, **kwargs: Any) -> T:
            try:
                return decode(*args, **kwargs)
            except BodyError:
                raise
            except (TypeError, AttributeError, KeyError, ValueError) as exc:
                raise BodyError(
                    f"the {what} body has a value of the wrong type: {exc}",
                    response_code=ResponseCode.INVALID_PARAMETER,
                ) from None

        return checked

    return decorate


def _int(raw: Any, name: str, what: str) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise BodyError(f"{what}: {name} is not an integer: {raw!r}") from None


# --- data version and topic configs ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DataVersion:
    """A broker's topic-config version: it changes whenever any topic changes."""

    counter: int = 0
    timestamp: int = 0
    state_version: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "counter": self.counter,
            "stateVersion": self.state_version,
            "timestamp": self.timestamp,
        }

    @classmethod
    def from_json(cls, value: Any) -> DataVersion:
        if not isinstance(value, dict):
            return cls()
        return cls(
            counter=_int(value.get("counter", 0), "counter", "dataVersion"),
            timestamp=_int(value.get("timestamp", 0), "timestamp", "dataVersion"),
            state_version=_int(value.get("stateVersion", 0), "stateVersion", "dataVersion"),
        )

    def encode(self) -> bytes:
        return fastjson.dumps(self.to_json())

    def next(self, timestamp: int) -> DataVersion:
        """The version after one more change at ``timestamp`` (ms)."""
        return DataVersion(self.counter + 1, timestamp, self.state_version)


@dataclass(slots=True)
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_RW
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "attributes": self.attributes,
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, value: Any, name: str | None = None) -> TopicConfig:
        what = f"topic config {name or ''}".rstrip()
        if not isinstance(value, dict):
            raise BodyError(f"{what} is not a JSON object")
        topic = value.get("topicName", name)
        if not isinstance(topic, str) or not topic:
            raise BodyError(f"{what} has no topicName")
        attributes = value.get("attributes") or {}
        return cls(
            topic_name=topic,
            read_queue_nums=_int(value.get("readQueueNums", 16), "readQueueNums", what),
            write_queue_nums=_int(value.get("writeQueueNums", 16), "writeQueueNums", what),
            perm=_int(value.get("perm", PERM_RW), "perm", what),
            topic_filter_type=str(value.get("topicFilterType", "SINGLE_TAG")),
            topic_sys_flag=_int(value.get("topicSysFlag", 0), "topicSysFlag", what),
            order=bool(value.get("order", False)),
            attributes={str(k): str(v) for k, v in attributes.items()},
        )

    def encode_text(self) -> str:
        """The space-separated form of the compressed registration (CODES.md §5.4)."""
        parts = [
            self.topic_name,
            str(self.read_queue_nums),
            str(self.write_queue_nums),
            str(self.perm),
            self.topic_filter_type,
        ]
        if self.attributes:
            parts.append(fastjson.dumps(self.attributes).decode())
        return " ".join(parts)

    @classmethod
    def decode_text(cls, text: str) -> TopicConfig:
        parts = text.split(" ", 5)
        if len(parts) < 5:
            raise BodyError(f"topic config {text!r} has fewer than 5 space-separated fields")
        attributes: dict[str, str] = {}
        if len(parts) == 6 and parts[5]:
            decoded = _load_object(parts[5].encode(), "topic attributes")
            attributes = {str(k): str(v) for k, v in decoded.items()}
        return cls(
            topic_name=parts[0],
            read_queue_nums=_int(parts[1], "readQueueNums", parts[0]),
            write_queue_nums=_int(parts[2], "writeQueueNums", parts[0]),
            perm=_int(parts[3], "perm", parts[0]),
            topic_filter_type=parts[4],
            attributes=attributes,
        )


@dataclass(slots=True)
class TopicConfigWrapper:
    """TopicConfigSerializeWrapper: all topics of a broker and their version."""

    topic_configs: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_json(),
            "topicConfigTable": {
                name: config.to_json() for name, config in self.topic_configs.items()
            },
        }

    @classmethod
    @body_decoder("topic config")
    def from_json(cls, value: Any) -> TopicConfigWrapper:
        if not isinstance(value, dict):
            raise BodyError("topicConfigSerializeWrapper is not a JSON object")
        table = value.get("topicConfigTable") or {}
        if not isinstance(table, dict):
            raise BodyError("topicConfigTable is not a JSON object")
        return cls(
            topic_configs={
                str(name): TopicConfig.from_json(config, str(name))
                for name, config in table.items()
            },
            data_version=DataVersion.from_json(value.get("dataVersion")),
        )


# --- REGISTER_BROKER ---------------------------------------------------------------------

_INT32 = struct.Struct(">i")


@dataclass(slots=True)
class RegisterBrokerBody:
    topic_config_wrapper: TopicConfigWrapper = field(default_factory=TopicConfigWrapper)
    filter_server_list: list[str] = field(default_factory=list)

    def encode(self, compressed: bool = False) -> bytes:
        if not compressed:
            return fastjson.dumps(
                {
                    "filterServerList": self.filter_server_list,
                    "topicConfigSerializeWrapper": self.topic_config_wrapper.to_json(),
                }
            )
        parts = [_sized(self.topic_config_wrapper.data_version.encode())]
        parts.append(_INT32.pack(len(self.topic_config_wrapper.topic_configs)))
        for config in self.topic_config_wrapper.topic_configs.values():
            parts.append(_sized(config.encode_text().encode()))
        parts.append(_sized(fastjson.dumps(self.filter_server_list)))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    @body_decoder("REGISTER_BROKER")
    def decode(cls, data: bytes, compressed: bool = False) -> RegisterBrokerBody:
        """Either registration body; brokers before 3.0.11 sent the bare wrapper."""
        if compressed:
            return cls._decode_compressed(data)
        value = _load_object(data, "REGISTER_BROKER")
        if "topicConfigSerializeWrapper" not in value and "topicConfigTable" in value:
            return cls(TopicConfigWrapper.from_json(value))
        servers = value.get("filterServerList") or []
        return cls(
            TopicConfigWrapper.from_json(value.get("topicConfigSerializeWrapper") or {}),
            [str(server) for server in servers],
        )

    @classmethod
    def _decode_compressed(cls, data: bytes) -> RegisterBrokerBody:
        try:
            raw = zlib.decompress(data)
        except zlib.error as exc:
            raise BodyError(f"the compressed REGISTER_BROKER body is not zlib: {exc}") from None
        reader = _Reader(raw, "compressed REGISTER_BROKER body")
        version = DataVersion.from_json(_load_object(reader.sized(), "dataVersion"))
        count = reader.int32()
        configs: dict[str, TopicConfig] = {}
        for _ in range(count):
            config = TopicConfig.decode_text(reader.sized().decode())
            configs[config.topic_name] = config
        servers = fastjson.loads(reader.sized()) if reader.remaining else []
        # 5.x brokers append static-topic mappings here; the name server keeps none
        return cls(TopicConfigWrapper(configs, version), [str(s) for s in servers or []])


def _sized(data: bytes) -> bytes:
    return _INT32.pack(len(data)) + data


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def int32(self) -> int:
        if self.remaining < 4:
            raise BodyError(f"the {self.what} ends inside a length field")
        (value,) = _INT32.unpack_from(self.data, self.pos)
        self.pos += 4
        if value < 0:
            raise BodyError(f"the {self.what} has a negative length or count: {value}")
        return value

    def sized(self) -> bytes:
        length = self.int32()
        if self.remaining < length:
            raise BodyError(
                f"the {self.what} declares {length} bytes but only {self.remaining} follow"
            )
        chunk = self.data[self.pos : self.pos + length]
        self.pos += length
        return chunk


# --- routes ------------------------------------------------------------------------------


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
            read_queue_nums=_int(value.get("readQueueNums", 0), "readQueueNums", "queueData"),
            write_queue_nums=_int(value.get("writeQueueNums", 0), "writeQueueNums", "queueData"),
            perm=_int(value.get("perm", 0), "perm", "queueData"),
            topic_sys_flag=_int(flag, "topicSysFlag", "queueData"),
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
            broker_addrs={_int(k, "broker id", "brokerAddrs"): str(v) for k, v in addrs.items()},
            zone_name=value.get("zoneName"),
            enable_acting_master=bool(value.get("enableActingMaster", False)),
            endpoints={
                _int(k, "broker id", "endpoints"): [str(address) for address in v]
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
        value = _load_object(data, "topic route")
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
        value = _load_object(data, "cluster info")
        brokers = value.get("brokerAddrTable") or {}
        clusters = value.get("clusterAddrTable") or {}
        return cls(
            {str(name): BrokerData.from_json(broker) for name, broker in brokers.items()},
            {str(name): [str(b) for b in names] for name, names in clusters.items()},
        )


@dataclass(slots=True)
class TopicList:
    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None

    def encode(self) -> bytes:
        value: dict[str, Any] = {}
        if self.broker_addr is not None:
            value["brokerAddr"] = self.broker_addr
        value["topicList"] = self.topic_list
        return fastjson.dumps(value)

    @classmethod
    @body_decoder("topic list")
    def decode(cls, data: bytes) -> TopicList:
        value = _load_object(data, "topic list")
        return cls([str(t) for t in value.get("topicList") or []], value.get("brokerAddr"))


@dataclass(slots=True)
class GroupList:
    """QUERY_TOPIC_CONSUME_BY_WHO's body: consumer group names."""

    group_list: list[str] = field(default_factory=list)

    def encode(self) -> bytes:
        return fastjson.dumps({"groupList": self.group_list})

    @classmethod
    @body_decoder("group list")
    def decode(cls, data: bytes) -> GroupList:
        value = _load_object(data, "group list")
        return cls([str(group) for group in value.get("groupList") or []])


@dataclass(slots=True)
class KVTable:
    table: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        return fastjson.dumps({"table": self.table})

    @classmethod
    @body_decoder("KV table")
    def decode(cls, data: bytes) -> KVTable:
        value = _load_object(data, "KV table")
        return cls({str(k): str(v) for k, v in (value.get("table") or {}).items()})


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


# --- subscription groups ------------------------------------------------------------------


@dataclass(slots=True)
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {camel_case(f.name): getattr(self, f.name) for f in fields(self)}

    @classmethod
    @body_decoder("subscription group")
    def from_json(cls, value: Any) -> SubscriptionGroupConfig:
        if not isinstance(value, dict) or not isinstance(value.get("groupName"), str):
            raise BodyError(f"{value!r} is not a subscription group (no groupName)")
        known = {camel_case(f.name): f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, item in value.items():
            spec = known.get(key)
            if spec is None or item is None:
                continue  # a newer RocketMQ's field (groupRetryPolicy, ...): not used here
            kind = type(getattr(_DEFAULTS, spec.name))
            try:
                values[spec.name] = _coerce(kind, item)
            except (TypeError, ValueError):
                raise BodyError(f"subscription group field {key} cannot be {item!r}") from None
        return cls(**values)


_DEFAULTS = SubscriptionGroupConfig("")


def _coerce(kind: type, item: Any) -> Any:
    if kind is bool:
        if isinstance(item, str):
            return item.lower() == "true"
        return bool(item)
    if kind is dict:
        if not isinstance(item, dict):
            raise TypeError
        return {str(k): str(v) for k, v in item.items()}
    return kind(item)
