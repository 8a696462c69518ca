"""Hook implementations of the store_mmap plugin (hooks only, no logic)."""

from rocketmq_core.hookspecs import hookimpl
from rocketmq_core.registry import Deferred


@hookimpl
def rocketmq_register_stores(register):
    register("mmap", Deferred("rocketmq_store_mmap.store:MmapStore"))
