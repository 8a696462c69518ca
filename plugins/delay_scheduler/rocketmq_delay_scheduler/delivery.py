"""What the level and timer services share: the levels, and the message a parked
record becomes when it is due (STORE.md §8.1)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rocketmq_core.broker.config import delay_levels_ms
from rocketmq_core.protocol.message import StoredMessage
from rocketmq_core.store.api import MessageToStore

if TYPE_CHECKING:
    from rocketmq_core.broker.config import BrokerConfig

# what a producer sets to ask for a timer (RocketMQ 5), and what the broker adds
TIMER_REQUESTS = ("TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")
_PARKING = ("DELAY", "TIMER_OUT_MS", *TIMER_REQUESTS)


def delay_levels(config: BrokerConfig) -> list[int]:
    """Milliseconds per delay level, level 1 first (``messageDelayLevel``)."""
    return delay_levels_ms(config.message_delay_level)


def now_ms() -> int:
    return int(time.time() * 1000)


def delivered_message(parked: StoredMessage) -> MessageToStore:
    """The parked message as it goes to its real topic and queue: same body, flag, born
    time and host, reconsume count, keys, tags and id; the parking properties dropped
    (REAL_TOPIC and REAL_QID stay, as RocketMQ leaves them)."""
    properties = dict(parked.properties)
    for name in _PARKING:
        properties.pop(name, None)
    properties["WAIT"] = "false"
    topic = properties.get("REAL_TOPIC", parked.topic)
    return MessageToStore.again(parked, topic, int(properties.get("REAL_QID", "0")), properties)
