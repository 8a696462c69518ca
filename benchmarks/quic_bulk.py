"""Bulk throughput over transport_quic next to transport_tcp: large frames through the server.

A RemotingServer echoing every body runs in one process, a client in another, pinned
with taskset like the other benchmarks (loadgen.PLACEMENTS). Two workloads per
transport, each against a fresh server:

- ``16MiB``: one request whose frame is the largest allowed (16 MiB), echoed; the
  median of ``--repeats`` round trips on one connection;
- ``64KiB``: a stream of 64 KiB bodies, ``--inflight`` outstanding, for ``--duration``.

MB/s counts the bytes both ways. Transports: ``tcp`` (plaintext), ``quic`` (TLS 1.3,
loopback-sized datagrams, as a local peer gets) and ``quic-1350`` (the 1350-byte
datagrams any network path gets). Prints the table with quic/tcp ratios from the
same run and writes JSON.

    python benchmarks/quic_bulk.py
    python benchmarks/quic_bulk.py --transports tcp,quic --backend trio
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import orjson
from loadgen import PLACEMENTS, machine, measure_pipelined, pinned, run_backend, write_results
from remoting_rr import write_certificates
from rocketmq_transport_quic import QuicSettings, QuicTransport
from rocketmq_transport_tcp import TcpTransport

from rocketmq_core.protocol.codec import MAX_FRAME_LENGTH, encode_command
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.remoting.processor import ProcessorTable
from rocketmq_core.remoting.server import RemotingServer
from rocketmq_core.remoting.transport import TlsOptions, Transport

ECHO_CODE = 10  # SEND_MESSAGE's code, served by a plain echo processor
STREAM_BODY = b"s" * (64 * 1024)
TRANSPORTS = ("tcp", "quic", "quic-1350")
# a client that has not finished this long after its workloads should have is stuck
CLIENT_GRACE = 120.0


def make_transport(name: str) -> Transport:
    if name == "tcp":
        return TcpTransport()
    if name == "quic-1350":  # what a peer across a network gets
        return QuicTransport(QuicSettings(loopback_datagram_size=0))
    return QuicTransport()


def largest_body() -> bytes:
    """A body that makes the largest frame, leaving room for the response's header."""
    header_size = len(encode_command(RemotingCommand.request(ECHO_CODE, None, b"")))
    return b"b" * (MAX_FRAME_LENGTH - header_size - 64)


def serve(port_file: str, transport: str, tls: TlsOptions | None, backend: str) -> None:
    def echo(ctx, request):
        return request.response(body=request.body)

    async def main() -> None:
        table = ProcessorTable()
        table.register(ECHO_CODE, echo)
        server = RemotingServer(make_transport(transport), table, tls=tls)
        async with anyio.create_task_group() as task_group:
            address = await task_group.start(server.serve, "127.0.0.1", 0)
            Path(port_file).write_text(address)

    run_backend(main, backend, use_uvloop=False)


async def measure_largest(
    address: str, transport: Transport, tls: TlsOptions | None, repeats: int
) -> dict:
    body = largest_body()
    seconds: list[float] = []
    async with RemotingClient(transport, tls=tls) as client:
        await client.invoke(address, RemotingCommand.request(ECHO_CODE, None, b"hi"))
        for _ in range(repeats):
            started = time.perf_counter()
            request = RemotingCommand.request(ECHO_CODE, None, body)
            response = await client.invoke(address, request, timeout=CLIENT_GRACE)
            seconds.append(time.perf_counter() - started)
            assert len(response.body) == len(body)
    median = statistics.median(seconds)
    return {
        "workload": "16MiB",
        "frames": repeats,
        "seconds": round(median, 3),
        "MB_per_s": round(2 * len(body) / median / 1e6, 1),
    }


async def measure_stream(
    address: str, transport: Transport, tls: TlsOptions | None, args: argparse.Namespace
) -> dict:
    def check(response: RemotingCommand) -> None:
        assert len(response.body) == len(STREAM_BODY)

    row = await measure_pipelined(
        address,
        lambda: RemotingCommand.request(ECHO_CODE, None, STREAM_BODY),
        check,
        args.inflight,
        args.warmup,
        args.duration,
        transport=transport,
        tls=tls,
    )
    per_second = row["responses_per_s"]
    return {
        "workload": "64KiB",
        "frames": row["responses"],
        "seconds": round(1 / per_second, 4) if per_second else None,
        "MB_per_s": round(2 * len(STREAM_BODY) * per_second / 1e6, 1),
        "inflight": args.inflight,
        "p50_us": row["p50_us"],
        "p99_us": row["p99_us"],
    }


