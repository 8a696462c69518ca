"""The SDK: producers, consumers and admin, async-first under anyio; sync.py is the
blocking facade."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .transaction import LocalTransactionState, TransactionProducer, TransactionSendResult

__all__ = ["LocalTransactionState", "TransactionProducer", "TransactionSendResult"]


def __getattr__(name: str) -> Any:
    # imported on first use: a process that needs one module of the SDK gets just that one
    if name in __all__:
        from . import transaction

        return getattr(transaction, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
