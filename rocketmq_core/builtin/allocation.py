"""Built-in queue-allocation strategies, registered by name: ``averagely`` (the default),
``averagely_by_circle`` and ``consistent_hash`` (10 virtual nodes, MD5).

The strategies that need settings are not registered: build ``ByConfig(queues)``,
``ByMachineRoom(rooms)``, ``MachineRoomNearby(inner, resolver)`` or a
``ConsistentHash(virtual_nodes, hash_function)`` from ``rocketmq_core.client.allocation``
and hand the object to the consumer.
"""

from __future__ import annotations

from ..hookspecs import hookimpl


@hookimpl
def rocketmq_register_allocation_strategies(register):
    from ..client.allocation import averagely, averagely_by_circle, consistent_hash

    for strategy in (averagely, averagely_by_circle, consistent_hash):
        register(strategy.name, strategy)
