"""LOCK_BATCH_MQ and UNLOCK_BATCH_MQ: orderly consumers' queue locks (CODES.md §4.8)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...protocol.command import RemotingCommand
from ...protocol.heartbeat import LockBatchRequest, LockBatchResponse

if TYPE_CHECKING:
    from ...remoting.processor import RequestContext
    from ..app import Broker


def lock_batch_mq(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    body = LockBatchRequest.decode(request.body)
    held = broker.queue_locks.lock(body.consumer_group, body.client_id, body.queues, broker.now())
    return request.response(body=LockBatchResponse(held).encode())


def unlock_batch_mq(broker: Broker, ctx: RequestContext, request: RemotingCommand):
    body = LockBatchRequest.decode(request.body)
    broker.queue_locks.unlock(body.consumer_group, body.client_id, body.queues)
    return request.response()
