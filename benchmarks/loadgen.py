"""Shared load generators and reporting for the request/response benchmarks.

``measure_pipelined`` keeps exactly N requests outstanding on one connection with no
task per request (it measures what the server can take); ``measure_sdk`` drives the
same load through RemotingClient, one task per request in flight (what an SDK user
gets). Both warm up first, then count for ``duration`` seconds.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import orjson
from rocketmq_transport_tcp import TcpTransport

from rocketmq_core.protocol.codec import FrameDecoder, encode_into
from rocketmq_core.protocol.command import OpaqueSequence, RemotingCommand
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.remoting.connection import RECEIVE_SIZE
from rocketmq_core.remoting.transport import TlsOptions, Transport, parse_address

MakeRequest = Callable[[], RemotingCommand]
MAX_LATENCIES = 500_000  # latencies kept per row: enough for p99, bounded memory
Check = Callable[[RemotingCommand], None]


def uvloop_wanted(refused: bool) -> bool:
    """Whether to run on uvloop: when it is installed and ``--no-uvloop`` did not refuse it."""
    if refused:
        return False
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def run_backend(main: Callable[[], Any], backend: str, use_uvloop: bool) -> None:
    options = {"use_uvloop": True} if backend == "asyncio" and use_uvloop else {}
    anyio.run(main, backend=backend, backend_options=options)


async def measure_sdk(
    address: str,
    make_request: MakeRequest,
    check: Check,
    inflight: int,
    warmup: float,
    duration: float,
    *,
    transport: Transport | None = None,
    tls: TlsOptions | None = None,
) -> dict:
    latencies: list[float] = []
    done = 0
    recording = False
    stop_at = 0.0

    async with RemotingClient(transport or TcpTransport(), tls=tls) as client:

        async def worker() -> None:
            nonlocal done
            while True:
                started = time.perf_counter()
                if started >= stop_at:
                    return
                check(await client.invoke(address, make_request(), timeout=10))
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


async def measure_pipelined(
    address: str,
    make_request: MakeRequest,
    check: Check,
    inflight: int,
    warmup: float,
    duration: float,
    *,
    transport: Transport | None = None,
    tls: TlsOptions | None = None,
) -> dict:
    host, port = parse_address(address)
    stream = await (transport or TcpTransport()).connect(host, port, tls=tls)
    decoder = FrameDecoder()
    opaques = OpaqueSequence()
    sent_at: dict[int, float] = {}
    latencies: list[float] = []

    def requests(count: int) -> bytes:
        parts: list[bytes] = []
        now = time.perf_counter()
        for _ in range(count):
            request = make_request()
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
                check(response)
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


MEASURES = {"pipelined": measure_pipelined, "sdk": measure_sdk}


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


C_LOAD_CLIENT = Path(__file__).resolve().parent / "loadgen_c" / "rocketmq_load.c"


def build_c_load_client(scratch: Path) -> Path:
    """The C load client (loadgen_c/rocketmq_load.c), compiled into ``scratch``."""
    binary = scratch / "rocketmq_load"
    subprocess.run(["cc", "-O2", "-o", str(binary), str(C_LOAD_CLIENT), "-lcrypto"], check=True)
    return binary


def pinned(command: list[str], core: int | str | None) -> list[str]:
    """``command`` run under ``taskset -c core`` (docs/perf.md: unpinned runs vary 10x);
    ``core`` may be a list for taskset, such as ``"1,0"``."""
    if core is None or shutil.which("taskset") is None:
        return command
    return ["taskset", "-c", str(core), *command]


PLACEMENTS = {"split": (1, 0), "same": (0, 0), "none": (None, None)}  # (server, client) core


def machine() -> dict:
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def report(
    title: str, setup: dict, results: list[dict], output: str, label: str = "client"
) -> None:
    """Print the table and write ``{"setup", "results"}`` as JSON to ``output``."""
    print(title)
    width = max(len(label), *(len(str(row[label])) for row in results))
    print(f"{label:>{width}}  {'in flight':>9}  {'responses/s':>12}  {'p50 us':>8}  {'p99 us':>8}")
    for row in results:
        print(
            f"{row[label]:>{width}}  {row['inflight']:>9}  {row['responses_per_s']:>12,}"
            f"  {row['p50_us']:>8}  {row['p99_us']:>8}"
        )
    write_results(output, setup, results)


def write_results(output: str, setup: dict, results: list[dict]) -> None:
    """``{"setup", "results"}`` as JSON to ``output``, as every benchmark writes it."""
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_bytes(
        orjson.dumps({"setup": setup, "results": results}, option=orjson.OPT_INDENT_2)
    )
    print(f"wrote {output}")


def _jiffies_of(pid: int | str) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime + stime


def _busy_jiffies() -> int:
    """Non-idle jiffies of every core since boot."""
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return 0
    values = [int(value) for value in first[1:]]
    return sum(values) - values[3] - values[4]  # minus idle and iowait


class CpuMeter:
    """CPU spent over a window by this process, the server, and everything else
    (docs/perf.md: a machine shared with other work skews figures; this says by how much)."""

    def __init__(self, server_pid: int | None) -> None:
        self.server_pid = server_pid
        self._start: tuple[float, float, int, int] | None = None
        self.result: dict = {}

    def _sample(self) -> tuple[float, float, int, int]:
        server = _jiffies_of(self.server_pid) if self.server_pid else 0
        return time.perf_counter(), time.process_time(), server, _busy_jiffies()

    def start(self) -> None:
        self._start = self._sample()

    def stop(self, messages: int) -> dict:
        if self._start is None:
            return {}
        wall0, client0, server0, busy0 = self._start
        wall1, client1, server1, busy1 = self._sample()
        tick = os.sysconf("SC_CLK_TCK")
        wall = max(wall1 - wall0, 1e-9)
        client = client1 - client0
        server = (server1 - server0) / tick
        others = max(0.0, (busy1 - busy0) / tick - client - server)
        per = 1e6 / messages if messages else float("nan")
        self.result = {
            "client_cpu_pct": round(100 * client / wall),
            "server_cpu_pct": round(100 * server / wall) if self.server_pid else None,
            "client_cpu_us_per_msg": round(client * per, 1),
            "server_cpu_us_per_msg": round(server * per, 1) if self.server_pid else None,
            "others_cpu_pct": round(100 * others / wall),  # of one core, all cores summed
        }
        return self.result


async def closed_loop(
    send: Callable[[], Awaitable[Any]],
    per_call: int,
    tasks: int,
    warmup: float,
    seconds: float,
    meter: Any,
) -> tuple[int, list[float]]:
    """``tasks`` tasks calling ``await send()`` back to back; after the warm-up, count
    the messages whose call both began and ended inside the window, timing each call."""
    latencies: list[float] = []
    count = 0
    measure_from = time.perf_counter() + warmup
    stop_at = measure_from + seconds

    async def worker() -> None:
        nonlocal count
        clock = time.perf_counter
        while True:
            began = clock()
            if began >= stop_at:
                return
            await send()
            ended = clock()
            if began >= measure_from and ended < stop_at:
                count += per_call
                if len(latencies) < MAX_LATENCIES:
                    latencies.append(ended - began)

    async def timekeeper() -> None:
        await anyio.sleep(measure_from - time.perf_counter())
        meter.start()
        await anyio.sleep(stop_at - time.perf_counter())
        meter.stop(count)

    async with anyio.create_task_group() as task_group:
        task_group.start_soon(timekeeper)
        for _ in range(tasks):
            task_group.start_soon(worker)
    return count, latencies
