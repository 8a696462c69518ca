"""The C++ client's producer and consumers, wrapped for tests: started and shut down
as context managers, consumers collecting what they receive."""

from __future__ import annotations

import ctypes
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

_instances = itertools.count()

# The C++ client runs its first route update on a timer thread ~10 ms after start. A
# send racing it can miss the lock on the new broker connection (the client's log:
# "GetTransport of:... get timed_mutex timeout") and fail at once with "No route info
# of this topic", whatever the broker would answer. Letting that update pass first
# keeps a test's first send from depending on the client's thread timing.
STARTUP_SETTLE_S = 0.1


def start_producer(instance: Any) -> None:
    """Start a C++ producer and let its first timer tasks run (STARTUP_SETTLE_S)."""
    instance.start()
    time.sleep(STARTUP_SETTLE_S)


@dataclass(frozen=True)
class Received:
    topic: str
    queue_id: int
    queue_offset: int
    tags: bytes
    keys: bytes
    body: bytes
    seq: bytes | None
    reconsume_times: int
    consumer: str
    born_timestamp: int = 0
    store_timestamp: int = 0


@contextmanager
def producer(client, namesrv: str, group: str = "PID-interop") -> Iterator[Any]:
    instance = client.Producer(group)
    instance.set_namesrv_addr(namesrv)
    start_producer(instance)
    try:
        yield instance
    finally:
        instance.shutdown()


def message(client, topic: str, number: int, tags: str = "TagA", keys: str | None = None):
    built = client.Message(topic)
    built.set_keys(keys if keys is not None else f"key-{number}")
    built.set_tags(tags)
    built.set_property("seq", str(number))
    built.set_body(f"body-{number}")
    return built


class CollectingConsumer:
    """A push consumer that records each message; ``reconsume`` may ask for one again."""

    def __init__(
        self,
        client,
        namesrv: str,
        group: str,
        topic: str,
        expression: str = "*",
        *,
        orderly: bool = False,
        broadcasting: bool = False,
        reconsume: Callable[[Received], bool] | None = None,
    ) -> None:
        self.name = f"consumer-{next(_instances)}"
        model = client.MessageModel.BROADCASTING if broadcasting else client.MessageModel.CLUSTERING
        self.consumer = client.PushConsumer(group, orderly=orderly, message_model=model)
        self.consumer.set_namesrv_addr(namesrv)
        # one process, several consumers of a group: each needs its own client id
        self.consumer.set_instance_name(self.name)
        self.received: list[Received] = []
        self._reconsume = reconsume
        self._changed = threading.Condition()
        self._client = client
        self._subscribe(topic, expression)

    def _subscribe(self, topic: str, expression: str) -> None:
        client = self._client

        def on_message(_consumer, handle) -> int:
            incoming = client.RecvMessage(handle)
            item = Received(
                incoming.topic,
                incoming.queue_id,
                incoming.queue_offset,
                incoming.tags,
                incoming.keys,
                incoming.body,
                incoming.get_property("seq"),
                incoming.reconsume_times,
                self.name,
                incoming.born_timestamp,
                incoming.store_timestamp,
            )
            with self._changed:
                self.received.append(item)
                self._changed.notify_all()
            if self._reconsume is not None and self._reconsume(item):
                return 1  # RECONSUME_LATER
            return 0  # CONSUME_SUCCESS

        # the wheel's subscribe turns a raised exception into a ctypes warning and an
        # acknowledgement; registering the callback ourselves lets it ask for a retry
        client.ffi_check(
            client.dll.Subscribe(self.consumer._handle, topic.encode(), expression.encode())
        )
        self.consumer._register_callback(on_message)

    def __enter__(self) -> CollectingConsumer:
        self.consumer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.consumer.shutdown()

    def wait_for(self, count: int, timeout: float = 40.0) -> list[Received]:
        """Wait until ``count`` messages arrived (or the time is up); returns them all."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.received) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            return list(self.received)


def wait_until(condition: Callable[[], bool], timeout: float = 20.0, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


def sharding_selector(queue_count: int, _message, arg) -> int:
    """The wheel's hashing selector, reading the int it was given."""
    return ctypes.cast(arg, ctypes.POINTER(ctypes.c_int))[0] % queue_count
