"""Hook implementations of the store_mmap plugin (hooks only, no logic)."""

from rocketmq_core.hookspecs import hookimpl


@hookimpl
def rocketmq_register_stores(register):
    from .store import MmapStore

    register("mmap", MmapStore)
