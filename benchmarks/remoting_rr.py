"""Request/response rate over transport_tcp and transport_quic through the real server path.

A RemotingServer (ProcessorTable, Connection read loop, coalesced writes) serving an
echo processor runs in one process; a RemotingClient keeps 1 or 64 requests in
flight from another. Both are pinned with taskset: "split" puts them on different
cores, "same" on one (docs/perf.md explains why that matters on this VM). Bodies are
100 bytes. Every workload runs once per transport, each against a fresh server:
TCP in plaintext, QUIC (aioquic, pure Python) always under TLS 1.3 with a throwaway
certificate made for the run (trustme). Prints tcp and quic side by side and writes
JSON with a row per transport and workload.

    python benchmarks/remoting_rr.py                 # split, 1 and 64 in flight, tcp and quic
    python benchmarks/remoting_rr.py --transport quic --clients pipelined
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
from loadgen import MEASURES, PLACEMENTS, machine, pinned, run_backend, write_results
from rocketmq_transport_quic import QuicTransport
from rocketmq_transport_tcp import TcpTransport

from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.processor import ProcessorTable
from rocketmq_core.remoting.server import RemotingServer
from rocketmq_core.remoting.transport import TlsOptions

ECHO_CODE = 10  # SEND_MESSAGE's code: a real code, served by a plain processor
BODY = b"x" * 100
TRANSPORTS = {"tcp": TcpTransport, "quic": QuicTransport}
# a client that has not finished this long after its workloads should have is stuck
CLIENT_GRACE = 60.0


def serve(
    port_file: str, transport: str, tls: TlsOptions | None, backend: str, use_uvloop: bool
) -> None:
    def echo(ctx, request):
        return request.response(body=request.body)

    async def main() -> None:
        table = ProcessorTable()
        table.register(ECHO_CODE, echo)
        server = RemotingServer(TRANSPORTS[transport](), table, tls=tls)
        async with anyio.create_task_group() as task_group:
            address = await task_group.start(server.serve, "127.0.0.1", 0)
            Path(port_file).write_text(address)

    run_backend(main, backend, use_uvloop)


def echo_request() -> RemotingCommand:
    return RemotingCommand.request(ECHO_CODE, None, BODY)


def check_echo(response: RemotingCommand) -> None:
    assert len(response.body) == len(BODY)


def write_certificates(directory: str) -> dict[str, str]:
    """A throwaway CA and a certificate for localhost/127.0.0.1 as PEM files in ``directory``."""
    import trustme  # a test dependency: needed only when QUIC is measured

    authority = trustme.CA()
    leaf = authority.issue_cert("localhost", "127.0.0.1")
    paths = {name: os.path.join(directory, f"{name}.pem") for name in ("ca", "cert", "key")}
    authority.cert_pem.write_to_path(paths["ca"])
    leaf.private_key_pem.write_to_path(paths["key"])
    for index, pem in enumerate(leaf.cert_chain_pems):
        pem.write_to_path(paths["cert"], append=index > 0)
    return paths


def run_client(args: argparse.Namespace, use_uvloop: bool) -> list[dict]:
    transport = TRANSPORTS[args.transport]()
    tls = TlsOptions(ca_file=args.ca) if args.transport == "quic" else None
    results = []

    async def client_main() -> None:
        for kind in args.clients.split(","):
            for inflight in [int(n) for n in args.inflight.split(",")]:
                row = await MEASURES[kind](
                    args.client,
                    echo_request,
                    check_echo,
                    inflight,
                    args.warmup,
                    args.duration,
                    transport=transport,
                    tls=tls,
                )
                results.append({"transport": args.transport, "client": kind, **row})

    run_backend(client_main, args.backend, use_uvloop)
    return results


def measure_transport(
    args: argparse.Namespace, transport: str, scratch: str, certificates: dict[str, str]
) -> list[dict]:
    """Start a server on ``transport``, run every workload against it, stop it."""
    server_core, client_core = PLACEMENTS[args.placement]
    common = ["--backend", args.backend, "--transport", transport]
    common += ["--no-uvloop"] if args.no_uvloop else []
    port_file = os.path.join(scratch, f"{transport}.address")
    server_tls = []
    client_tls = []
    if transport == "quic":  # QUIC has no plaintext mode
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
        address = Path(port_file).read_text()
        workloads = len(args.clients.split(",")) * len(args.inflight.split(","))
        client = subprocess.run(
            pinned(
                [
                    sys.executable,
                    __file__,
                    "--client",
                    address,
                    *client_tls,
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
            stdout=subprocess.PIPE,  # stderr passes through: a failing client shows why
            timeout=workloads * (args.warmup + args.duration) + CLIENT_GRACE,
        )
    finally:
        server.terminate()
        server.wait(10)
    return orjson.loads(client.stdout)


def print_side_by_side(title: str, transports: list[str], results: list[dict]) -> None:
    """One line per workload, a responses/s, p50, p99 group per transport."""
    by_workload: dict[tuple[str, int], dict[str, dict]] = {}
    for row in results:
        by_workload.setdefault((row["client"], row["inflight"]), {})[row["transport"]] = row
    compare = transports == ["tcp", "quic"]  # docs/perf.md: quote ratios measured in one run
    group = f"  {'responses/s':>12}  {'p50 us':>8}  {'p99 us':>8}"
    width = max(len("client"), *(len(kind) for kind, _ in by_workload))
    print(title)
    print(" " * (width + 11) + "".join(f"  {name:-^32}" for name in transports))
    print(
        f"{'client':>{width}}  {'in flight':>9}"
        + group * len(transports)
        + (f"  {'quic/tcp':>8}" if compare else "")
    )
    for (kind, inflight), rows in by_workload.items():
        line = f"{kind:>{width}}  {inflight:>9}"
        for name in transports:
            row = rows[name]
            line += f"  {row['responses_per_s']:>12,}  {row['p50_us']:>8}  {row['p99_us']:>8}"
        if compare:
            ratio = rows["quic"]["responses_per_s"] / rows["tcp"]["responses_per_s"]
            line += f"  {ratio:>8.3f}"
        print(line)


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
    parser.add_argument(
        "--transport",
        choices=["both", *TRANSPORTS],
        default="both",
        help="measure tcp, quic or both (default) in one run",
    )
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--no-uvloop", action="store_true")
    parser.add_argument("--placement", choices=["split", "same", "none"], default="split")
    parser.add_argument("--output", default="benchmarks/results/remoting_rr.json")
    parser.add_argument("--serve", metavar="PORT_FILE", help=argparse.SUPPRESS)
    parser.add_argument("--cert", help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    parser.add_argument("--client", metavar="ADDRESS", help=argparse.SUPPRESS)
    parser.add_argument("--ca", help=argparse.SUPPRESS)
    args = parser.parse_args()
    use_uvloop = not args.no_uvloop
    if args.serve:
        tls = TlsOptions(cert_file=args.cert, key_file=args.key) if args.cert else None
        serve(args.serve, args.transport, tls, args.backend, use_uvloop)
        return 0
    if args.client:
        sys.stdout.write(orjson.dumps(run_client(args, use_uvloop)).decode())
        return 0

    transports = list(TRANSPORTS) if args.transport == "both" else [args.transport]
    results: list[dict] = []
    with tempfile.TemporaryDirectory() as scratch:
        certificates = write_certificates(scratch) if "quic" in transports else {}
        for transport in transports:
            results += measure_transport(args, transport, scratch, certificates)
    setup = {
        "benchmark": "remoting_rr",
        "backend": args.backend + ("+uvloop" if args.backend == "asyncio" and use_uvloop else ""),
        "placement": args.placement,
        "body_bytes": len(BODY),
        "transports": transports,
        "tls": {name: name == "quic" for name in transports},  # QUIC always encrypts
        **machine(),
    }
    title = f"remoting_rr  {setup['backend']}  placement={args.placement}  body={len(BODY)} B"
    print_side_by_side(title, transports, results)
    write_results(args.output, setup, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
