"""Hook implementations of the store_rocksdb plugin (hooks only, no logic)."""

from rocketmq_core.hookspecs import hookimpl


@hookimpl
def rocketmq_register_stores(register):
    # imported when registered, not when the plugin is listed: rocksdict is heavy
    from .store import RocksDBStore

    register("rocksdb", RocksDBStore)
