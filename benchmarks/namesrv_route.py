"""GET_ROUTEINFO_BY_TOPIC per second from a real ``rocketmq namesrv`` process.

The name server is started as an operator starts it (the CLI, uvloop) and pinned to
one core; the client, pinned to the other, registers two brokers that each serve
1,000 topics of 8 queues, then asks for routes round-robin over the topics with 1 or
64 requests in flight, in the standard-JSON form (clients >= 4.9.4) and the
bare-key form (the C++ client, version 63). Prints a table and writes JSON.

    python benchmarks/namesrv_route.py
    python benchmarks/namesrv_route.py --topics 10000 --inflight 64 --clients pipelined
"""

from __future__ import annotations

import argparse
import itertools
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
from loadgen import MEASURES, PLACEMENTS, machine, pinned, report, run_backend
from rocketmq_transport_tcp import TcpTransport

from rocketmq_core.protocol.codes import VERSION_V3_1_8, RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.testing.namesrv import register_broker_request

BROKERS = ("127.0.0.1:10911", "127.0.0.2:10911")
FORMS = {"standard": None, "cpp": VERSION_V3_1_8}  # request version per route form
READY = re.compile(r"listening on (\S+)")


def topic_names(count: int) -> list[str]:
    return [f"BenchTopic-{number:05d}" for number in range(count)]


async def client_main(args: argparse.Namespace, results: list[dict]) -> None:
    topics = topic_names(args.topics)
    async with RemotingClient(TcpTransport()) as brokers:
        # the registering connection stays open: closing it would remove the brokers
        for number, addr in enumerate(BROKERS):
            request = register_broker_request(
                broker_addr=addr, broker_name=f"broker-{number}", topics=dict.fromkeys(topics, 8)
            )
            reply = await brokers.invoke(args.client, request, timeout=30)
            assert reply.code == ResponseCode.SUCCESS, reply
        for form, version in FORMS.items():
            if form not in args.forms.split(","):
                continue
            names = itertools.cycle(topics)

            def route_request(version=version, names=names) -> RemotingCommand:
                request = RemotingCommand.request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": next(names)}
                )
                if version is not None:
                    request.version = version
                return request

            def check(response: RemotingCommand) -> None:
                assert response.code == ResponseCode.SUCCESS and response.body, response

            for kind in args.clients.split(","):
                for inflight in (int(n) for n in args.inflight.split(",")):
                    row = await MEASURES[kind](
                        args.client, route_request, check, inflight, args.warmup, args.duration
                    )
                    results.append({"load": f"{kind}/{form}", **row})


def start_namesrv(scratch: str, core: int | None) -> tuple[subprocess.Popen, str]:
    config = Path(scratch, "namesrv.conf")
    config.write_text(
        f"kvConfigPath={scratch}/kvConfig.json\nconfigStorePath={scratch}/namesrv.properties\n"
        "brokerChannelExpiredTime=3600000\n"
    )
    command = [sys.executable, "-m", "rocketmq_core.cli", "namesrv", "-c", str(config)]
    process = subprocess.Popen(
        pinned([*command, "--listen", "127.0.0.1:0"], core), stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        match = READY.search(line)
        if match:
            return process, match.group(1)
    process.kill()
    raise SystemExit("the name server did not start")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--inflight", default="1,64", help="comma-separated, default 1,64")
    parser.add_argument("--clients", default="pipelined,sdk", help="pipelined and/or sdk")
    parser.add_argument("--forms", default="standard,cpp", help="standard and/or cpp")
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--placement", choices=sorted(PLACEMENTS), default="split")
    parser.add_argument("--output", default="benchmarks/results/namesrv_route.json")
    parser.add_argument("--client", metavar="ADDRESS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        results: list[dict] = []
        run_backend(lambda: client_main(args, results), "asyncio", use_uvloop=True)
        sys.stdout.write(orjson.dumps(results).decode())
        return 0

    server_core, client_core = PLACEMENTS[args.placement]
    with tempfile.TemporaryDirectory() as scratch:
        namesrv, address = start_namesrv(scratch, server_core)
        try:
            forwarded = [
                f"--{name}={getattr(args, name)}"
                for name in ("topics", "inflight", "clients", "forms", "duration", "warmup")
            ]
            client = subprocess.run(
                pinned([sys.executable, __file__, "--client", address, *forwarded], client_core),
                check=True,
                capture_output=True,
            )
        finally:
            namesrv.terminate()
            namesrv.wait(10)
    results = orjson.loads(client.stdout)
    setup = {
        "benchmark": "namesrv_route",
        "server": "rocketmq namesrv (asyncio+uvloop)",
        "placement": args.placement,
        "topics": args.topics,
        "brokers": len(BROKERS),
        **machine(),
    }
    title = f"namesrv_route  placement={args.placement}  topics={args.topics}  brokers=2"
    report(title, setup, results, args.output, label="load")
    return 0


if __name__ == "__main__":
    sys.exit(main())
