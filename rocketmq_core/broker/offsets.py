"""Committed consumer offsets per topic@group and queue (STORE.md §13).

Persisted to config/consumerOffset.json in Java's shape, queue ids as fastjson writes
them (bare integer keys), so Java tools and brokers read the file and we read theirs.
"""

from __future__ import annotations

import logging

from ..protocol.bodies import ConsumerOffsetWrapper
from .config_files import ConfigFile

log = logging.getLogger("rocketmq.broker")

SEPARATOR = "@"


def table_key(topic: str, group: str) -> str:
    return f"{topic}{SEPARATOR}{group}"


class ConsumerOffsetManager(ConfigFile):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.table: dict[str, dict[int, int]] = {}

    def load(self) -> None:
        wrapper = self.read("a consumer offset table", ConsumerOffsetWrapper.from_json)
        if wrapper is not None:
            self.table = wrapper.offset_table

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET and the commit-offset flag of a pull."""
        offsets = self.table.setdefault(table_key(topic, group), {})
        if offsets.get(queue_id) != offset:
            offsets[queue_id] = offset
            self._dirty = True

    def merge(self, table: dict[str, dict[int, int]]) -> None:
        """The master's offsets, key by key (``topic@group``); keys only we have stay."""
        for key, offsets in table.items():
            if self.table.get(key) != offsets:
                self.table[key] = dict(offsets)
                self._dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed one."""
        return self.table.get(table_key(topic, group), {}).get(queue_id, -1)

    def offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(table_key(topic, group), {}))

    def topics_of(self, group: str) -> list[str]:
        suffix = SEPARATOR + group
        return sorted(key[: -len(suffix)] for key in self.table if key.endswith(suffix))

    def groups_of(self, topic: str) -> list[str]:
        prefix = topic + SEPARATOR
        return sorted(key[len(prefix) :] for key in self.table if key.startswith(prefix))

    def remove_topic(self, topic: str) -> None:
        prefix = topic + SEPARATOR
        for key in [key for key in self.table if key.startswith(prefix)]:
            del self.table[key]
            self._dirty = True

    def remove_group(self, group: str) -> None:
        suffix = SEPARATOR + group
        for key in [key for key in self.table if key.endswith(suffix)]:
            del self.table[key]
            self._dirty = True

    def encode(self) -> bytes:
        """The file, and GET_ALL_CONSUMER_OFFSET's body."""
        return ConsumerOffsetWrapper(self.table).encode()
