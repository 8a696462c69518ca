"""The stateful comparison of a store with the MemoryStore model (hypothesis): random
puts, batches, reads and reopens on both, which must answer alike. Imported only when the
model test runs, so the kit loads without hypothesis installed."""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskStatus
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ...protocol.message import (
    TRANSACTION_COMMIT,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED,
    TRANSACTION_ROLLBACK,
    decode_record,
)
from ...store.api import (
    MessageStore,
    MessageToStore,
    PutResult,
)
from .helpers import (
    BORN_HOST,
    BORN_HOST_V6,
    LONG_TOPIC,
    StoreFactory,
    make_message,
    opened_store,
    tag_filter,
)

# the stateful comparison: ten short random runs per backend keep the whole suite fast;
# ROCKETMQ_MODEL_EXAMPLES raises the count (`tox -e soak` runs 100 per backend)
MODEL_CONFIG = {"max_message_size": 2048}  # bodies up to 2100 bytes: some are refused
MODEL_SETTINGS = settings(
    max_examples=int(os.environ.get("ROCKETMQ_MODEL_EXAMPLES", "10")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
MODEL_PLACES = [("Alpha", 0), ("Alpha", 1), ("Beta", 0), (LONG_TOPIC, 3)]
MODEL_FILTERS = [None, tag_filter("A"), tag_filter("B"), tag_filter("A", "C"), tag_filter("C")]
MODEL_KINDS = [TRANSACTION_NOT_TYPE] * 4 + [
    TRANSACTION_PREPARED,
    TRANSACTION_COMMIT,
    TRANSACTION_ROLLBACK,
]


async def _own_store(
    factory: StoreFactory,
    directory: Path,
    overrides: dict[str, Any],
    *,
    task_status: TaskStatus[tuple[MessageStore, anyio.Event]],
) -> None:
    # one task opens and closes the store: a task group entered in open() must be left by
    # the task that entered it (trio insists)
    async with opened_store(factory, directory, **overrides) as store:
        stop = anyio.Event()
        task_status.started((store, stop))
        await stop.wait()


class _OwnedStore:
    """A store living in a blocking portal's event loop, called from the test's thread."""

    def __init__(
        self,
        portal: BlockingPortal,
        factory: StoreFactory,
        directory: Path,
        overrides: dict[str, Any],
    ) -> None:
        self.portal = portal
        self._done, (self.store, self._stop) = portal.start_task(
            _own_store, factory, directory, overrides
        )

    def call(self, method: Callable[..., Any], *args: Any) -> Any:
        return self.portal.call(method, *args)

    def snapshot(self, places: Iterable[tuple[str, int]]) -> dict[str, Any]:
        """queues() and every place's (min, max) offsets, read in one event-loop step."""

        def take() -> dict[str, Any]:
            offsets = {p: (self.store.min_offset(*p), self.store.max_offset(*p)) for p in places}
            return {"queues": self.store.queues(), "offsets": offsets}

        return self.portal.call(take)

    def close(self) -> None:
        self.portal.call(self._stop.set)
        self._done.result(timeout=30)


def describe(record: bytes | memoryview) -> tuple[Any, ...]:
    """What two stores must agree on about a record (not its CommitLog offset or time)."""
    m = decode_record(bytes(record), check_crc=True)
    return (
        m.size,
        m.magic,
        m.body_crc,
        m.topic,
        m.queue_id,
        m.queue_offset,
        m.flag,
        m.sys_flag,
        m.born_timestamp,
        m.born_host,
        m.store_host,
        m.reconsume_times,
        m.prepared_transaction_offset,
        m.body,
        m.properties,
    )


def model_machine(
    portal: BlockingPortal,
    factory: StoreFactory,
    memory_factory: StoreFactory,
    root: Path,
    config: dict[str, Any],
    persistent: bool,
) -> type[RuleBasedStateMachine]:
    runs = itertools.count()

    class StoreMatchesModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            run = next(runs)
            self.directory = root / f"store{run}"
            self.model = _OwnedStore(portal, memory_factory, root / f"model{run}", config)
            try:
                self.store = _OwnedStore(portal, factory, self.directory, config)
            except BaseException:
                self.model.close()
                raise
            self.number = 0

        def teardown(self) -> None:
            try:
                self.store.close()
            finally:
                self.model.close()

        def message(self, place: tuple[str, int], size: int, tag: str | None, kind: int):
            self.number += 1
            number = self.number
            return make_message(
                *place,
                (number.to_bytes(4, "big") * (size // 4 + 1))[:size],
                tags=tag,
                keys=f"k{number % 7} n{number}",
                uniq_key=f"{number:032X}",
                sys_flag=kind,
                flag=number % 3,
                reconsume_times=number % 2,
                born_host=BORN_HOST_V6 if number % 5 == 0 else BORN_HOST,
            )

        def both(self, method: str, *args: Any) -> tuple[Any, Any]:
            copies = [dataclasses.replace(a) if isinstance(a, MessageToStore) else a for a in args]
            expected = self.model.call(getattr(self.model.store, method), *args)
            actual = self.store.call(getattr(self.store.store, method), *copies)
            return actual, expected

        @staticmethod
        def same_put(actual: PutResult, expected: PutResult) -> None:
            assert actual.status is expected.status, (actual.remark, expected.remark)
            if expected.status.stored:
                assert actual.queue_offset == expected.queue_offset
                assert len(actual.msg_ids) == len(expected.msg_ids)

        @rule(
            place=st.sampled_from(MODEL_PLACES),
            size=st.integers(0, 2100),
            tag=st.sampled_from(["A", "B", "C", None]),
            kind=st.sampled_from(MODEL_KINDS),
        )
        def put(self, place, size, tag, kind):
            self.same_put(*self.both("put", self.message(place, size, tag, kind)))

        @rule(
            place=st.sampled_from(MODEL_PLACES),
            items=st.lists(
                st.tuples(st.integers(0, 2100), st.sampled_from(["A", "B", None])),
                min_size=1,
                max_size=5,
            ),
            stray=st.sampled_from([None, None, None, ("Alpha", 2)]),
        )
        def put_batch(self, place, items, stray):
            batch = [self.message(place, size, tag, 0) for size, tag in items]
            if stray is not None:
                batch.append(self.message(stray, 1, None, 0))
            self.same_put(*self.both("put_batch", batch))

        @rule(
            data=st.data(),
            place=st.sampled_from([*MODEL_PLACES, ("Gamma", 0)]),
            count=st.integers(1, 10),
            tags=st.sampled_from(MODEL_FILTERS),
            max_bytes=st.sampled_from([1, 3000, 256 * 1024]),
        )
        def get(self, data, place, count, tags, max_bytes):
            top = self.model.call(self.model.store.max_offset, *place)
            offset = data.draw(st.integers(-1, top + 2), label="offset")
            actual, expected = self.both("get", *place, offset, count, tags, max_bytes)
            assert actual.status is expected.status
            assert actual.next_begin_offset == expected.next_begin_offset
            assert (actual.min_offset, actual.max_offset) == (
                expected.min_offset,
                expected.max_offset,
            )
            assert actual.queue_offsets == expected.queue_offsets
            assert [describe(r) for r in actual.records] == [describe(r) for r in expected.records]

        @precondition(lambda self: persistent)
        @rule()
        def reopen(self):
            self.store.close()
            self.store = _OwnedStore(portal, factory, self.directory, config)

        @invariant()
        def same_queues_and_offsets(self):
            places = [*MODEL_PLACES, ("Gamma", 0)]
            assert self.store.snapshot(places) == self.model.snapshot(places)

    return StoreMatchesModel


def compare_with_model(
    backend: str,
    backend_options: dict[str, Any],
    factory: StoreFactory,
    memory_factory: StoreFactory,
    root: Path,
    config: dict[str, Any],
    persistent: bool,
    test_settings: settings | None = None,
) -> None:
    """Random runs of puts, batches, reads and reopens on ``factory``'s store and on the
    model side by side, under ``root``; fails at the first answer that differs."""
    # stateful machines are synchronous: the stores live in a portal's event loop
    with start_blocking_portal(backend, backend_options) as portal:
        machine = model_machine(
            portal, factory, memory_factory, root, {**config, **MODEL_CONFIG}, persistent
        )
        run_state_machine_as_test(machine, settings=test_settings or MODEL_SETTINGS)
