"""kill -9 of ``rocketmq standalone`` while delayed messages wait: after a restart on
the same store, every acknowledged one is delivered, none early (a few may come twice:
progress is saved every second or so, as in RocketMQ)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from rocketmq_core.client import sync
from rocketmq_core.client.message import Message

READY = re.compile(r"rocketmq standalone ready: name server (\S+), broker (\S+)")
TOPIC = "CrashDelayed"
LEVEL_MS = {1: 1000, 2: 2000, 3: 3000}


@contextmanager
def standalone(directory: Path):
    """``rocketmq standalone`` on ``directory``; yields (process, name server address)."""
    conf = directory / "broker.conf"
    conf.write_text(
        f"listenPort=0\nstorePathRootDir={directory / 'store'}\nmessageDelayLevel=1s 2s 3s\n"
        "mappedFileSizeCommitLog=16777216\nmaxHashSlotNum=1000\nmaxIndexNum=40000\n"
        "flushDelayOffsetInterval=1000\n"
    )
    command = [sys.executable, "-m", "rocketmq_core.cli", "standalone", "-c", str(conf)]
    command += ["--namesrv-listen", "127.0.0.1:0"]
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, env={**os.environ, "HOME": str(directory)}
    )
    try:
        match = None
        for line in process.stderr:
            match = READY.search(line)
            if match:
                break
        assert match, "rocketmq standalone exited before it was ready"
        threading.Thread(target=process.stderr.read, daemon=True).start()  # keep draining
        yield process, match.group(1)
    finally:
        process.kill()
        process.wait(10)


def test_delayed_messages_survive_a_kill_9_mid_delay(tmp_path):
    due: dict[str, int] = {}  # msg id -> earliest store time allowed (-level for levels)
    with standalone(tmp_path) as (process, namesrv):
        with sync.Admin(namesrv) as admin:
            admin.create_topic(TOPIC, queues=2)
        with sync.Producer("PG-crash", namesrv) as producer:
            for number in range(1000):
                if number % 2:
                    level = 1 + number % 3
                    message = Message(TOPIC, b"L%d" % number, delay_level=level)
                    due[producer.send(message).msg_id] = -level
                else:
                    deliver = int(time.time() * 1000) + 1200 + number * 2
                    message = Message(TOPIC, b"T%d" % number, deliver_time_ms=deliver)
                    due[producer.send(message).msg_id] = deliver
        time.sleep(1.5)  # some are delivered, most still wait
        process.kill()
        process.wait(10)
    received: dict[str, list] = {}
    with standalone(tmp_path) as (_process, namesrv):

        def listener(messages):
            for message in messages:
                received.setdefault(message.msg_id, []).append(message)

        consumer = sync.PushConsumer("CG-crash", namesrv, listener=listener, consume_from="first")
        consumer.subscribe(TOPIC)
        with consumer:
            deadline = time.monotonic() + 30
            while len(received) < len(due) and time.monotonic() < deadline:
                time.sleep(0.1)
    missing = set(due) - set(received)
    assert not missing, f"{len(missing)} delayed messages were lost in the crash"
    duplicates = sum(len(copies) - 1 for copies in received.values())
    assert duplicates < len(due) / 2, f"{duplicates} duplicates: progress was not saved"
    for msg_id, copies in received.items():
        message = copies[0]
        earliest = due[msg_id]
        if earliest < 0:
            earliest = message.born_timestamp + LEVEL_MS[-earliest]
        assert message.store_timestamp >= earliest, msg_id
