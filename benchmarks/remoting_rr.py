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
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import orjson
from rocketmq_transport_tcp import TcpTransport

from rocketmq_core.protocol.codec import FrameDecoder, encode_into
from rocketmq_core.protocol.command import OpaqueSequence, RemotingCommand
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.remoting.connection import RECEIVE_SIZE
from rocketmq_core.remoting.processor import ProcessorTable
from rocketmq_core.remoting.server import RemotingServer
from rocketmq_core.remoting.transport import parse_address

ECHO_CODE = 10  # SEND_MESSAGE's code: a real code, served by a plain processor
BODY = b"x" * 100


def run_backend(main, backend: str, use_uvloop: bool) -> None:
    options = {"use_uvloop": True} if backend == "asyncio" and use_uvloop else {}
    anyio.run(main, backend=backend, backend_options=options)


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


async def measure(address: str, inflight: int, warmup: float, duration: float) -> dict:
    latencies: list[float] = []
    done = 0
    recording = False
    stop_at = 0.0

    async with RemotingClient(TcpTransport()) as client:

        async def worker() -> None:
            nonlocal done
            while True:
                started = time.perf_counter()
                if started >= stop_at:
                    return
                response = await client.invoke(
                    address, RemotingCommand.request(ECHO_CODE, None, BODY), timeout=10
                )
                assert len(response.body) == len(BODY)
                if recording:
                    done += 1
                    if len(latencies) < 200_000:
                        latencies.append(time.perf_counter() - started)

        stop_at = time.perf_counter() + warmup
        async with anyio.create_task_group() as task_group:
            for _ in range(inflight):
                task_group.start_soon(worker)
        recording = True
        started = time.perf_counter()
        stop_at = started + duration
        async with anyio.create_task_group() as task_group:
            for _ in range(inflight):
                task_group.start_soon(worker)
        elapsed = time.perf_counter() - started
    return summary(inflight, done, elapsed, latencies)


async def measure_pipelined(address: str, inflight: int, warmup: float, duration: float) -> dict:
    """A lean load generator: exactly ``inflight`` requests outstanding, no task per
    request, one write per chunk read. It measures what the server path can take."""
    host, port = parse_address(address)
    stream = await TcpTransport().connect(host, port)
    decoder = FrameDecoder()
    opaques = OpaqueSequence()
    sent_at: dict[int, float] = {}
    latencies: list[float] = []

    def requests(count: int) -> bytes:
        parts: list[bytes] = []
        now = time.perf_counter()
        for _ in range(count):
            request = RemotingCommand.request(ECHO_CODE, None, BODY)
            request.opaque = opaques.next()
            sent_at[request.opaque] = now
            encode_into(request, parts)
        return b"".join(parts)

    async def run_for(seconds: float, record: bool) -> int:
        answered = 0
        stop_at = time.perf_counter() + seconds
        await stream.send(requests(inflight))
        while True:
            responses = decoder.feed(await stream.receive(RECEIVE_SIZE))
            now = time.perf_counter()
            for response in responses:
                assert len(response.body) == len(BODY)
                started = sent_at.pop(response.opaque)
                if record and len(latencies) < 200_000:
                    latencies.append(now - started)
            answered += len(responses)
            if now >= stop_at:
                break
            if responses:
                await stream.send(requests(len(responses)))
        while sent_at:  # let the last requests in flight come back
            for response in decoder.feed(await stream.receive(RECEIVE_SIZE)):
                sent_at.pop(response.opaque)
        return answered

    async with stream:
        await run_for(warmup, False)
        started = time.perf_counter()
        done = await run_for(duration, True)
        elapsed = time.perf_counter() - started
    return summary(inflight, done, elapsed, latencies)


def summary(inflight: int, done: int, elapsed: float, latencies: list[float]) -> dict:
    latencies.sort()

    def percentile(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1e6

    return {
        "inflight": inflight,
        "responses": done,
        "seconds": round(elapsed, 3),
        "responses_per_s": round(done / elapsed),
        "p50_us": round(percentile(0.50), 1),
        "p99_us": round(percentile(0.99), 1),
    }


def pinned(command: list[str], core: int | None) -> list[str]:
    if core is None or shutil.which("taskset") is None:
        return command
    return ["taskset", "-c", str(core), *command]


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
                measure_one = {"pipelined": measure_pipelined, "sdk": measure}[kind]
                for inflight in inflights:
                    row = await measure_one(args.client, inflight, args.warmup, args.duration)
                    results.append({"client": kind, **row})

        run_backend(client_main, args.backend, use_uvloop)
        sys.stdout.write(orjson.dumps(results).decode())
        return 0

    server_core, client_core = {"split": (1, 0), "same": (0, 0), "none": (None, None)}[
        args.placement
    ]
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
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    print(f"remoting_rr  {setup['backend']}  placement={args.placement}  body={len(BODY)} B")
    print(f"{'client':>9}  {'in flight':>9}  {'responses/s':>12}  {'p50 us':>8}  {'p99 us':>8}")
    for row in results:
        print(
            f"{row['client']:>9}  {row['inflight']:>9}  {row['responses_per_s']:>12,}"
            f"  {row['p50_us']:>8}  {row['p99_us']:>8}"
        )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_bytes(
        orjson.dumps({"setup": setup, "results": results}, option=orjson.OPT_INDENT_2)
    )
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
