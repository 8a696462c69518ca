"""The SDK, blocking: for scripts, Django/Flask views and Spark executors.

    from rocketmq_core.client.sync import Producer

    with Producer("PG", namesrv_addr="127.0.0.1:9876") as producer:
        result = producer.send(Message("Orders", b"hello"))

Each class wraps its async twin: every coroutine method becomes a blocking call run
on one event loop thread shared by the process's blocking clients. Calls may come
from many threads at once. The loop thread starts with the first client and stops
with the last; clients still open at interpreter exit are shut down first, so no
thread is left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import inspect
import threading
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal

from . import admin as _admin
from . import pull_consumer as _pull_consumer
from . import push as _push
from . import transaction as _transaction
from .message import ReceivedMessage
from .producer import Producer as AsyncProducer

LOOP_THREAD_NAME = "rocketmq-client-loop"


class _SharedLoop:
    """One event loop thread for every blocking client of the process, ref-counted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self.portal: BlockingPortal | None = None

    def acquire(self) -> BlockingPortal:
        with self._lock:
            if self.portal is None:
                try:
                    import uvloop  # noqa: F401

                    options: dict[str, Any] = {"use_uvloop": True}
                except ImportError:
                    options = {}
                self._portal_cm = start_blocking_portal("asyncio", options, name=LOOP_THREAD_NAME)
                self.portal = self._portal_cm.__enter__()
            self._users += 1
            return self.portal

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users > 0 or self._portal_cm is None:
                return
            portal_cm, self._portal_cm, self.portal = self._portal_cm, None, None
        portal_cm.__exit__(None, None, None)


_LOOP = _SharedLoop()
_OPEN: weakref.WeakSet[_Blocking] = weakref.WeakSet()


def _shutdown_open_clients() -> None:
    for client in list(_OPEN):
        # exiting anyway: one broken client must not keep the others open
        with contextlib.suppress(Exception):
            client.shutdown()


# run before the interpreter joins non-daemon threads (the loop thread is one)
_register = getattr(threading, "_register_atexit", atexit.register)
_register(_shutdown_open_clients)


class _Blocking:
    """A blocking face over an async client: ``start``/``shutdown`` (or ``with``), and
    each coroutine method of the async client as a blocking method."""

    _async_class: Callable[..., Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._client = self._async_class(*args, **kwargs)
        self._context: AbstractContextManager[Any] | None = None
        self._portal: BlockingPortal | None = None
        self._state_lock = threading.Lock()

    def start(self) -> Any:
        with self._state_lock:
            if self._context is not None:
                return self
            portal = _LOOP.acquire()
            context = portal.wrap_async_context_manager(self._client)
            try:
                context.__enter__()
            except BaseException:
                _LOOP.release()
                raise
            self._portal, self._context = portal, context
            _OPEN.add(self)
        return self

    def shutdown(self) -> None:
        with self._state_lock:
            context, self._context = self._context, None
            if context is None:
                return
            _OPEN.discard(self)
            try:
                context.__exit__(None, None, None)
            finally:
                self._portal = None
                _LOOP.release()

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    @property
    def async_client(self) -> Any:
        """The async client underneath, for coroutines handed to ``call``."""
        return self._client

    def call(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Block on ``await function(*args, **kwargs)`` run on the clients' loop thread:
        every blocking method goes through here, and so can work that awaits many of the
        client's coroutines at once."""
        return self._running_portal().call(functools.partial(function, *args, **kwargs))

    def call_soon(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
        """Start ``function(*args, **kwargs)`` on the loop thread and return at once; the
        Future holds its result. Lets a caller overlap a request with its own work."""
        return self._running_portal().start_task_soon(functools.partial(function, *args, **kwargs))

    def _running_portal(self) -> BlockingPortal:
        portal = self._portal
        if portal is None:
            raise RuntimeError(f"{type(self).__name__} is not started: call start() or use 'with'")
        return portal

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if inspect.iscoroutinefunction(attribute):
            return functools.partial(self.call, attribute)
        return attribute


class Producer(_Blocking):
    """Blocking Producer: ``send``, ``send_batch``, ``send_oneway`` block until done;
    ``send_with_callback`` returns at once and calls back on the loop thread."""

    _async_class: Callable[..., Any] = AsyncProducer  # a TransactionProducer's differs

    def send_with_callback(self, message: Any, callback: Callable[..., Any], **kwargs: Any) -> None:
        self.call(_start_callback_send, self._client, message, callback, kwargs)


class TransactionProducer(Producer):
    """Blocking TransactionProducer: ``send_in_transaction`` blocks until the executor
    ran and the broker was told; a plain executor or checker runs in a worker thread."""

    _async_class = _transaction.TransactionProducer


async def _start_callback_send(
    producer: AsyncProducer, message: Any, callback: Callable[..., Any], kwargs: dict[str, Any]
) -> None:
    producer.send_with_callback(message, callback, **kwargs)


class PushConsumer(_Blocking):
    """Blocking PushConsumer: a plain-function listener runs in worker threads."""

    _async_class = _push.PushConsumer


class PullConsumer(_Blocking):
    _async_class = _pull_consumer.PullConsumer


class LitePullConsumer(_Blocking):
    """Blocking LitePullConsumer: ``poll(timeout)`` or ``for message in consumer``
    (iteration ends when the consumer is shut down)."""

    _async_class = _pull_consumer.LitePullConsumer

    def __iter__(self) -> Iterator[ReceivedMessage]:
        while self._context is not None:
            try:
                messages = self.call(self._client.poll)
            except RuntimeError:
                return  # shut down meanwhile
            yield from messages


class Admin(_Blocking):
    _async_class = _admin.Admin
