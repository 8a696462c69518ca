"""``rocketmq standalone``: a name server and a broker from one command."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import anyio

from rocketmq_core.plugins import load_plugins
from rocketmq_core.protocol.bodies import TopicRouteData
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.client import RemotingClient

READY = re.compile(
    r"rocketmq standalone ready: name server (\S+), broker (\S+) \(store mmap in (\S+)\)"
)


def test_standalone_serves_routes_and_stops_cleanly(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"listenPort=0\nstorePathRootDir={tmp_path / 'store'}\n"
        "mappedFileSizeCommitLog=4194304\nmaxHashSlotNum=1000\nmaxIndexNum=4000\n"
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rocketmq_core.cli",
            "standalone",
            "-c",
            str(conf),
            "--namesrv-listen",
            "127.0.0.1:0",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    try:
        deadline = time.monotonic() + 30
        match = None
        while match is None and time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line:
                break
            match = READY.search(line)
        assert match, "no ready line"
        namesrv, broker, store = match.groups()
        assert store == str(tmp_path / "store")

        async def route_of_default_topic():
            async with RemotingClient(load_plugins().registry.transports.get("tcp")) as client:
                request = RemotingCommand.request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}
                )
                return await client.invoke(namesrv, request, timeout=5)

        reply = anyio.run(route_of_default_topic)
        assert reply.code == ResponseCode.SUCCESS
        route = TopicRouteData.decode(reply.body)
        assert route.broker_datas[0].broker_addrs == {0: broker}
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert "Traceback" not in err
    assert (tmp_path / "store" / "config" / "topics.json").exists()
    assert not (tmp_path / "store" / "abort").exists()  # the store closed cleanly
