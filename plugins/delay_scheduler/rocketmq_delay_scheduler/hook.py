"""The put hook: a message that asks to wait is parked until it is due (STORE.md §8).

- A delay level (property ``DELAY`` = L > 0) parks it in SCHEDULE_TOPIC_XXXX, queue
  L - 1 (L clamped to the last level); the level service moves it back when due.
- A timer (``TIMER_DELIVER_MS`` absolute, ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS``
  relative, RocketMQ 5) parks it in rmq_sys_wheel_timer with ``TIMER_OUT_MS``, the time
  it is due; the timer service delivers it then. A level wins over a timer.

Either way ``REAL_TOPIC`` and ``REAL_QID`` keep where it goes, and the consume-queue tag
slot holds the due time. Everything else passes untouched, at the cost of two ``in``
checks on the encoded properties.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rocketmq_core.errors import RequestRefused
from rocketmq_core.protocol.codes import ResponseCode
from rocketmq_core.protocol.constants import SCHEDULE_TOPIC, TIMER_TOPIC, TRANS_HALF_TOPIC
from rocketmq_core.protocol.message import (
    TRANSACTION_MASK,
    TRANSACTION_PREPARED,
    TRANSACTION_ROLLBACK,
    parse_properties,
)
from rocketmq_core.store.api import MessageToStore

from .delivery import TIMER_REQUESTS, delay_levels

if TYPE_CHECKING:
    from rocketmq_core.broker.app import Broker

# messages the hook never parks: already parked, or transaction halves (their delay,
# if any, applies once committed)
_INTERNAL_TOPICS = frozenset({SCHEDULE_TOPIC, TIMER_TOPIC, TRANS_HALF_TOPIC})
_NOT_DELIVERABLE = frozenset({TRANSACTION_PREPARED, TRANSACTION_ROLLBACK})


class DelayPutHook:
    markers = (b"DELAY\x01", b"TIMER_")  # messages without them are not shown to the hook

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.levels_ms = delay_levels(broker.config)

    def __call__(self, message: MessageToStore) -> MessageToStore:
        properties = message.properties
        if b"DELAY\x01" not in properties and b"TIMER_" not in properties:
            return message
        if (
            message.topic in _INTERNAL_TOPICS
            or message.sys_flag & TRANSACTION_MASK in _NOT_DELIVERABLE
            or b"TRAN_MSG\x01true" in properties
        ):
            return message
        parsed = parse_properties(properties.decode())
        level = _delay_level(parsed.get("DELAY"))
        now_ms = int(time.time() * 1000)
        if level > 0:
            return self._park_at_level(message, parsed, level, now_ms)
        if any(name in parsed for name in TIMER_REQUESTS) and "TIMER_OUT_MS" not in parsed:
            return self._park_as_timer(message, parsed, now_ms)
        return message

    def _park_at_level(
        self, message: MessageToStore, properties: dict[str, str], level: int, now_ms: int
    ) -> MessageToStore:
        level = min(level, len(self.levels_ms))
        for name in TIMER_REQUESTS:
            properties.pop(name, None)
        properties["DELAY"] = str(level)
        parked = message.parked(
            SCHEDULE_TOPIC, level - 1, properties, tags_code=now_ms + self.levels_ms[level - 1]
        )
        service = self.broker.services.get("delay_levels")
        if service is not None:
            service.wake(level)
        return parked

    def _park_as_timer(
        self, message: MessageToStore, properties: dict[str, str], now_ms: int
    ) -> MessageToStore:
        config = self.broker.config
        deliver_ms = _deliver_time(properties, now_ms)
        if deliver_ms <= now_ms:
            return message  # due already: delivered as it is, like RocketMQ
        limit_ms = config.timer_max_delay_sec * 1000
        if deliver_ms - now_ms > limit_ms:
            raise RequestRefused(
                ResponseCode.MESSAGE_ILLEGAL,
                f"timer message illegal: it asks to be delivered {deliver_ms - now_ms} ms from"
                f" now, more than the max delay {limit_ms} ms (timerMaxDelaySec)",
            )
        if not config.timer_wheel_enable:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                "accurate timer message is not enabled, timerWheelEnable is false",
            )
        properties["TIMER_OUT_MS"] = str(deliver_ms)
        parked = message.parked(TIMER_TOPIC, 0, properties, tags_code=deliver_ms)
        service = self.broker.services.get("timer_wheel")
        if service is not None:
            service.wake()
        return parked


def _delay_level(text: str | None) -> int:
    if not text:
        return 0
    try:
        return int(text)
    except ValueError:
        raise RequestRefused(
            ResponseCode.MESSAGE_ILLEGAL, f"the DELAY property {text!r} is not a delay level"
        ) from None


def _deliver_time(properties: dict[str, str], now_ms: int) -> int:
    """The absolute delivery time a timer message asks for (RocketMQ's precedence)."""
    for name, to_ms in (
        ("TIMER_DELAY_SEC", lambda value: now_ms + value * 1000),
        ("TIMER_DELAY_MS", lambda value: now_ms + value),
        ("TIMER_DELIVER_MS", lambda value: value),
    ):
        text = properties.get(name)
        if text is None:
            continue
        try:
            value = int(text)
        except ValueError:
            raise RequestRefused(
                ResponseCode.MESSAGE_ILLEGAL,
                f"timer message illegal: {name} {text!r} is not a whole number",
            ) from None
        return to_ms(value)
    raise AssertionError("called without a timer property")
