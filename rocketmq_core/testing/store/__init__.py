"""StoreConformance: the contract every MessageStore keeps (``store/api.py``; STORE.md §3-7,
§11, §12, §16; MESSAGE.md §1-2).

A store plugin subclasses it and adds only a factory::

    class TestMmapStoreConformance(StoreConformance):
        @pytest.fixture
        def store_factory(self, plugin_host):
            def factory(directory, **overrides):
                config = StoreConfig(root_dir=str(directory), **overrides)
                return create_store("mmap", config, plugin_host)

            return factory

The factory returns an unopened store built with ``create_store`` (a store built
without it has no consume queue); ``overrides`` are StoreConfig fields the tests choose:
small files so that they roll (``config_defaults``, applied to every store the suite
opens), ``flush``, ``file_reserved_time``, ``max_message_size``, ``store_host``.
Reopening a store means a new one from the factory on the same directory.

Knobs a subclass may turn:

- ``persistent = False``: a reopened store is empty; the reopen and crash tests assert it.
- ``crash_copy(source, target)``: what a crash leaves of a store that is still open. By
  default a copy of its directory taken while it is open (kill -9 with the page cache
  kept; under the ``sync`` flush every acknowledged message is on disk anyway).
- ``tear_tail(directory)``: damage the newest end of the log in such a copy and return
  True; the store must then recover a consistent prefix. The default returns False (not
  supported) and the torn-tail test checks the untouched copy instead.
- ``torn_tail_loss``: how many of the newest messages a torn tail may cost.

Every test runs on both anyio backends; none skips. The stateful test compares the store
with the MemoryStore model over random sequences of puts, batches, reads and reopens; its
module (``model``, hypothesis) is imported only when that test runs.

Modules: ``helpers`` (messages, opening, reading), ``workload`` (acknowledged messages
and the assertions on them), ``base`` (the knobs), one per section of the contract
(``reads``, ``writes``, ``lookups``, ``durability``), ``conformance`` (the class to
subclass), ``model`` (the stateful comparison).
"""

from .conformance import StoreConformance
from .helpers import (
    BORN_HOST,
    BORN_HOST_V6,
    BORN_TIMESTAMP,
    LONG_TOPIC,
    SMALL_FILES,
    STORE_HOST,
    StoreFactory,
    assert_same_records,
    bodies,
    decode_all,
    expiry_config,
    make_message,
    opened_store,
    quiet_cleanup,
    read_queue,
    tag_filter,
)
from .workload import (
    Acked,
    Workload,
    assert_empty,
    assert_holds,
    put_acked,
    put_batch_acked,
    put_numbered,
    put_workload,
)

__all__ = [
    "BORN_HOST",
    "BORN_HOST_V6",
    "BORN_TIMESTAMP",
    "LONG_TOPIC",
    "SMALL_FILES",
    "STORE_HOST",
    "Acked",
    "StoreConformance",
    "StoreFactory",
    "Workload",
    "assert_empty",
    "assert_holds",
    "assert_same_records",
    "bodies",
    "decode_all",
    "expiry_config",
    "make_message",
    "opened_store",
    "put_acked",
    "put_batch_acked",
    "put_numbered",
    "put_workload",
    "quiet_cleanup",
    "read_queue",
    "tag_filter",
]
