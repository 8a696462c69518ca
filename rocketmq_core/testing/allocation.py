"""AllocationConformance: the contract every queue-allocation strategy keeps (ROUTE.md §7).

A strategy plugin subclasses it and adds only a ``strategy`` fixture::

    class TestByZoneConformance(AllocationConformance):
        @pytest.fixture
        def strategy(self):
            return ByZone()

Every consumer of a group computes its own share from the same route and the same
consumer list, so the suite calls the strategy once per consumer on random groups and
checks what the shares add up to: no queue owned twice, every queue owned, shares no
more than one queue apart, and the same answer whatever order the inputs come in.

Knobs a subclass may turn:

- ``balanced = False``: shares may differ by more than one queue (consistent hashing);
  the subclass then has no balance test at all (a skipped test would pass in CI).
- ``covers_all = False``: some queues may have no owner by design (machine-room
  allocation with rooms no consumer reads); the shares must still be disjoint.
- ``broker_names``: the broker names the random queues live on, for strategies that read
  meaning into them (``"<idc>@<name>"``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ..client.allocation import AllocationStrategy
from ..protocol.heartbeat import MessageQueue

GROUP = "conformance_group"

# Strategies hold no state between examples, so a function-scoped fixture is fine; and
# each subclass runs the same methods on its own queues, so an example one subclass saved
# is just one more random example for another (hence differing executors).
_SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors],
)

client_id_values = st.text(alphabet="abcz019.@-_", min_size=1, max_size=12)


class AllocationConformance:
    balanced: bool = True
    covers_all: bool = True
    broker_names: tuple[str, ...] = ("broker-a", "broker-b", "broker-c")

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.balanced:
            cls.test_shares_are_at_most_one_queue_apart = None  # not collected

    def queue_lists(self) -> st.SearchStrategy[list[MessageQueue]]:
        queues = st.builds(
            MessageQueue,
            topic=st.sampled_from(("TopicTest", "TopicOrder")),
            broker_name=st.sampled_from(self.broker_names),
            queue_id=st.integers(min_value=0, max_value=15),
        )
        return st.lists(queues, min_size=1, max_size=40, unique=True)

    def client_id_lists(self) -> st.SearchStrategy[list[str]]:
        return st.lists(client_id_values, min_size=1, max_size=8, unique=True)

    def shares(
        self,
        strategy: AllocationStrategy,
        queues: Sequence[MessageQueue],
        client_ids: Sequence[str],
    ) -> dict[str, list[MessageQueue]]:
        return {cid: strategy(GROUP, cid, list(queues), list(client_ids)) for cid in client_ids}

    def test_has_a_name(self, strategy):
        assert isinstance(strategy.name, str) and strategy.name, f"{strategy!r} has no name"

    @_SETTINGS
    @given(data=st.data())
    def test_every_queue_has_at_most_one_owner_and_all_have_one(self, strategy, data):
        queues = data.draw(self.queue_lists(), label="queues")
        client_ids = data.draw(self.client_id_lists(), label="client_ids")
        shares = self.shares(strategy, queues, client_ids)
        owners = Counter(queue for share in shares.values() for queue in share)
        for cid, share in shares.items():
            assert isinstance(share, list), f"{cid!r} got a {type(share).__name__}, not a list"
        twice = [queue for queue, count in owners.items() if count > 1]
        assert not twice, f"queues with more than one owner: {twice}; shares: {shares}"
        strangers = set(owners) - set(queues)
        assert not strangers, f"queues that were not offered were handed out: {strangers}"
        if self.covers_all:
            orphans = set(queues) - set(owners)
            assert not orphans, f"queues nobody owns: {orphans}; shares: {shares}"

    @_SETTINGS
    @given(data=st.data())
    def test_shares_are_at_most_one_queue_apart(self, strategy, data):
        queues = data.draw(self.queue_lists(), label="queues")
        client_ids = data.draw(self.client_id_lists(), label="client_ids")
        sizes = {
            cid: len(share) for cid, share in self.shares(strategy, queues, client_ids).items()
        }
        assert max(sizes.values()) - min(sizes.values()) <= 1, f"uneven shares: {sizes}"

    @_SETTINGS
    @given(data=st.data())
    def test_the_order_of_the_inputs_does_not_matter(self, strategy, data):
        queues = data.draw(self.queue_lists(), label="queues")
        client_ids = data.draw(self.client_id_lists(), label="client_ids")
        shuffled_queues = data.draw(st.permutations(queues), label="shuffled queues")
        shuffled_ids = data.draw(st.permutations(client_ids), label="shuffled client_ids")
        for cid in client_ids:
            assert strategy(GROUP, cid, shuffled_queues, shuffled_ids) == strategy(
                GROUP, cid, sorted(queues), sorted(client_ids)
            ), f"{cid!r} got another share when the inputs came in another order"

    @_SETTINGS
    @given(data=st.data())
    def test_the_same_inputs_give_the_same_share(self, strategy, data):
        queues = data.draw(self.queue_lists(), label="queues")
        client_ids = data.draw(self.client_id_lists(), label="client_ids")
        first = self.shares(strategy, queues, client_ids)
        assert self.shares(strategy, queues, client_ids) == first

    @_SETTINGS
    @given(data=st.data())
    def test_a_client_not_in_the_group_gets_nothing(self, strategy, data):
        queues = data.draw(self.queue_lists(), label="queues")
        client_ids = data.draw(self.client_id_lists(), label="client_ids")
        outsider = data.draw(client_id_values.filter(lambda cid: cid not in client_ids))
        assert strategy(GROUP, outsider, queues, client_ids) == []

    def test_no_consumers_is_an_error(self, strategy):
        queues = [MessageQueue("TopicTest", self.broker_names[0], 0)]
        with pytest.raises(ValueError):
            strategy(GROUP, "client-1", queues, [])

    def test_an_empty_current_client_id_is_an_error(self, strategy):
        queues = [MessageQueue("TopicTest", self.broker_names[0], 0)]
        with pytest.raises(ValueError):
            strategy(GROUP, "", queues, ["client-1"])
