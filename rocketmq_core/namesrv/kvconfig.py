"""KV config: namespace -> key -> value, persisted atomically to kvConfig.json.

The file has Java's KVConfigSerializeWrapper shape, ``{"configTable": {ns: {k: v}}}``,
so a name server can move between rocketmq-py and Java with its KV config.
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import orjson

from ..errors import ConfigError
from ..persist import atomic_write, read_optional

log = logging.getLogger("rocketmq.namesrv")


class KVConfig:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.table: dict[str, dict[str, str]] = {}
        self._version = 0  # bumped by every change
        self._persisted = 0
        self._persist_lock: anyio.Lock | None = None

    def load(self) -> None:
        """Read the file if there is one; ConfigError, naming it, if it is unreadable."""
        data = read_optional(self.path)
        if data is None:
            return
        try:
            document = orjson.loads(data)
            table = document.get("configTable") or {}
            self.table = {
                str(ns): {str(k): str(v) for k, v in entries.items()}
                for ns, entries in table.items()
            }
        except (orjson.JSONDecodeError, AttributeError, TypeError) as exc:
            raise ConfigError(
                f"the KV config file {self.path} is not a KV table ({exc});"
                " repair it, or move it away to start with an empty KV config"
            ) from None
        log.info("loaded %d KV namespaces from %s", len(self.table), self.path)

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def namespace(self, namespace: str) -> dict[str, str]:
        return dict(self.table.get(namespace, {}))

    def put(self, namespace: str, key: str, value: str) -> None:
        self.table.setdefault(namespace, {})[key] = value
        self._version += 1

    def delete(self, namespace: str, key: str) -> bool:
        entries = self.table.get(namespace)
        if entries is None or key not in entries:
            return False
        del entries[key]
        if not entries:
            del self.table[namespace]
        self._version += 1
        return True

    async def persist(self) -> None:
        """Write the table if it changed; returns once this process's changes are on disk."""
        if self._persist_lock is None:
            self._persist_lock = anyio.Lock()
        async with self._persist_lock:
            version = self._version
            if version == self._persisted:
                return  # a concurrent persist already wrote this change
            data = orjson.dumps({"configTable": self.table}, option=orjson.OPT_INDENT_2)
            await anyio.to_thread.run_sync(atomic_write, self.path, data)
            self._persisted = version
