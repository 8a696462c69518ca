"""The broker's JSON files under config/ (topics, subscription groups, offsets): read
once at start, written atomically when changed (the previous version kept as .bak)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from ..errors import BodyError, ConfigError
from ..persist import read_config_file, write_config_file
from ..protocol import fastjson
from ..protocol.bodies import DataVersion

log = logging.getLogger("rocketmq.broker")

T = TypeVar("T")


class ConfigFile:
    """A table kept in one file; subclasses say how to encode it and mark changes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._dirty = False

    def read(self, what: str, parse: Callable[[Any], T]) -> T | None:
        """``parse`` of the file's JSON, None when there is no file; a file that cannot
        be parsed is a ConfigError that says which file and how to recover."""
        data, source = read_config_file(self.path)
        if data is None:
            return None
        try:
            parsed = parse(fastjson.loads(data))
        except (ValueError, AttributeError, TypeError, KeyError, BodyError) as exc:
            raise ConfigError(
                f"{source} is not {what} ({exc}); repair it or restore {self.path}.bak"
            ) from None
        if source is not None and str(source).endswith(".bak"):
            log.warning("%s was missing or empty: loaded %s", self.path, source)
        return parsed

    def encode(self) -> bytes:
        raise NotImplementedError

    _failing = False  # the last write failed (and was logged)

    async def persist(self) -> bool:
        """Write the file if anything changed since the last write; False when the write
        failed (a full disk, no descriptors): logged once, the table stays dirty and the
        next call tries again, so the broker keeps serving from memory."""
        if not self._dirty:
            return True
        self._dirty = False
        try:
            await anyio.to_thread.run_sync(write_config_file, self.path, self.encode())
        except OSError as exc:
            self._dirty = True
            if not self._failing:
                self._failing = True
                log.error("cannot write %s: %s; retrying until it can", self.path, exc)
            return False
        if self._failing:
            self._failing = False
            log.warning("%s is written again", self.path)
        return True


class VersionedConfigFile(ConfigFile):
    """A table with a DataVersion that moves on each change, and change listeners."""

    def __init__(self, path: str, clock: Callable[[], float] = time.time) -> None:
        super().__init__(path)
        self.data_version = DataVersion()
        self._clock = clock
        self._listeners: list[Callable[[], None]] = []

    def on_change(self, listener: Callable[[], None]) -> None:
        """``listener()`` after each change."""
        self._listeners.append(listener)

    def touch(self) -> None:
        """A new version of unchanged content: what is registered from it changed
        (brokerPermission), and name servers only re-read a table whose version moved."""
        self._bump()

    def _adopt(self, data_version: DataVersion) -> None:
        """The table was replaced by a master's (a slave's sync): take its version as is."""
        self.data_version = data_version
        self._dirty = True
        for listener in self._listeners:
            listener()

    def _bump(self) -> None:
        self.data_version = DataVersion(
            self.data_version.counter + 1,
            int(self._clock() * 1000),
            self.data_version.state_version,
        )
        self._dirty = True
        for listener in self._listeners:
            listener()
