"""The ``ha`` broker service: a master serves its slaves, a slave follows its master.

Built only for a store that replicates (``replication_refusal``); the broker refuses
to start a SLAVE or SYNC_MASTER on one that does not. Every put runs ``after_append``
(the writers wake at once instead of polling; a SYNC_MASTER checks for a slave) and,
on a SYNC_MASTER, waits for a slave's ack before it answers (HA.md §3): the send
processor through ``when_replicated`` (a callback answers it: no task per send), a
send that also waits for a flush and the broker's own puts through ``wait_replicated``
(``put.py``). One timer per master (``_expire_waits``) times out every waiting send.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import anyio
from anyio.abc import TaskStatus

from ...store.api import (
    PutResult,
    PutStatus,
    ReplicationSource,
    ReplicationTarget,
    replication_refusal,
)
from ...store.rules import waits_for_store
from .master import ASYNC_GATHER_WINDOW, HAMaster, MasterSettings
from .progress import ReplicaProgress
from .slave import HAClient, SlaveSettings

if TYPE_CHECKING:
    from ..app import Broker

log = logging.getLogger("rocketmq.broker.ha")

# the sends' timer looks at the deadlines at most this often (s): a timeout is late by no more
EXPIRY_GAP = 0.01
# haMasterAddress shorter than this is taken as unset, as Java does
_SHORTEST_ADDRESS = 6


class HAService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        config = broker.config
        self.progress = ReplicaProgress(config.ha_slave_fallbehind_max)
        self.master: HAMaster | None = None
        self.client: HAClient | None = None
        # learned from the name servers' REGISTER_BROKER replies (slaves)
        self.master_ha_address: str | None = None
        self.master_address: str | None = None
        self._waits_begun = anyio.Event()  # set: a send waits for a slave (wakes the timer)

    @classmethod
    def for_broker(cls, broker: Broker) -> HAService | None:
        """The service, or None for a store that does not replicate (an ASYNC_MASTER on
        such a store runs without; other roles were refused at start-up)."""
        if replication_refusal(broker.store) is not None:
            return None
        return cls(broker)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        config = self.broker.config
        store = self.broker.store
        async with anyio.create_task_group() as group:
            if config.is_slave:
                self.client = HAClient(
                    cast(ReplicationTarget, store),
                    self.ha_master_address,
                    SlaveSettings(
                        heartbeat_interval=config.ha_send_heartbeat_interval / 1000,
                        housekeeping_interval=config.ha_housekeeping_interval / 1000,
                    ),
                )
                group.start_soon(self.client.run)
            else:
                self.master = HAMaster(
                    cast(ReplicationSource, store),
                    self.progress,
                    MasterSettings(
                        transfer_batch_size=config.ha_transfer_batch_size,
                        heartbeat_interval=config.ha_send_heartbeat_interval / 1000,
                        housekeeping_interval=config.ha_housekeeping_interval / 1000,
                        gather_window=(
                            0.0 if config.broker_role == "SYNC_MASTER" else ASYNC_GATHER_WINDOW
                        ),
                    ),
                )
                group.start_soon(self._expire_waits)
                # registration carries host:haListenPort, so the real port is known first
                config.ha_listen_port = await group.start(self.master.serve, config.ha_listen_port)
            task_status.started()

    def ha_master_address(self) -> str | None:
        """Where a slave connects: haMasterAddress, else what the name servers said."""
        configured = self.broker.config.ha_master_address
        if len(configured) >= _SHORTEST_ADDRESS:
            return configured
        return self.master_ha_address

    def registered(self, master_address: str | None, ha_server_address: str | None) -> None:
        """A name server's REGISTER_BROKER reply: the live master of this broker name."""
        self.master_address = master_address or None
        if ha_server_address and ha_server_address != self.master_ha_address:
            log.info("master's HA address from the name server: %s", ha_server_address)
            self.master_ha_address = ha_server_address
            if self.client is not None:
                self.client.address_changed()

    # --- the put path ----------------------------------------------------------------------

    def after_append(self, result: PutResult, properties: bytes) -> int:
        """The HA step of an append, run before anything else is appended: the writers
        are woken; on a SYNC_MASTER, unless ``properties`` say not to wait, the CommitLog
        end a slave must ack is returned for ``when_replicated`` (else -1), or, when no
        slave can be waited for, ``result`` is set to SLAVE_NOT_AVAILABLE at once."""
        status = result.status
        if status is not PutStatus.PUT_OK and not status.stored:  # `is` first: ~0.3 us less
            return -1
        master = self.master  # ``appended`` written out: every send runs this
        if master is not None:
            master.appended()
        if self.broker.config.broker_role != "SYNC_MASTER":
            return -1
        if not waits_for_store(properties):  # WAIT other than true: answered at once
            return -1
        end = self.broker.store.max_commit_log_offset  # this append's end: nothing ran since
        replica = self.check(end)
        if replica is None:
            return end
        if replica is not PutStatus.PUT_OK:
            result.status = replica  # stored, but on no slave: the caller is told
        return -1

    def appended(self) -> None:
        """Something was appended: the writers send it now rather than at their next poll."""
        if self.master is not None:
            self.master.appended()

    def check(self, end: int) -> PutStatus | None:
        """A SYNC_MASTER send ending at ``end``: PUT_OK when a slave has it already,
        SLAVE_NOT_AVAILABLE when none can be waited for, None: ``when_replicated``."""
        progress = self.progress
        if not progress.slave_ok(end):
            return PutStatus.SLAVE_NOT_AVAILABLE
        if progress.acked >= end:
            return PutStatus.PUT_OK
        return None

    def when_replicated(self, end: int, replicated: Callable[[bool], None]) -> None:
        """Call ``replicated(True)`` once a slave acks ``end``, ``replicated(False)``
        (FLUSH_SLAVE_TIMEOUT) once slaveTimeout has passed: no task, no timer of its own
        (``_expire_waits`` is the one timer). ``replicated`` runs in a slave's reader or in
        that timer: it must not raise."""
        deadline = time.monotonic() + self.broker.config.slave_timeout / 1000
        self.progress.wait(end, replicated, deadline)
        if not self._waits_begun.is_set():
            self._waits_begun.set()

    async def wait_replicated(self, end: int) -> PutStatus:
        """PUT_OK once a slave acks ``end``; FLUSH_SLAVE_TIMEOUT after slaveTimeout."""
        if self.progress.acked >= end:
            return PutStatus.PUT_OK
        done = anyio.Event()
        outcome: list[bool] = []

        def replicated(acked: bool) -> None:
            outcome.append(acked)
            done.set()

        self.when_replicated(end, replicated)
        await done.wait()
        return PutStatus.PUT_OK if outcome[0] else PutStatus.FLUSH_SLAVE_TIMEOUT

    async def _expire_waits(self) -> None:
        """The one timer of the sends waiting for a slave: FLUSH_SLAVE_TIMEOUT to each
        past its deadline, looking at most every EXPIRY_GAP seconds."""
        progress = self.progress
        try:
            while True:
                deadline = progress.next_deadline()
                if deadline is None:
                    self._waits_begun = anyio.Event()
                    await self._waits_begun.wait()
                    continue
                # the head may be acked meanwhile: then this wake finds a later deadline
                await anyio.sleep(max(deadline - time.monotonic(), EXPIRY_GAP))
                progress.expire(time.monotonic())
        finally:
            # no wait outlives its timer (the HA service stopping): each gets its timeout
            progress.expire(math.inf)
