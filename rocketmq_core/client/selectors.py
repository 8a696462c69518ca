"""Queue selectors for orderly sends: ``selector(queues, message, arg) -> queue``.

Messages that must stay in order go to one queue; a selector picks it from the
topic's writable queues. Any callable of that shape works.
"""

from __future__ import annotations

import itertools
import random
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from ..protocol.heartbeat import MessageQueue
from .message import Message

QueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]


def select_by_hash(queues: Sequence[MessageQueue], message: Message, arg: Any) -> MessageQueue:
    """The same ``arg`` (an order id, a sharding key) always lands on the same queue.

    Strings hash with CRC32, not Python's hash(), so every process agrees."""
    code = arg if isinstance(arg, int) else zlib.crc32(str(arg).encode())
    return queues[abs(code) % len(queues)]


def select_by_key(queues: Sequence[MessageQueue], message: Message, arg: Any) -> MessageQueue:
    """Hash the message's first key (arg is ignored)."""
    keys = message.key_list
    if not keys:
        raise ValueError("select_by_key needs a message with keys")
    return select_by_hash(queues, message, keys[0])


def select_random(queues: Sequence[MessageQueue], message: Message, arg: Any) -> MessageQueue:
    return random.choice(queues)


class RoundRobin:
    """Each call takes the next queue."""

    def __init__(self) -> None:
        self._counter = itertools.count()

    def __call__(self, queues: Sequence[MessageQueue], message: Message, arg: Any) -> MessageQueue:
        return queues[next(self._counter) % len(queues)]
