"""The SDK: producers, consumers and admin, async-first under anyio; sync.py is the
blocking facade."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .transaction import LocalTransactionState, TransactionProducer, TransactionSendResult

__all__ = ["LocalTransactionState", "TransactionProducer", "TransactionSendResult"]

__getattr__ = lazy_exports(__name__, "transaction", __all__)
