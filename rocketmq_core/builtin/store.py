"""Built-in store pieces: the memory store, the consume-queue and index dispatchers,
and the ``async`` and ``sync`` flush policies."""

from __future__ import annotations

from ..hookspecs import hookimpl
from ..registry import Deferred


def consume_queue_dispatcher(store):
    from ..store.api import HasConsumeQueues

    return store.put_position if isinstance(store, HasConsumeQueues) else None


def index_dispatcher(store):
    from ..store.api import HasIndex

    if not isinstance(store, HasIndex) or not store.config.message_index_enable:
        return None
    return store.put_index


@hookimpl
def rocketmq_register_stores(register):
    register("memory", Deferred("rocketmq_core.store.memory:MemoryStore"))


@hookimpl
def rocketmq_register_dispatchers(register):
    register("consume_queue", consume_queue_dispatcher)
    register("index", index_dispatcher)


@hookimpl
def rocketmq_register_flush_policies(register):
    from ..store.flush import AsyncFlush, SyncFlush

    register("async", AsyncFlush.from_config)
    register("sync", SyncFlush.from_config)
