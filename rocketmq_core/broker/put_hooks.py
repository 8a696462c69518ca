"""The broker's put hooks, and which messages they may act on.

A hook may declare ``markers``: the bytes without which it leaves a message's encoded
properties alone (the delay scheduler's ``DELAY\\x01`` and ``TIMER_``, transactions'
``TRAN_MSG\\x01``). A send whose properties hold no marker of any hook skips the hooks,
and a batch asks once for all its records: ~1.5 us less per batched message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..store.api import MessageToStore

PutHook = Callable[[MessageToStore], MessageToStore]


class PutHooks:
    """``markers``: every hook's markers, or None when a hook declares none (it may act
    on any message); the compiled send path reads it as ``act_on`` does."""

    __slots__ = ("_hooks", "markers")

    def __init__(self, hooks: Iterable[PutHook] = ()) -> None:
        self._hooks = list(hooks)
        self.markers: tuple[bytes, ...] | None
        markers: list[bytes] = []
        for hook in self._hooks:
            declared = getattr(hook, "markers", None)
            if declared is None:
                self.markers = None  # a hook that may act on any message sees every message
                break
            markers.extend(declared)
        else:
            self.markers = tuple(markers)

    def __bool__(self) -> bool:
        return bool(self._hooks)

    def act_on(self, properties: bytes) -> bool:
        """Whether a hook may change or refuse a message with these encoded properties
        (or a batch whose records' properties are joined with ``\\x02``)."""
        if self.markers is None:
            return bool(self._hooks)
        for marker in self.markers:  # noqa: SIM110 (any() of a generator costs more)
            if marker in properties:
                return True
        return False

    def prepare(self, message: MessageToStore) -> MessageToStore:
        """``message`` as the hooks leave it; a hook refuses by raising RequestRefused."""
        for hook in self._hooks:
            message = hook(message)
        return message
