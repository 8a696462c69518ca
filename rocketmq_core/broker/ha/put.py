"""The broker's own puts (a send-back, a commit, a delay delivery) stored the way a send
is: appended, then on disk as the flush policy says and, on a SYNC_MASTER, on a slave
(HA.md §3). The send processor runs the same steps inline, to answer without a task
when nothing waits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...store.api import MessageToStore, PutResult, PutStatus

if TYPE_CHECKING:
    from ..app import Broker


async def put_replicated(broker: Broker, message: MessageToStore) -> PutResult:
    """Store ``message``; a stored status other than PUT_OK says what failed to follow
    (FLUSH_DISK_TIMEOUT, SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT)."""
    if broker.ha is None:  # no replication: the store's own put (with any wait the store has)
        return await broker.store.put(message)
    return await durable_and_replicated(broker, *append_replicated(broker, message))


def append_replicated(broker: Broker, message: MessageToStore) -> tuple[PutResult, int]:
    """``put_replicated``'s first step, which waits for nothing: the store's append and
    HA's (``HAService.after_append``); returns the result and the CommitLog end a
    SYNC_MASTER waits for a slave to ack (-1: none), for ``durable_and_replicated``."""
    result = broker.store.append(message)
    ha = broker.ha
    return result, ha.after_append(result, message.properties) if ha is not None else -1


async def durable_and_replicated(broker: Broker, result: PutResult, replica_end: int) -> PutResult:
    """``result`` once its flush (``result.flush_to`` >= 0) and a slave's ack of
    ``replica_end`` (>= 0) are done; a failed replica overrides the flush's status."""
    replica = result.status  # SLAVE_NOT_AVAILABLE already, when after_append found none
    if result.flush_to >= 0:
        result = await broker.store.wait_durable(result)
    if replica_end >= 0 and broker.ha is not None:
        replica = await broker.ha.wait_replicated(replica_end)
    if replica is not PutStatus.PUT_OK:
        result.status = replica
    return result
