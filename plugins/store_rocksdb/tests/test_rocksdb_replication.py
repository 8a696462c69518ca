"""The RocksDB store has no CommitLog files to ship: a broker that needs replication is
told, in one line, to use the mmap store (docs/spec/HA.md §4)."""

from pathlib import Path

from rocketmq_core.store.api import (
    ReplicationSource,
    ReplicationTarget,
    StoreConfig,
    replication_refusal,
)
from rocketmq_core.store.loader import create_store


def test_rocksdb_store_refuses_replication(tmp_path: Path) -> None:
    store = create_store("rocksdb", StoreConfig(root_dir=str(tmp_path / "store")))
    assert not isinstance(store, ReplicationSource)
    assert not isinstance(store, ReplicationTarget)
    assert replication_refusal(store) == (
        "the rocksdb store cannot replicate its CommitLog; use store=mmap for brokerRole"
        " SLAVE, or for SYNC_MASTER/ASYNC_MASTER with slaves"
    )


def test_mmap_store_replicates(tmp_path: Path) -> None:
    store = create_store("mmap", StoreConfig(root_dir=str(tmp_path / "store")))
    assert replication_refusal(store) is None