def run_client(args: argparse.Namespace) -> list[dict]:
    transport = make_transport(args.transport)
    tls = TlsOptions(ca_file=args.ca) if args.ca else None
    results: list[dict] = []

    async def main() -> None:
        results.append(await measure_largest(args.client, transport, tls, args.repeats))
        results.append(await measure_stream(args.client, transport, tls, args))

    run_backend(main, args.backend, use_uvloop=False)
    return [{"transport": args.transport, **row} for row in results]


def measure_transport(
    args: argparse.Namespace, transport: str, scratch: str, certificates: dict[str, str]
) -> list[dict]:
    """Start a server on ``transport``, run both workloads against it, stop it."""
    server_core, client_core = PLACEMENTS[args.placement]
    common = ["--backend", args.backend, "--transport", transport]
    port_file = os.path.join(scratch, f"{transport}.address")
    server_tls: list[str] = []
    client_tls: list[str] = []
    if transport.startswith("quic"):  # QUIC has no plaintext mode
        server_tls = ["--cert", certificates["cert"], "--key", certificates["key"]]
        client_tls = ["--ca", certificates["ca"]]
    server = subprocess.Popen(
        pinned([sys.executable, __file__, "--serve", port_file, *server_tls, *common], server_core)
    )
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(port_file) or not Path(port_file).read_text():
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit(f"the {transport} benchmark server did not start")
            time.sleep(0.05)
        client_command = [sys.executable, __file__, "--client", Path(port_file).read_text()]
        client_command += [*client_tls, "--repeats", str(args.repeats)]
        client_command += ["--inflight", str(args.inflight), "--duration", str(args.duration)]
        client_command += ["--warmup", str(args.warmup), *common]
        client = subprocess.run(
            pinned(client_command, client_core),
            check=True,
            stdout=subprocess.PIPE,  # stderr passes through: a failing client shows why
            timeout=args.warmup + args.duration + (args.repeats + 1) * CLIENT_GRACE,
        )
    finally:
        server.terminate()
        server.wait(10)
    return orjson.loads(client.stdout)


def print_table(title: str, results: list[dict]) -> None:
    tcp = {row["workload"]: row for row in results if row["transport"] == "tcp"}
    print(title)
    print(
        f"{'transport':>10}  {'workload':>8}  {'frames':>7}  {'s/frame':>8}  {'MB/s':>7}"
        f"  {'vs tcp':>7}"
    )
    for row in results:
        base = tcp.get(row["workload"])
        ratio = f"{row['MB_per_s'] / base['MB_per_s']:.3f}" if base else "-"
        print(
            f"{row['transport']:>10}  {row['workload']:>8}  {row['frames']:>7}"
            f"  {row['seconds']:>8}  {row['MB_per_s']:>7}  {ratio:>7}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transports", default=",".join(TRANSPORTS), help="comma-separated")
    parser.add_argument("--repeats", type=int, default=3, help="16 MiB round trips (median)")
    parser.add_argument("--inflight", type=int, default=8, help="64 KiB frames outstanding")
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--placement", choices=list(PLACEMENTS), default="split")
    parser.add_argument("--output", default="benchmarks/results/quic_bulk.json")
    parser.add_argument("--serve", metavar="PORT_FILE", help=argparse.SUPPRESS)
    parser.add_argument("--transport", help=argparse.SUPPRESS)
    parser.add_argument("--cert", help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    parser.add_argument("--client", metavar="ADDRESS", help=argparse.SUPPRESS)
    parser.add_argument("--ca", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        tls = TlsOptions(cert_file=args.cert, key_file=args.key) if args.cert else None
        serve(args.serve, args.transport, tls, args.backend)
        return 0
    if args.client:
        sys.stdout.write(orjson.dumps(run_client(args)).decode())
        return 0

    transports = args.transports.split(",")
    unknown = sorted(set(transports) - set(TRANSPORTS))
    if unknown:
        parser.error(f"--transports: unknown {', '.join(unknown)}; choose from {TRANSPORTS}")
    results: list[dict] = []
    with tempfile.TemporaryDirectory() as scratch:
        certificates = write_certificates(scratch) if any("quic" in t for t in transports) else {}
        for transport in transports:
            results += measure_transport(args, transport, scratch, certificates)
    setup = {
        "benchmark": "quic_bulk",
        "backend": args.backend,
        "placement": args.placement,
        "largest_frame_bytes": MAX_FRAME_LENGTH,
        "stream_body_bytes": len(STREAM_BODY),
        "inflight": args.inflight,
        "transports": transports,
        **machine(),
    }
    title = f"quic_bulk  {args.backend}  placement={args.placement}  (MB/s counts both ways)"
    print_table(title, results)
    write_results(args.output, setup, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
