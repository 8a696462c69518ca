"""Subscription groups: per consumer group settings (retry queues and limit, whether it
may consume), persisted in config/subscriptionGroup.json (STORE.md §14).

Groups are created on first use when ``autoCreateSubscriptionGroup`` is on, as RocketMQ
does; the admin family creates, changes and deletes them explicitly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from ..errors import RequestRefused
from ..protocol.bodies import DataVersion, SubscriptionGroupConfig, SubscriptionGroupWrapper
from ..protocol.codes import ResponseCode
from .config_files import VersionedConfigFile

log = logging.getLogger("rocketmq.broker")


class SubscriptionGroupManager(VersionedConfigFile):
    def __init__(
        self,
        path: str,
        auto_create: bool = True,
        clock: Callable[[], float] = time.time,
        *,
        mirrors_master: bool = False,
    ) -> None:
        super().__init__(path, clock)
        self.auto_create = auto_create
        # a slave's table is its master's copy, replaced whenever the versions differ
        self.mirrors_master = mirrors_master
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
            if self.mirrors_master:
                # in memory, at the master's version: a new version would make every sync
                # replace the table (dropping the group) and write the file, the next
                # pull make it again, and so on, each slaveSyncInterval
                log.info("subscription group %s created on first use on this slave", group)
                return config
            self._bump()
            log.info("subscription group %s created on first use", group)
        return config

    def require(self, group: str) -> SubscriptionGroupConfig:
        """The group's config, or SUBSCRIPTION_GROUP_NOT_EXIST for the client."""
        config = self.find(group)
        if config is None:
            raise RequestRefused(
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

    def replace(self, wrapper: SubscriptionGroupWrapper) -> None:
        """The whole table and its version from the master (a slave's sync)."""
        self.table = dict(wrapper.subscription_group_table)
        self._adopt(wrapper.data_version)

    def encode(self) -> bytes:
        """The file, and GET_ALL_SUBSCRIPTIONGROUP_CONFIG's body."""
        return SubscriptionGroupWrapper(self.table, self.data_version).encode()


def _parse_table(value: Any) -> tuple[dict[str, SubscriptionGroupConfig], DataVersion]:
    wrapper = SubscriptionGroupWrapper.from_json(value)
    return wrapper.subscription_group_table, wrapper.data_version
