"""A push consumer in a process of its own, for tests that kill it (test_consumer_restart).

    python consumer_process.py NAMESRV GROUP TOPIC OUTPUT PERSIST_INTERVAL

For each message it consumes it appends ``<body> <time.time()>`` as a line to OUTPUT
and flushes before acknowledging, so that a SIGKILL loses no line of a message it
acknowledged. It runs until it is killed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import anyio

from rocketmq_core.client.config import ClientConfig
from rocketmq_core.client.message import ReceivedMessage
from rocketmq_core.client.push import PushConsumer


async def consume(namesrv: str, group: str, topic: str, output: Path, interval: float) -> None:
    config = ClientConfig(namesrv_addr=namesrv, persist_offset_interval=interval)
    with output.open("a", encoding="ascii") as lines:

        async def record(messages: list[ReceivedMessage]) -> None:
            now = time.time()
            # one write per call: a kill leaves whole lines only
            lines.write("".join(f"{message.body.decode()} {now}\n" for message in messages))
            lines.flush()

        consumer = PushConsumer(group, config=config, listener=record, consume_from="first")
        consumer.subscribe(topic, "*")
        async with consumer:
            await anyio.sleep_forever()


def main() -> None:
    namesrv, group, topic, output, interval = sys.argv[1:]
    anyio.run(consume, namesrv, group, topic, Path(output), float(interval))


if __name__ == "__main__":
    main()
