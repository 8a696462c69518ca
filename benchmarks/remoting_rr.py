"""Request/response rate over transport_tcp through the real server path.

A RemotingServer (ProcessorTable, Connection read loop, coalesced writes) serving an
echo processor runs in one process; a RemotingClient keeps 1 or 64 requests in
flight from another. Both are pinned with taskset: "split" puts them on different
cores, "same" on one (PERF.md explains why that matters on this VM). Bodies are
100 bytes. Prints a table and writes JSON.

    python benchmarks/remoting_rr.py                 # split, 1 and 64 in flight
    python benchmarks/remoting_rr.py --placement same --backend trio
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import orjson
from loadgen import MEASURES, PLACEMENTS, machine, pinned, report, run_backend
from rocketmq_transport_tcp import TcpTransport

from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.processor import ProcessorTable
from rocketmq_core.remoting.server import RemotingServer

ECHO_CODE = 10  # SEND_MESSAGE's code: a real code, served by a plain processor
BODY = b"x" * 100


def serve(port_file: str, backend: str, use_uvloop: bool) -> None:
    def echo(ctx, request):
        return request.response(body=request.body)

    async def main() -> None:
        table = ProcessorTable()
        table.register(ECHO_CODE, echo)
        server = RemotingServer(TcpTransport(), table)
        async with anyio.create_task_group() as task_group:
            address = await task_group.start(server.serve, "127.0.0.1", 0)
            Path(port_file).write_text(address)

    run_backend(main, backend, use_uvloop)


def echo_request() -> RemotingCommand:
    return RemotingCommand.request(ECHO_CODE, None, BODY)


def check_echo(response: RemotingCommand) -> None:
    assert len(response.body) == len(BODY)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inflight", default="1,64", help="comma-separated, default 1,64")
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument(
        "--clients",
        default="pipelined,sdk",
        help="load generators: 'pipelined' (lean, measures the server) and/or 'sdk'"
        " (RemotingClient, one task per request in flight)",
    )
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--no-uvloop", action="store_true")
    parser.add_argument("--placement", choices=["split", "same", "none"], default="split")
    parser.add_argument("--output", default="benchmarks/results/remoting_rr.json")
    parser.add_argument("--serve", metavar="PORT_FILE", help=argparse.SUPPRESS)
    parser.add_argument("--client", metavar="ADDRESS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    use_uvloop = not args.no_uvloop
    if args.serve:
        serve(args.serve, args.backend, use_uvloop)
        return 0
    inflights = [int(n) for n in args.inflight.split(",")]
    if args.client:
        results = []

        async def client_main() -> None:
            for kind in args.clients.split(","):
                for inflight in inflights:
                    row = await MEASURES[kind](
                        args.client, echo_request, check_echo, inflight, args.warmup, args.duration
                    )
                    results.append({"client": kind, **row})

        run_backend(client_main, args.backend, use_uvloop)
        sys.stdout.write(orjson.dumps(results).decode())
        return 0

    server_core, client_core = PLACEMENTS[args.placement]
    common = ["--backend", args.backend] + (["--no-uvloop"] if args.no_uvloop else [])
    with tempfile.TemporaryDirectory() as scratch:
        port_file = os.path.join(scratch, "address")
        server = subprocess.Popen(
            pinned([sys.executable, __file__, "--serve", port_file, *common], server_core)
        )
        try:
            deadline = time.monotonic() + 10
            while not os.path.exists(port_file) or not Path(port_file).read_text():
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the benchmark server did not start")
                time.sleep(0.05)
            address = Path(port_file).read_text()
            client = subprocess.run(
                pinned(
                    [
                        sys.executable,
                        __file__,
                        "--client",
                        address,
                        "--inflight",
                        args.inflight,
                        "--duration",
                        str(args.duration),
                        "--warmup",
                        str(args.warmup),
                        "--clients",
                        args.clients,
                        *common,
                    ],
                    client_core,
                ),
                check=True,
                capture_output=True,
            )
        finally:
            server.terminate()
            server.wait(10)
    results = orjson.loads(client.stdout)
    setup = {
        "benchmark": "remoting_rr",
        "backend": args.backend + ("+uvloop" if args.backend == "asyncio" and use_uvloop else ""),
        "placement": args.placement,
        "body_bytes": len(BODY),
        **machine(),
    }
    title = f"remoting_rr  {setup['backend']}  placement={args.placement}  body={len(BODY)} B"
    report(title, setup, results, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
