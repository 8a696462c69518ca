"""``rocketmq standalone``: a name server and a broker from one command."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import anyio
import pytest

from rocketmq_core.client import sync
from rocketmq_core.client.message import Message, SendStatus
from rocketmq_core.plugins import load_plugins
from rocketmq_core.protocol.bodies import TopicRouteData
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.client import RemotingClient

READY = re.compile(
    r"rocketmq standalone ready: name server (\S+), broker (\S+) \(store (\S+) in (\S+)\)"
)


class Standalone:
    """``rocketmq standalone`` in a child process, read until its ready line."""

    def __init__(self, tmp_path, conf, store: str) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rocketmq_core.cli",
                "standalone",
                "-c",
                str(conf),
                "--namesrv-listen",
                "127.0.0.1:0",
                "--store",
                store,
            ],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "HOME": str(tmp_path)},
        )
        deadline = time.monotonic() + 30
        match = None
        while match is None and time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line:
                break
            match = READY.search(line)
        if match is None:
            self.process.kill()
            raise AssertionError(f"no ready line: {self.process.stderr.read()}")
        self.namesrv, self.broker, self.store, self.root = match.groups()

    def stop(self) -> str:
        """SIGTERM, and what it printed until it exited (it must exit cleanly)."""
        try:
            self.process.send_signal(signal.SIGTERM)
            _out, err = self.process.communicate(timeout=20)
        finally:
            self.process.kill()
        assert self.process.returncode == 0, err
        assert "Traceback" not in err
        # the last word, once the broker's store is flushed and closed
        assert err.strip().splitlines()[-1].endswith("rocketmq.broker: standalone stopped"), err
        return err


@pytest.mark.parametrize("store", ["mmap", "rocksdb"])
def test_standalone_serves_routes_keeps_messages_and_stops_cleanly(tmp_path, store):
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"listenPort=0\nstorePathRootDir={tmp_path / 'store'}\n"
        "mappedFileSizeCommitLog=4194304\nmaxHashSlotNum=1000\nmaxIndexNum=4000\n"
    )
    first = Standalone(tmp_path, conf, store)
    try:
        assert (first.store, first.root) == (store, str(tmp_path / "store"))

        async def route_of_default_topic():
            async with RemotingClient(load_plugins().registry.transports.get("tcp")) as client:
                request = RemotingCommand.request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}
                )
                return await client.invoke(first.namesrv, request, timeout=5)

        reply = anyio.run(route_of_default_topic)
        assert reply.code == ResponseCode.SUCCESS
        route = TopicRouteData.decode(reply.body)
        assert route.broker_datas[0].broker_addrs == {0: first.broker}
        with sync.Producer("PG-cli", first.namesrv) as producer:
            for number in range(20):
                message = Message("CliTopic", b"m%d" % number, keys=[f"k{number}"])
                assert producer.send(message).status is SendStatus.SEND_OK
    finally:
        first.stop()
    assert (tmp_path / "store" / "config" / "topics.json").exists()
    assert not (tmp_path / "store" / "abort").exists()  # the store closed cleanly

    second = Standalone(tmp_path, conf, store)  # same store directory: the messages stay
    try:
        consumer = sync.LitePullConsumer("CG-cli", second.namesrv, consume_from="first")
        consumer.subscribe("CliTopic")
        bodies = []
        with consumer:
            for message in consumer:
                bodies.append(message.body)
                if len(bodies) == 20:
                    break
    finally:
        second.stop()
    assert sorted(bodies) == sorted(b"m%d" % number for number in range(20))
