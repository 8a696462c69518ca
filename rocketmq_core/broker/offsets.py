"""Committed consumer offsets per topic@group and queue (STORE.md §13).

Persisted to config/consumerOffset.json in Java's shape, queue ids as fastjson writes
them (bare integer keys), so Java tools and brokers read the file and we read theirs.
"""

from __future__ import annotations

import logging

import anyio

from ..errors import ConfigError
from ..persist import read_config_file, write_config_file
from ..protocol import fastjson

log = logging.getLogger("rocketmq.broker")

SEPARATOR = "@"


def table_key(topic: str, group: str) -> str:
    return f"{topic}{SEPARATOR}{group}"


class ConsumerOffsetManager:
    def __init__(self, path: str) -> None:
        self.path = path
        self.table: dict[str, dict[int, int]] = {}
        self._dirty = False

    def load(self) -> None:
        data, source = read_config_file(self.path)
        if data is None:
            return
        try:
            document = fastjson.loads(data)
            table = document.get("offsetTable") or {}
            self.table = {
                str(key): {int(queue): int(offset) for queue, offset in offsets.items()}
                for key, offsets in table.items()
            }
        except (ValueError, AttributeError, TypeError) as exc:
            raise ConfigError(
                f"{source} is not a consumer offset table ({exc});"
                f" repair it or restore {self.path}.bak"
            ) from None

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET and the commit-offset flag of a pull."""
        offsets = self.table.setdefault(table_key(topic, group), {})
        if offsets.get(queue_id) != offset:
            offsets[queue_id] = offset
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
        # fastjson's default form: queue ids as bare integer keys, as Java writes them
        return fastjson.dumps({"offsetTable": self.table}, standard=False)

    async def persist(self) -> None:
        """Write consumerOffset.json if an offset moved (previous version kept as .bak)."""
        if not self._dirty:
            return
        self._dirty = False
        await anyio.to_thread.run_sync(write_config_file, self.path, self.encode())
