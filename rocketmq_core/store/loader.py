"""Building a store by name from the installed plugins."""

from __future__ import annotations

from ..plugins import PluginHost, load_plugins
from .api import MessageStore, StoreConfig


def create_store(name: str, config: StoreConfig, host: PluginHost | None = None) -> MessageStore:
    """The store plugin ``name`` with ``config.flush`` and every registered dispatcher.

    Not opened yet: ``await store.open()``. ConfigError names the choices when a store
    or flush policy is unknown.
    """
    host = host or load_plugins()
    policy = host.registry.flush_policies.get(config.flush)(config)
    store = host.registry.stores.get(name)(config, policy)
    for entry in host.registry.dispatchers.entries():
        dispatcher = entry.obj(store)
        if dispatcher is not None:
            store.add_dispatcher(dispatcher)
    return store
