"""The SDK: producers, consumers and admin, async-first under anyio; sync.py is the
blocking facade."""

from .transaction import LocalTransactionState, TransactionProducer, TransactionSendResult

__all__ = ["LocalTransactionState", "TransactionProducer", "TransactionSendResult"]
