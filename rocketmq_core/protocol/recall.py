"""Recall handles (RocketMQ 5.3): what a producer is given for a timer message and
hands back in RECALL_MESSAGE to cancel it before it is due.

The handle is URL-safe base64 (padded) of ``"v1 <topic> <brokerName> <time> <msgId>"``:
the real topic, the broker that holds the message, its delivery time in ms, and its
UNIQ_KEY. Clients read the broker name from it to know where to send the recall.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

_VERSION = "v1"


@dataclass(frozen=True, slots=True)
class RecallHandle:
    topic: str
    broker_name: str
    deliver_ms: int
    msg_id: str

    def encode(self) -> str:
        text = f"{_VERSION} {self.topic} {self.broker_name} {self.deliver_ms} {self.msg_id}"
        return base64.urlsafe_b64encode(text.encode()).decode()

    @classmethod
    def decode(cls, handle: str) -> RecallHandle:
        """ValueError saying what is wrong when ``handle`` is not one."""
        try:
            text = base64.urlsafe_b64decode(handle.encode()).decode()
        except (binascii.Error, UnicodeError, ValueError):
            raise ValueError("recall handle is invalid: not URL-safe base64 text") from None
        items = text.split(" ")
        if len(items) < 5 or items[0] != _VERSION:
            raise ValueError("recall handle is invalid: not a v1 handle")
        try:
            deliver_ms = int(items[3])
        except ValueError:
            raise ValueError("recall handle is invalid: its time is not a number") from None
        return cls(items[1], items[2], deliver_ms, items[4])
