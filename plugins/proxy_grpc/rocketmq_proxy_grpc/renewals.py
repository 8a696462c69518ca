"""Proxy-side renewal of the messages a client received with ``auto_renew`` (push
consumers): the proxy keeps them invisible while the client works, and maps the handle
the client holds to the latest one when it acks (GRPC.md §6)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from .consume import Consuming

log = logging.getLogger("rocketmq.proxy")

CHECK_INTERVAL_S = 1.0
MAX_RENEW_MS = 3 * 3600 * 1000  # a message held longer goes back to the broker's revive


@dataclass
class Renewal:
    client_id: str
    group: str
    topic: str
    current: str  # the latest receipt handle
    revive_ms: int  # when the current handle expires
    started_ms: int
    # held while the current handle is used: by a renewal replacing it, or by the
    # client's ack, change or dead-lettering with it (else the renewal's checkpoint could
    # outlive the ack, and the acked message come back)
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    stopped: bool = False  # a renewal failed: the current handle stays, no more renewals


def _revive_ms(receipt_handle: str) -> int:
    fields = receipt_handle.split(" ")
    return int(fields[1]) + int(fields[2])  # pop time + invisible time


class Renewals:
    """Handles under renewal, by the handle the client received; one proxy loop."""

    def __init__(self, consuming: Consuming) -> None:
        self.consuming = consuming
        self._renewals: dict[str, Renewal] = {}

    def track(self, client_id: str, group: str, topic: str, receipt_handle: str) -> None:
        now = int(time.time() * 1000)
        self._renewals[receipt_handle] = Renewal(
            client_id, group, topic, receipt_handle, _revive_ms(receipt_handle), now
        )

    def current(self, receipt_handle: str) -> str:
        renewal = self._renewals.get(receipt_handle)
        return renewal.current if renewal is not None else receipt_handle

    @asynccontextmanager
    async def settled(self, receipt_handle: str) -> AsyncIterator[str]:
        """The latest handle for ``receipt_handle``, with no renewal of it under way
        until the block ends: use it (ack, change, dead-letter) inside. A block that ends
        without an error settles it: it is renewed no more (forgotten, under the lock)."""
        renewal = self._renewals.get(receipt_handle)
        if renewal is None:
            yield receipt_handle
            return
        async with renewal.lock:
            yield renewal.current
            self.forget(receipt_handle)

    def forget(self, receipt_handle: str) -> None:
        self._renewals.pop(receipt_handle, None)

    def forget_client(self, client_id: str) -> None:
        for handle in [h for h, r in self._renewals.items() if r.client_id == client_id]:
            del self._renewals[handle]

    def __len__(self) -> int:
        return len(self._renewals)

    async def run(self) -> None:
        """Renew each handle a third of the auto-renew time before it expires."""
        while True:
            await anyio.sleep(CHECK_INTERVAL_S)
            await self.renew_due(int(time.time() * 1000))

    async def renew_due(self, now_ms: int) -> None:
        invisible_ms = self.consuming.auto_renew_invisible_ms
        for original, renewal in list(self._renewals.items()):
            if renewal.stopped or renewal.revive_ms - now_ms > invisible_ms // 3:
                continue
            if now_ms - renewal.started_ms > MAX_RENEW_MS:
                self.forget(original)
                continue
            async with renewal.lock:
                if self._renewals.get(original) is not renewal:
                    continue  # acked, changed or dead-lettered while this waited
                try:
                    renewed = await self.consuming.change_invisible_time(
                        renewal.group, renewal.topic, renewal.current, invisible_ms
                    )
                except Exception as exc:  # expired, say: the broker decides
                    log.debug("receipt handle not renewed: %s", exc)
                    # the client's ack still names the latest handle, not its first
                    renewal.stopped = True
                    continue
                renewal.current = renewed
                renewal.revive_ms = _revive_ms(renewed)
