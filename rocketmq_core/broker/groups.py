"""Subscription groups: per consumer group settings (retry queues and limit, whether it
may consume), persisted in config/subscriptionGroup.json (STORE.md §14).

Groups are created on first use when ``autoCreateSubscriptionGroup`` is on, as RocketMQ
does; the admin family creates, changes and deletes them explicitly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import orjson

from ..errors import BodyError, ResponseError
from ..protocol.bodies import DataVersion
from ..protocol.codes import ResponseCode
from ..protocol.headers import camel_case
from .config_files import VersionedConfigFile

log = logging.getLogger("rocketmq.broker")


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


class SubscriptionGroupManager(VersionedConfigFile):
    def __init__(
        self, path: str, auto_create: bool = True, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(path, clock)
        self.auto_create = auto_create
        self.table: dict[str, SubscriptionGroupConfig] = {}

    def load(self) -> None:
        loaded = self.read("a subscription group table", _parse_table)
        if loaded is not None:
            self.table, self.data_version = loaded

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config; created with the defaults on first use if allowed."""
        config = self.table.get(group)
        if config is None and self.auto_create:
            config = self.table[group] = SubscriptionGroupConfig(group)
            self._bump()
            log.info("subscription group %s created on first use", group)
        return config

    def require(self, group: str) -> SubscriptionGroupConfig:
        """The group's config, or SUBSCRIPTION_GROUP_NOT_EXIST for the client."""
        config = self.find(group)
        if config is None:
            raise ResponseError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group}; create it first",
            )
        return config

    def update(self, config: SubscriptionGroupConfig) -> None:
        self.table[config.group_name] = config
        self._bump()

    def delete(self, group: str) -> bool:
        if self.table.pop(group, None) is None:
            return False
        self._bump()
        return True

    def encode(self) -> bytes:
        value = {
            "subscriptionGroupTable": {name: g.to_json() for name, g in self.table.items()},
            "forbiddenTable": {},
            "dataVersion": self.data_version.to_json(),
        }
        return orjson.dumps(value, option=orjson.OPT_INDENT_2)


def _parse_table(value: Any) -> tuple[dict[str, SubscriptionGroupConfig], DataVersion]:
    table = value.get("subscriptionGroupTable") or {}
    groups = {name: SubscriptionGroupConfig.from_json(group) for name, group in table.items()}
    return groups, DataVersion.from_json(value.get("dataVersion") or {})
