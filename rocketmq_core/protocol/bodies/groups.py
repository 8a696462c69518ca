"""Subscription groups: SubscriptionGroupConfig and the table of them
(GET_ALL_SUBSCRIPTIONGROUP_CONFIG, subscriptionGroup.json)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import orjson

from ...errors import BodyError
from .. import fastjson
from ..headers import camel_case
from ..json_body import body_decoder, load_object
from .topics import DataVersion


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

    def encode(self) -> bytes:
        return fastjson.dumps(self.to_json())

    @classmethod
    def decode(cls, data: bytes) -> SubscriptionGroupConfig:
        return cls.from_json(load_object(data, "subscription group"))

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


@dataclass(slots=True)
class SubscriptionGroupWrapper:
    """Every subscription group of a broker and their version; ``forbiddenTable``
    (5.x) is written empty and not read."""

    subscription_group_table: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json(self) -> dict[str, Any]:
        return {
            "subscriptionGroupTable": {
                name: group.to_json() for name, group in self.subscription_group_table.items()
            },
            "forbiddenTable": {},
            "dataVersion": self.data_version.to_json(),
        }

    def encode(self) -> bytes:
        """As the broker keeps subscriptionGroup.json, and answers with it."""
        return orjson.dumps(self.to_json(), option=orjson.OPT_INDENT_2)

    @classmethod
    @body_decoder("subscription group table")
    def from_json(cls, value: Any) -> SubscriptionGroupWrapper:
        if not isinstance(value, dict):
            raise BodyError("a subscription group table is not a JSON object")
        table = value.get("subscriptionGroupTable") or {}
        return cls(
            {str(name): SubscriptionGroupConfig.from_json(group) for name, group in table.items()},
            DataVersion.from_json(value.get("dataVersion") or {}),
        )

    @classmethod
    def decode(cls, data: bytes) -> SubscriptionGroupWrapper:
        return cls.from_json(load_object(data, "subscription group table"))
