"""Maps keyed by MessageQueue, as fastjson writes them: the queue object itself is the
key (``{{"brokerName":"b","queueId":0,"topic":"T"}:...}``, CODES.md §5.3). fastjson.loads
returns such a key as a tuple of (name, value) pairs; standard JSON writers quote it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ...errors import BodyError
from ..heartbeat import MessageQueue
from ..json_body import load_object

T = TypeVar("T")

QueueKey = tuple[tuple[str, Any], ...]


def queue_key(queue: MessageQueue) -> QueueKey:
    """``queue`` as a map key that fastjson.dumps writes as the object itself."""
    return tuple(queue.to_json().items())


def queue_of_key(key: Any) -> MessageQueue:
    """The MessageQueue a map key names: an object key, or the object quoted as a string."""
    if isinstance(key, tuple):
        return MessageQueue.from_json(dict(key))
    if isinstance(key, str):
        return MessageQueue.from_json(load_object(key.encode(), "message queue key"))
    raise BodyError(f"{key!r} is not a message queue key")


def encode_queue_table(
    table: Mapping[MessageQueue, T], entry: Callable[[T], Any]
) -> dict[QueueKey, Any]:
    return {queue_key(queue): entry(value) for queue, value in table.items()}


def decode_queue_table(
    raw: Any, entry: Callable[[Any], T], what: str, name: str = "offsetTable"
) -> dict[MessageQueue, T]:
    """A MessageQueue-keyed table (``name``); null or absent is an empty table."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise BodyError(f"the {name} of the {what} body is not a JSON object")
    return {queue_of_key(key): entry(value) for key, value in raw.items()}
