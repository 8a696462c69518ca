"""A transaction producer in a process of its own, for the test that kills it before
its decision (test_transactions).

    python transaction_producer_process.py NAMESRV GROUP TOPIC BODY READY_FILE

It sends BODY in a transaction whose local part never ends, creates READY_FILE once the
half message is stored, and waits to be killed. Asked by a check-back, it answers
UNKNOWN: as far as it knows, its transaction is still running.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from rocketmq_core.client.message import Message, ReceivedMessage
from rocketmq_core.client.transaction import LocalTransactionState, TransactionProducer


async def produce(namesrv: str, group: str, topic: str, body: str, ready: Path) -> None:
    async def executor(message: Message, arg: object) -> LocalTransactionState:
        ready.touch()  # the executor runs once the broker holds the half message
        await anyio.sleep_forever()
        return LocalTransactionState.COMMIT

    def checker(message: ReceivedMessage) -> LocalTransactionState:
        return LocalTransactionState.UNKNOWN

    async with TransactionProducer(group, namesrv, executor=executor, checker=checker) as producer:
        await producer.send_in_transaction(Message(topic, body.encode()))


def main() -> None:
    namesrv, group, topic, body, ready = sys.argv[1:]
    anyio.run(produce, namesrv, group, topic, body, Path(ready))


if __name__ == "__main__":
    main()
