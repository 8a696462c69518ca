"""Who is connected: ConsumerConnection (GET_CONSUMER_CONNECTION_LIST) and
ProducerConnection (GET_PRODUCER_CONNECTION_LIST), one Connection per client."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...errors import BodyError
from .. import fastjson
from ..heartbeat import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData, enum_of
from ..json_body import body_decoder, load_object, to_int


@dataclass(slots=True)
class Connection:
    """One client connected to a broker."""

    client_id: str
    client_addr: str = ""
    language: str = ""  # LanguageCode by name: JAVA, CPP, PYTHON...
    version: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "clientAddr": self.client_addr,
            "clientId": self.client_id,
            "language": self.language,
            "version": self.version,
        }

    @classmethod
    def from_json(cls, value: Any) -> Connection:
        if not isinstance(value, dict):
            raise BodyError(f"{value!r} is not a connection")
        return cls(
            str(value.get("clientId", "")),
            str(value.get("clientAddr", "")),
            str(value.get("language", "")),
            to_int(value.get("version") or 0, "version", "connection"),
        )


def _connection_set(value: dict[Any, Any]) -> list[Connection]:
    return [Connection.from_json(entry) for entry in value.get("connectionSet") or []]


@dataclass(slots=True)
class ConsumerConnection:
    """A consumer group's clients and how it consumes; the enums are None when a broker
    left them out (fastjson leaves out nulls)."""

    connection_set: list[Connection] = field(default_factory=list)
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    consume_type: ConsumeType | None = None
    message_model: MessageModel | None = None
    consume_from_where: ConsumeFromWhere | None = None

    def encode(self) -> bytes:
        value: dict[str, Any] = {
            "connectionSet": [connection.to_json() for connection in self.connection_set],
            "subscriptionTable": {
                topic: subscription.to_json()
                for topic, subscription in self.subscription_table.items()
            },
        }
        for name, member in (
            ("consumeFromWhere", self.consume_from_where),
            ("consumeType", self.consume_type),
            ("messageModel", self.message_model),
        ):
            if member is not None:
                value[name] = member.name
        return fastjson.dumps(value)

    @classmethod
    @body_decoder("consumer connection")
    def decode(cls, data: bytes) -> ConsumerConnection:
        value = load_object(data, "consumer connection")
        table = value.get("subscriptionTable") or {}
        return cls(
            _connection_set(value),
            {str(topic): SubscriptionData.from_json(sub) for topic, sub in table.items()},
            enum_of(ConsumeType, value.get("consumeType"), None),
            enum_of(MessageModel, value.get("messageModel"), None),
            enum_of(ConsumeFromWhere, value.get("consumeFromWhere"), None),
        )


@dataclass(slots=True)
class ProducerConnection:
    connection_set: list[Connection] = field(default_factory=list)

    def encode(self) -> bytes:
        connections = [connection.to_json() for connection in self.connection_set]
        return fastjson.dumps({"connectionSet": connections})

    @classmethod
    @body_decoder("producer connection")
    def decode(cls, data: bytes) -> ProducerConnection:
        return cls(_connection_set(load_object(data, "producer connection")))
