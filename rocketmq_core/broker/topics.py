"""The broker's topic table: built-in topics, auto-creation, config/topics.json.

RocketMQ's TopicConfigManager semantics (STORE.md §14, ROUTE.md §6): a send to an unknown
topic creates it from the default topic (TBW102) when that carries the INHERIT bit;
every change bumps the data version the name servers use to skip unchanged
registrations, and is persisted atomically with the previous file kept as ``.bak``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import orjson

from ..protocol.bodies import TopicConfig, TopicConfigWrapper
from ..protocol.constants import (
    BENCHMARK_TOPIC,
    DEFAULT_TOPIC,
    OFFSET_MOVED_EVENT,
    PERM_RW,
    REPLY_TOPIC_SUFFIX,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TIMER_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    Perm,
)
from ..protocol.topic_validation import broker_system_topics
from .config import BrokerConfig
from .config_files import VersionedConfigFile

log = logging.getLogger("rocketmq.broker")


class TopicConfigManager(VersionedConfigFile):
    def __init__(self, config: BrokerConfig, path: str, clock: Callable[[], float] = time.time):
        super().__init__(path, clock)
        self.config = config
        self.table: dict[str, TopicConfig] = {}

    # --- loading and the built-ins ---------------------------------------------------------

    def load(self) -> None:
        wrapper = self.read("a topic table", TopicConfigWrapper.from_json)
        if wrapper is not None:
            self.table = wrapper.topic_configs
            self.data_version = wrapper.data_version
        self._create_builtin_topics()

    def _create_builtin_topics(self) -> None:
        config = self.config
        inherit_rw = int(PERM_RW | Perm.INHERIT)
        builtins: list[tuple[str, int, int]] = [
            (SELF_TEST_TOPIC, 1, int(PERM_RW)),
            (BENCHMARK_TOPIC, 1024, int(PERM_RW)),
            (
                config.broker_cluster_name,
                16,
                inherit_rw if config.cluster_topic_enable else int(Perm.INHERIT),
            ),
            (
                config.broker_name,
                1,
                inherit_rw if config.broker_topic_enable else int(Perm.INHERIT),
            ),
            (OFFSET_MOVED_EVENT, 1, int(PERM_RW)),
            (SCHEDULE_TOPIC, len(config.message_delay_level.split()), int(PERM_RW)),
            (config.broker_cluster_name + REPLY_TOPIC_SUFFIX, 1, int(PERM_RW)),
            (TRANS_HALF_TOPIC, 1, int(PERM_RW)),
            (TRANS_OP_HALF_TOPIC, 1, int(PERM_RW)),
            (TIMER_TOPIC, 1, int(PERM_RW)),
        ]
        if config.auto_create_topic_enable:
            builtins.append((DEFAULT_TOPIC, config.default_topic_queue_nums, inherit_rw))
        if config.trace_topic_enable:
            builtins.append((config.msg_trace_topic_name, 1, int(PERM_RW)))
        for name, queues, perm in builtins:
            if name not in self.table:
                self.table[name] = TopicConfig(name, queues, queues, perm)
                self._dirty = True
        default = self.table.get(DEFAULT_TOPIC)
        auto_create_off = not config.auto_create_topic_enable
        if default is not None and auto_create_off and default.perm & Perm.INHERIT:
            default.perm &= ~int(Perm.INHERIT)  # no template: auto-creation is off
            self._dirty = True
        if self._dirty:
            self._bump()

    @property
    def system_topics(self) -> frozenset[str]:
        """The topics this broker owns: admin requests may not create, change or delete them."""
        config = self.config
        trace = [config.msg_trace_topic_name] if config.trace_topic_enable else []
        return broker_system_topics(config.broker_cluster_name, config.broker_name, trace)

    # --- changes ---------------------------------------------------------------------------

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def create_in_send(
        self, topic: str, default_topic: str, default_queue_nums: int, sys_flag: int = 0
    ) -> TopicConfig | None:
        """A send to an unknown topic: create it from the default topic, as RocketMQ does.

        None when the default topic is unknown or not a template (auto-creation off).
        """
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        default = self.table.get(default_topic)
        if default is None or not default.perm & Perm.INHERIT:
            return None
        queues = max(0, min(default_queue_nums, default.write_queue_nums))
        created = TopicConfig(
            topic,
            queues,
            queues,
            default.perm & ~int(Perm.INHERIT),
            default.topic_filter_type,
            sys_flag,
        )
        self.table[topic] = created
        log.info("topic %s created from %s with %d queues", topic, default_topic, queues)
        self._bump()
        return created

    def create_if_missing(
        self, topic: str, queues: int = 1, perm: int = int(PERM_RW), sys_flag: int = 0
    ) -> TopicConfig:
        """Retry and dead-letter topics, created on first use."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        created = self.table[topic] = TopicConfig(
            topic, queues, queues, perm, topic_sys_flag=sys_flag
        )
        self._bump()
        return created

    def update(self, config: TopicConfig) -> None:
        """Create or replace a topic's config (admin UPDATE_AND_CREATE_TOPIC)."""
        self.table[config.topic_name] = config
        self._bump()

    def delete(self, topic: str) -> bool:
        if self.table.pop(topic, None) is None:
            return False
        self._bump()
        return True

    def replace(self, wrapper: TopicConfigWrapper) -> None:
        """The whole table and its version from the master (a slave's sync)."""
        self.table = dict(wrapper.topic_configs)
        self._adopt(wrapper.data_version)

    def wrapper(self) -> TopicConfigWrapper:
        """All topics and the version, as REGISTER_BROKER and GET_ALL_TOPIC_CONFIG send them."""
        return TopicConfigWrapper(dict(self.table), self.data_version)

    # --- persistence -----------------------------------------------------------------------

    def encode(self) -> bytes:
        return orjson.dumps(self.wrapper().to_json(), option=orjson.OPT_INDENT_2)
