"""Hook implementations of the store_rocksdb plugin (hooks only, no logic)."""

from rocketmq_core.hookspecs import hookimpl
from rocketmq_core.registry import Deferred


@hookimpl
def rocketmq_register_stores(register):
    # imported when a broker opens it, not when the plugin loads: rocksdict is heavy
    register("rocksdb", Deferred("rocketmq_store_rocksdb.store:RocksDBStore"))
