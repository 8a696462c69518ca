"""Where a consumer group's progress is kept: on the brokers (clustering) or in a
local file (broadcasting, where every consumer reads every message).

Both keep offsets in memory as consumption advances and persist them every
``persist_offset_interval`` and at shutdown; an offset is the next one to consume.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

import anyio
import orjson

from ..errors import RemotingError, ResponseError
from ..persist import atomic_write
from ..protocol.heartbeat import MessageQueue
from .consumer_requests import ConsumerError, commit_offset, query_committed_offset
from .instance import ClientInstance

log = logging.getLogger("rocketmq.client.offsets")


class OffsetStore(Protocol):
    async def load(self) -> None: ...

    async def read(self, queue: MessageQueue) -> int:
        """The stored offset, -1 when there is none."""
        ...

    def update(self, queue: MessageQueue, offset: int, *, only_forward: bool = False) -> None: ...

    def cached(self, queue: MessageQueue) -> int: ...

    def remove(self, queue: MessageQueue) -> None: ...

    async def persist(self, queues: set[MessageQueue] | None = None) -> list[MessageQueue]:
        """Commit the changed offsets; returns the queues whose commit failed (logged)."""
        ...


class _MemoryOffsets:
    def __init__(self) -> None:
        self.offsets: dict[MessageQueue, int] = {}
        self._dirty: set[MessageQueue] = set()

    def update(self, queue: MessageQueue, offset: int, *, only_forward: bool = False) -> None:
        if only_forward and self.offsets.get(queue, -1) >= offset:
            return
        self.offsets[queue] = offset
        self._dirty.add(queue)

    def cached(self, queue: MessageQueue) -> int:
        return self.offsets.get(queue, -1)

    def remove(self, queue: MessageQueue) -> None:
        self.offsets.pop(queue, None)
        self._dirty.discard(queue)


class BrokerOffsetStore(_MemoryOffsets):
    """Clustering: the group's offsets live on the broker of each queue."""

    def __init__(self, instance: ClientInstance, group: str) -> None:
        super().__init__()
        self.instance = instance
        self.group = group

    async def load(self) -> None:
        pass

    async def read(self, queue: MessageQueue) -> int:
        offset = await query_committed_offset(self.instance, self.group, queue)
        if offset >= 0:
            self.offsets[queue] = offset
        return offset

    async def persist(self, queues: set[MessageQueue] | None = None) -> list[MessageQueue]:
        failed = []
        for queue in list(self._dirty):
            if queues is not None and queue not in queues:
                continue
            offset = self.offsets.get(queue)
            if offset is None:
                continue
            try:
                at_master = await commit_offset(self.instance, self.group, queue, offset)
            except (RemotingError, ResponseError, ConsumerError) as exc:
                log.warning("offset %d of %s not committed: %s", offset, queue, exc)
                failed.append(queue)
                continue
            # a slave's copy is overwritten by its next sync: send it again until the
            # master has it (HA.md §6.7)
            if at_master and self.offsets.get(queue) == offset:
                self._dirty.discard(queue)
        return failed


class LocalFileOffsetStore(_MemoryOffsets):
    """Broadcasting: each consumer keeps its own offsets in a JSON file."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    @classmethod
    def for_group(cls, directory: Path, client_name: str, group: str) -> LocalFileOffsetStore:
        return cls(directory / client_name / group / "offsets.json")

    async def load(self) -> None:
        try:
            data = orjson.loads(await anyio.Path(self.path).read_bytes())
        except FileNotFoundError:
            return
        except orjson.JSONDecodeError as exc:
            raise ConsumerError(
                f"the offsets file {self.path} is not JSON ({exc}): fix or delete it"
            ) from None
        for entry in data.get("offsetTable", []):
            queue = MessageQueue.from_json(entry)
            self.offsets[queue] = int(entry["offset"])

    async def read(self, queue: MessageQueue) -> int:
        return self.offsets.get(queue, -1)

    async def persist(self, queues: set[MessageQueue] | None = None) -> list[MessageQueue]:
        if not self._dirty:
            return []
        table = [
            {**queue.to_json(), "offset": offset} for queue, offset in sorted(self.offsets.items())
        ]
        data = orjson.dumps({"offsetTable": table}, option=orjson.OPT_INDENT_2)
        await anyio.to_thread.run_sync(atomic_write, self.path, data)
        self._dirty.clear()
        return []  # a failed write raises
