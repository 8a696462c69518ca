"""A full disk is survivable: the broker starts on a full volume, serves pulls, refuses
sends with the code and remark Java's broker answers, and takes sends again once space
is freed, with no restart. A kill -9 while the volume is full restarts on it too.

The volume is a small tmpfs the test mounts (root only); where it cannot, the test
skips locally and fails under CI (tests/missing.py).
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import anyio
import pytest

from rocketmq_core.cli import main
from rocketmq_core.protocol.codes import ResponseCode
from rocketmq_core.protocol.message import iter_records
from rocketmq_core.remoting.client import RemotingClient
from tests.cpp_client import load_cpp_client
from tests.interop.cpp import message, producer
from tests.processes import StandaloneProcess, tmpfs

from .wire import pull_request, send_request

pytestmark = pytest.mark.anyio

VOLUME_MB = 48
JAVA_DISK_FULL = (
    "service not available now. It may be caused by one of the following reasons:"
    " the broker's disk is full ["
)


@pytest.fixture
def volume(tmp_path):
    """A tmpfs of VOLUME_MB, unmounted afterwards."""
    with tmpfs(tmp_path / "volume", VOLUME_MB) as point:
        yield point


def standalone(tmp_path: Path, store: Path) -> StandaloneProcess:
    """``rocketmq standalone`` with its store on the volume (kill -9 able)."""
    conf = f"storePathRootDir={store}\nlistenPort=0\nmappedFileSizeCommitLog={4 << 20}\n"
    return StandaloneProcess(tmp_path, conf)


def fill(volume: Path) -> Path:
    """Write a file until the volume has no space left; returns it."""
    filler = volume / "filler"
    chunk = bytes(1 << 20)
    with open(filler, "wb") as handle:
        try:
            while True:
                handle.write(chunk)
                handle.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return filler


async def send(client: RemotingClient, address: str, body: bytes):
    return await client.invoke(address, send_request(topic="Kept", body=body), timeout=5)


async def pulled_bodies(client: RemotingClient, address: str) -> list[bytes]:
    reply = await client.invoke(address, pull_request(topic="Kept", suspend=0), timeout=5)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    return [record.body for record in iter_records(reply.body)]


async def until_accepted(client: RemotingClient, address: str, body: bytes, within: float):
    deadline = time.monotonic() + within
    while True:
        reply = await send(client, address, body)
        if reply.code == ResponseCode.SUCCESS or time.monotonic() > deadline:
            return reply
        await anyio.sleep(0.1)


# the broker is a child process, the subject; the test's side is a RemotingClient, which
# the transport conformance suite runs on both backends
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_full_volume_refuses_sends_serves_pulls_and_recovers_without_restart(
    volume, tmp_path, plugin_host
):
    broker = standalone(tmp_path, volume / "store")
    broker.start()
    try:
        async with RemotingClient(plugin_host.registry.transports.get("tcp")) as client:
            for number in range(3):
                reply = await send(client, broker.broker, b"stored-%d" % number)
                assert reply.code == ResponseCode.SUCCESS, reply.remark
            await anyio.sleep(1.5)  # housekeeping writes the new topic to topics.json
            filler = fill(volume)
            await anyio.sleep(1.5)  # the free-space check runs every second
            refused = await send(client, broker.broker, b"while full")
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE, refused.remark
            assert refused.remark.startswith(JAVA_DISK_FULL), refused.remark
            await anyio.sleep(1.5)  # housekeeping writes fail meanwhile: the broker lives on
            assert broker.process.poll() is None, broker.output()

            broker.kill()  # kill -9 while full, then start on the full volume
            broker.start()
            assert await pulled_bodies(client, broker.broker) == [
                b"stored-0",
                b"stored-1",
                b"stored-2",
            ]
            refused = await send(client, broker.broker, b"still full")
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE, refused.remark
            assert refused.remark.startswith(JAVA_DISK_FULL), refused.remark

            filler.unlink()
            accepted = await until_accepted(client, broker.broker, b"space again", within=5)
            assert accepted.code == ResponseCode.SUCCESS, accepted.remark
            assert (await pulled_bodies(client, broker.broker))[-1] == b"space again"
        assert broker.stop() == 0, broker.output()
    finally:
        if broker.process.poll() is None:
            broker.process.kill()
            broker.process.wait()


def test_the_cpp_client_gets_the_disk_full_answer_and_the_route_stays(volume, tmp_path, capsys):
    """The broker stays up and registered while its disk is full, and answers the C++
    client's send with code 14 and Java's remark. The client (rocketmq-client-cpp 1.2.x)
    logs that answer, retries, then raises "No route info of this topic" for any refusal
    (sendDefaultImpl ends so), against a Java broker too: the log is where it shows."""
    client = load_cpp_client()
    from rocketmq.exceptions import ProducerSendSyncFailed  # the wheel loaded: so does this

    client_log = Path.home() / "logs" / "rocketmq-cpp" / f"{os.getpid()}_rocketmq-cpp.log.0"
    broker = standalone(tmp_path, volume / "store")
    broker.start()
    try:
        with producer(client, broker.namesrv, "PID-full-disk") as sender:
            sender.send_sync(message(client, "Kept", 0))  # the topic and its route exist
            fill(volume)
            time.sleep(1.5)  # the free-space check runs every second
            with pytest.raises(ProducerSendSyncFailed):
                sender.send_sync(message(client, "Kept", 1))
        answered = f"processSendResponse error remark:{JAVA_DISK_FULL}"
        logged = client_log.read_text(errors="replace") if client_log.exists() else ""
        assert answered in logged and "error code:14" in logged, logged[-2000:]
        assert broker.process.poll() is None, broker.output()
        assert main(["topic", "route", "-t", "Kept", "-n", broker.namesrv]) == 0
        assert broker.broker in capsys.readouterr().out  # still registered, still routed
    finally:
        if broker.process.poll() is None:
            broker.process.kill()
            broker.process.wait()
