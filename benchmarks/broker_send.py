"""The broker under the official C++ client: sends and produce-to-consume latency.

``rocketmq standalone`` runs in a child process pinned to one core (async flush, mmap
store in a temp dir); the C++ client (rocketmq==0.4.4) runs here, pinned to the other.
1 KiB bodies. Rows:

* sync: one producer, one ``send_sync`` at a time (latency per send);
* async: ``send_async`` with up to ``--inflight`` sends outstanding;
* batch32: ``send_batch`` of 32 messages, one batch at a time;
* raw1, raw64: SEND_MESSAGE_V2 from our own pipelined client, 1 and 64 in flight: the
  broker's latency and ceiling without the C++ client's costs;
* sync-null, batch32-null: the sync and batch32 rows against a null broker (our name
  server routes to a listener that answers every send at once): the C++ client's own
  ceiling on this machine, the most any broker could show in those rows;
* e2e: sends paced at ``--rate`` msg/s to a push consumer; latency from just before
  the send to the consumer's callback (both ends in this process, one clock), and the
  CPU share of this process and of the broker meanwhile.

Each row warms up first, then counts for ``--duration`` seconds. Prints a table and
writes JSON.

    python benchmarks/broker_send.py --duration 5
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from loadgen import CpuMeter, machine, measure_pipelined, pinned, run_backend, write_results

from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.headers import SEND_V2_NAMES, SendMessageRequestHeader
from rocketmq_core.protocol.message import encode_properties

READY = re.compile(r"rocketmq standalone ready: name server (\S+), broker (\S+)")
BODY = b"x" * 1024
ROWS = ("sync", "async", "batch32", "raw1", "raw64", "e2e", "sync-null", "batch32-null")


def start_standalone(
    directory: Path,
    core: int | None,
    store: str = "mmap",
    settings: str = "",
    env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen, str, str]:
    """``rocketmq standalone`` in a child process (any free ports), once it is ready;
    ``settings``: more broker.conf lines; ``env``: its environment (default: ours)."""
    config = directory / "broker.conf"
    # grpcServerPort=-1: no gRPC proxy (standalone's default binds 8081 and runs its thread
    # in the broker's process); the benchmarks speak remoting only
    config.write_text(
        f"storePathRootDir={directory / 'store'}\nlistenPort=0\nbrokerIP1=127.0.0.1\n"
        f"flushDiskType=ASYNC_FLUSH\nstore={store}\ngrpcServerPort=-1\n{settings}"
    )
    command = [
        sys.executable,
        "-m",
        "rocketmq_core.cli",
        "standalone",
        "-c",
        str(config),
        "--namesrv-listen",
        "127.0.0.1:0",
    ]
    process = subprocess.Popen(pinned(command, core), stderr=subprocess.PIPE, text=True, env=env)
    assert process.stderr is not None
    for line in process.stderr:
        found = READY.search(line)
        if found:
            # keep draining the log so that the server never blocks on a full pipe
            threading.Thread(target=process.stderr.read, daemon=True).start()
            return process, found.group(1), found.group(2)
    raise SystemExit("rocketmq standalone exited before it was ready")


def serve_null_broker(directory: Path) -> None:
    """``--null-broker``: a name server and a broker that stores nothing, answers at once."""
    import anyio

    from rocketmq_core.namesrv.server import NameServer
    from rocketmq_core.plugins import load_plugins
    from rocketmq_core.remoting.client import RemotingClient
    from rocketmq_core.remoting.processor import ProcessorTable
    from rocketmq_core.testing.namesrv import namesrv_config, register_broker_request
    from rocketmq_core.testing.transport import serving

    def answer(_ctx, request: RemotingCommand) -> RemotingCommand:
        fields = {"msgId": "7F00000100002A9F0000000000000000", "queueId": "0", "queueOffset": "0"}
        return request.response(ext_fields=fields)

    async def run() -> None:
        host = load_plugins()
        transport = host.registry.transports.get("tcp")
        table = ProcessorTable()
        table.set_default(answer)
        # the parent owns ``directory``: this process ends by SIGTERM, cleaning up nothing
        async with (
            serving(transport, table) as (_server, broker_address),
            NameServer.serving(namesrv_config(directory), host=host) as namesrv,
            RemotingClient(transport) as remoting,
        ):
            topics = {"BenchSync": 4, "BenchBatch": 4}
            request = register_broker_request(broker_addr=broker_address, topics=topics)
            registered = await remoting.invoke(namesrv.address, request)
            assert registered.code == ResponseCode.SUCCESS, registered
            print(f"null broker ready: name server {namesrv.address}", flush=True)
            await anyio.sleep_forever()

    run_backend(run, "asyncio", use_uvloop=True)


def start_null_broker(core: int | None, directory: Path) -> tuple[subprocess.Popen, str]:
    """The null broker in a child process; its name server keeps its files in ``directory``."""
    command = [sys.executable, __file__, "--null-broker", str(directory)]
    process = subprocess.Popen(pinned(command, core), stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("null broker ready"):
        raise SystemExit("the null broker did not start")
    return process, line.split()[-1]


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * fraction))]


def row(name: str, inflight: int, count: int, seconds: float, latencies: list[float]) -> dict:
    latencies.sort()
    return {
        "row": name,
        "inflight": inflight,
        "messages_per_s": round(count / seconds),
        "p50_us": round(percentile(latencies, 0.50) * 1e6) if latencies else None,
        "p99_us": round(percentile(latencies, 0.99) * 1e6) if latencies else None,
    }


def message(client, topic: str):
    built = client.Message(topic)
    built.set_tags("TagA")
    built.set_keys("bench")
    built.set_body(BODY)
    return built


def timed_sends(send, per_call: int, warmup: float, duration: float) -> tuple[int, list[float]]:
    """Call ``send()`` back to back; after the warm-up, count messages and time each call."""
    latencies: list[float] = []
    count = 0
    measure_from = time.perf_counter() + warmup
    stop_at = measure_from + duration
    while True:
        began = time.perf_counter()
        if began >= stop_at:
            return count, latencies
        send()
        if began >= measure_from:
            latencies.append(time.perf_counter() - began)
            count += per_call


def sync_row(client, producer, topic: str, warmup: float, duration: float) -> dict:
    def send() -> None:
        result = producer.send_sync(message(client, topic))
        if result.status != client.SendStatus.OK:
            raise SystemExit(f"send failed: {result.status}")

    count, latencies = timed_sends(send, 1, warmup, duration)
    return row("sync", 1, count, duration, latencies)


def async_row(client, producer, topic: str, inflight: int, warmup: float, duration: float) -> dict:
    slots = threading.Semaphore(inflight)
    done = 0
    failures: list = []
    lock = threading.Lock()

    def succeeded(_result) -> None:
        nonlocal done
        with lock:
            done += 1
        slots.release()

    def failed(error) -> None:
        failures.append(error)
        slots.release()

    start = time.perf_counter()
    measure_from = start + warmup
    stop_at = measure_from + duration
    counted_from = None
    while time.perf_counter() < stop_at:
        slots.acquire()
        if counted_from is None and time.perf_counter() >= measure_from:
            with lock:
                counted_from = done
        producer.send_async(message(client, topic), succeeded, failed)
    with lock:
        count = done - (counted_from or 0)
    for _ in range(inflight):  # let the last sends finish before the next row
        slots.acquire(timeout=10)
    if failures:
        raise SystemExit(f"{len(failures)} async sends failed: {failures[0]}")
    return row("async", inflight, count, duration, [])


def batch_row(client, producer, topic: str, size: int, warmup: float, duration: float) -> dict:
    def send() -> None:
        result = producer.send_batch([message(client, topic) for _ in range(size)])
        if result.status != client.SendStatus.OK:
            raise SystemExit(f"batch failed: {result.status}")

    count, latencies = timed_sends(send, size, warmup, duration)
    return row(f"batch{size}", 1, count, duration, latencies)


def raw_row(broker: str, topic: str, inflight: int, warmup: float, duration: float) -> dict:
    """SEND_MESSAGE_V2 from our own pipelined client: what the broker can take."""
    header = SendMessageRequestHeader(
        producer_group="PID-bench-raw",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=0,
        sys_flag=0,
        born_timestamp=int(time.time() * 1000),
        flag=0,
        properties=encode_properties({"TAGS": "TagA", "KEYS": "bench", "WAIT": "true"}),
    ).to_ext_fields(SEND_V2_NAMES)

    def make_request() -> RemotingCommand:
        return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, BODY)

    def check(reply: RemotingCommand) -> None:
        if reply.code != ResponseCode.SUCCESS:
            raise SystemExit(f"send failed: {reply.code} {reply.remark}")

    measured: dict = {}

    async def run() -> None:
        measured.update(
            await measure_pipelined(broker, make_request, check, inflight, warmup, duration)
        )

    run_backend(run, "asyncio", use_uvloop=True)
    return {
        "row": f"raw{inflight}",
        "inflight": inflight,
        "messages_per_s": measured["responses_per_s"],
        "p50_us": round(measured["p50_us"]),
        "p99_us": round(measured["p99_us"]),
    }


def e2e_row(
    client, namesrv: str, topic: str, rate: int, warmup: float, duration: float, server_pid: int
) -> dict:
    sent_at: dict[bytes, float] = {}
    latencies: list[float] = []
    measure_from = [float("inf")]
    arrived = threading.Event()

    def on_message(received) -> None:
        now = time.perf_counter()
        key = received.keys
        began = sent_at.get(key)
        if began is not None and began >= measure_from[0]:
            latencies.append(now - began)
        arrived.set()

    consumer = client.PushConsumer("CID-bench-e2e")
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe(topic, on_message)
    consumer.start()
    producer = client.Producer("PID-bench-e2e")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    try:
        # the consumer owns its queues before the clock starts
        producer.send_sync(message(client, topic))
        if not arrived.wait(30):
            raise SystemExit("the consumer received nothing within 30 s")
        interval = 1.0 / rate
        start = time.perf_counter()
        measure_from[0] = start + warmup
        stop_at = measure_from[0] + duration
        number = 0
        next_send = start
        # the CPU both ends spend in the measured window (the C++ client's may fill its core)
        meter, metering = CpuMeter(server_pid), False
        while next_send < stop_at:
            if not metering and next_send >= measure_from[0]:
                meter.start()
                metering = True
            now = time.perf_counter()
            if now < next_send:
                # sleep, never spin: a spinning sender holds the GIL and the consumer's
                # callback thread would wait up to the switch interval (5 ms) for it
                time.sleep(next_send - now)
                continue
            built = message(client, topic)
            key = f"e2e-{number}"
            built.set_keys(key)
            sent_at[key.encode()] = time.perf_counter()
            producer.send_oneway(built)
            number += 1
            next_send += interval
        cpu = meter.stop(number)
        time.sleep(1.0)  # the last ones arrive
    finally:
        producer.shutdown()
        consumer.shutdown()
    expected = sum(1 for began in sent_at.values() if began >= measure_from[0])
    result = row("e2e", 1, len(latencies), duration, latencies)
    result["rate"] = rate
    result["delivered"] = f"{len(latencies)}/{expected}"
    result.update(cpu)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--inflight", type=int, default=256)
    parser.add_argument("--rate", type=int, default=5000, help="e2e sends per second")
    parser.add_argument("--rows", default=",".join(ROWS))
    parser.add_argument("--server-core", type=int, default=1, help="-1: don't pin")
    parser.add_argument("--client-core", type=int, default=0, help="-1: don't pin")
    parser.add_argument("--output", default="benchmarks/results/broker_send.json")
    parser.add_argument("--null-broker", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.null_broker:
        serve_null_broker(Path(args.null_broker))
        return 0
    import rocketmq.client as client  # the C++ client; loads its shared library

    server_core = None if args.server_core < 0 else args.server_core
    if args.client_core >= 0:
        os.sched_setaffinity(0, {args.client_core})
    wanted = args.rows.split(",")
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        process, namesrv, broker = start_standalone(Path(scratch), server_core)
        try:
            producer = client.Producer("PID-bench")
            producer.set_namesrv_addr(namesrv)
            producer.start()
            try:
                if "sync" in wanted:
                    results.append(
                        sync_row(client, producer, "BenchSync", args.warmup, args.duration)
                    )
                if "async" in wanted:
                    results.append(
                        async_row(
                            client,
                            producer,
                            "BenchAsync",
                            args.inflight,
                            args.warmup,
                            args.duration,
                        )
                    )
                if "batch32" in wanted:
                    results.append(
                        batch_row(client, producer, "BenchBatch", 32, args.warmup, args.duration)
                    )
            finally:
                producer.shutdown()
            for name in wanted:
                if name.startswith("raw"):
                    inflight = int(name[3:])
                    results.append(
                        raw_row(broker, "BenchRaw", inflight, args.warmup, args.duration)
                    )
            if "e2e" in wanted:
                results.append(
                    e2e_row(
                        client,
                        namesrv,
                        "BenchE2E",
                        args.rate,
                        args.warmup,
                        args.duration,
                        process.pid,
                    )
                )
        finally:
            process.terminate()
            process.wait(20)
    if "sync-null" in wanted or "batch32-null" in wanted:
        null_scratch = tempfile.TemporaryDirectory(prefix="broker-send-null-")
        process, namesrv = start_null_broker(server_core, Path(null_scratch.name))
        try:
            producer = client.Producer("PID-bench-null")
            producer.set_namesrv_addr(namesrv)
            producer.start()
            try:
                if "sync-null" in wanted:
                    measured = sync_row(client, producer, "BenchSync", args.warmup, args.duration)
                    results.append({**measured, "row": "sync-null"})
                if "batch32-null" in wanted:
                    measured = batch_row(
                        client, producer, "BenchBatch", 32, args.warmup, args.duration
                    )
                    results.append({**measured, "row": "batch32-null"})
            finally:
                producer.shutdown()
        finally:
            process.terminate()
            process.wait(20)
            null_scratch.cleanup()
    print(
        f"broker_send: C++ client (core {args.client_core}) -> rocketmq standalone"
        f" (core {args.server_core}), 1 KiB bodies, {args.duration:g} s per row"
    )
    print(f"{'row':>12}  {'in flight':>9}  {'msg/s':>9}  {'p50 us':>8}  {'p99 us':>8}  extra")
    for result in results:
        extra = (
            f"rate {result['rate']}/s, delivered {result['delivered']},"
            f" cpu client {result['client_cpu_pct']}% server {result['server_cpu_pct']}%"
            if "rate" in result
            else ""
        )
        print(
            f"{result['row']:>12}  {result['inflight']:>9}  {result['messages_per_s']:>9,}"
            f"  {result['p50_us'] or '-':>8}  {result['p99_us'] or '-':>8}  {extra}"
        )
    setup = {
        "benchmark": "broker_send",
        "body_bytes": len(BODY),
        "duration_s": args.duration,
        "server_core": args.server_core,
        "client_core": args.client_core,
        **machine(),
    }
    write_results(args.output, setup, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
