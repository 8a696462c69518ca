"""Put hooks see the messages their markers select; a hook without markers sees all."""

from __future__ import annotations

from rocketmq_core.broker.put_hooks import PutHooks
from rocketmq_core.store.api import MessageToStore


class _Marked:
    markers = (b"DELAY\x01",)

    def __init__(self) -> None:
        self.seen: list[bytes] = []

    def __call__(self, message: MessageToStore) -> MessageToStore:
        self.seen.append(message.properties)
        return message


def test_markers_select_the_messages_a_hook_may_act_on():
    hooks = PutHooks([_Marked()])
    assert hooks.act_on(b"TAGS\x01a\x02DELAY\x013\x02")
    assert not hooks.act_on(b"TAGS\x01a\x02WAIT\x01true\x02")
    # a batch asks once, its records' properties joined
    batch = [b"KEYS\x01k1\x02", b"KEYS\x01k2\x02DELAY\x012\x02"]
    assert hooks.act_on(b"\x02".join(batch))
    assert not hooks.act_on(b"\x02".join(batch[:1]))


def test_a_hook_without_markers_acts_on_every_message():
    hooks = PutHooks([_Marked(), lambda message: message])
    assert hooks.act_on(b"") and hooks.act_on(b"TAGS\x01a\x02")
    assert not PutHooks().act_on(b"DELAY\x013\x02") and not PutHooks()


def test_prepare_runs_every_hook_in_order():
    first, second = _Marked(), _Marked()
    message = MessageToStore("T", 0, b"body", b"DELAY\x011\x02")
    assert PutHooks([first, second]).prepare(message) is message
    assert first.seen == second.seen == [b"DELAY\x011\x02"]
