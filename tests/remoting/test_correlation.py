"""PendingRequests matches responses to requests and says which have run out of time,
with no event loop: the time is an argument."""

from __future__ import annotations

import pytest

from rocketmq_core.errors import LocalProtocolError
from rocketmq_core.protocol.codes import FLAG_RESPONSE
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.correlation import PendingRequests


def response_to(opaque: int) -> RemotingCommand:
    return RemotingCommand(0, opaque=opaque, flag=FLAG_RESPONSE)


def pending_with(*requests: tuple[int, float]) -> PendingRequests[str]:
    """A table holding waiter ``w<opaque>`` for each ``(opaque, deadline)``."""
    pending: PendingRequests[str] = PendingRequests()
    for opaque, deadline in requests:
        pending.add(opaque, f"w{opaque}", deadline)
    return pending


def test_responses_in_order_hand_back_their_waiters_once():
    pending = pending_with((1, 10.0), (2, 10.0), (3, 10.0))
    assert [pending.complete(response_to(opaque)) for opaque in (1, 2, 3)] == ["w1", "w2", "w3"]
    assert len(pending) == 0
    assert pending.complete(response_to(2)) is None
    assert pending.unknown_responses == 1


def test_responses_out_of_order_each_find_their_own_waiter():
    pending = pending_with((1, 10.0), (2, 11.0), (3, 12.0))
    assert pending.complete(response_to(3)) == "w3"
    assert pending.complete(response_to(1)) == "w1"
    assert 2 in pending and 1 not in pending and 3 not in pending
    assert pending.expired(100.0) == ["w2"]
    assert pending.unknown_responses == 0


def test_a_response_nobody_waits_for_is_counted_and_changes_nothing():
    pending = pending_with((1, 10.0))
    assert pending.complete(response_to(7)) is None
    assert pending.unknown_responses == 1
    assert pending.next_deadline() == 10.0 and 1 in pending


def test_a_request_expires_at_its_deadline_exactly_not_before():
    pending = pending_with((1, 5.0), (2, 5.0), (3, 6.0))
    assert pending.expired(4.999) == []
    assert pending.expired(5.0) == ["w1", "w2"]
    assert pending.expired(5.0) == []
    assert pending.next_deadline() == 6.0
    assert pending.expired(6.0) == ["w3"]
    assert len(pending) == 0 and pending.next_deadline() is None


def test_expired_requests_come_earliest_first_whatever_order_they_were_added_in():
    pending = pending_with((1, 3.0), (2, 0.5), (3, 1.5), (4, 0.5))
    assert pending.next_deadline() == 0.5
    assert pending.expired(10.0) == ["w2", "w4", "w3", "w1"]


def test_a_late_response_to_an_expired_request_is_unknown():
    pending = pending_with((1, 1.0))
    assert pending.expired(1.0) == ["w1"]
    assert pending.complete(response_to(1)) is None
    assert pending.unknown_responses == 1


def test_next_deadline_skips_answered_and_discarded_requests():
    pending = pending_with((1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0))
    pending.complete(response_to(1))
    assert pending.next_deadline() == 2.0
    pending.discard(2)
    pending.complete(response_to(3))
    assert pending.next_deadline() == 4.0
    pending.complete(response_to(4))
    assert pending.next_deadline() is None
    assert pending.expired(100.0) == []


def test_a_short_timeout_after_a_long_one_is_due_first():
    pending = pending_with((1, 30.0), (2, 0.05))
    assert pending.next_deadline() == 0.05
    assert pending.expired(0.05) == ["w2"]
    assert pending.next_deadline() == 30.0


def test_an_opaque_still_waiting_is_refused_and_the_first_request_keeps_it():
    pending = pending_with((1, 10.0))
    with pytest.raises(LocalProtocolError, match="opaque 1 is already waiting") as refused:
        pending.add(1, "other", 1.0)
    assert refused.value.opaque == 1
    assert pending.next_deadline() == 10.0
    assert pending.complete(response_to(1)) == "w1"


def test_an_opaque_is_reusable_once_answered_and_keeps_only_its_new_deadline():
    pending = pending_with((1, 5.0))
    pending.complete(response_to(1))
    pending.add(1, "again", 5.0)  # same id and deadline: its old heap entry must not count
    pending.add(2, "w2", 6.0)
    assert pending.expired(5.0) == ["again"]
    assert pending.next_deadline() == 6.0
    pending.complete(response_to(2))
    pending.add(2, "later", 9.0)
    assert pending.expired(6.0) == []
    assert pending.next_deadline() == 9.0


def test_drain_hands_back_every_waiter_in_order_and_leaves_nothing():
    pending = pending_with((3, 2.0), (1, 1.0), (2, 3.0))
    pending.complete(response_to(1))
    assert pending.drain() == ["w3", "w2"]
    assert len(pending) == 0
    assert pending.next_deadline() is None
    assert pending.expired(100.0) == []
    assert pending.complete(response_to(3)) is None


def test_many_answered_requests_leave_the_deadlines_small():
    pending: PendingRequests[int] = PendingRequests()
    for opaque in range(100_000):
        pending.add(opaque, opaque, 3.0 + opaque * 1e-5)
        if opaque >= 64:  # 64 in flight, answered in order
            assert pending.complete(response_to(opaque - 64)) == opaque - 64
    assert len(pending) == 64
    assert len(pending._deadlines) < 1_000  # the answered requests' entries were dropped
    assert pending.next_deadline() == 3.0 + (100_000 - 64) * 1e-5
    assert pending.expired(10.0) == list(range(100_000 - 64, 100_000))
