"""rocketmq-py against NATS JetStream, side by side in one run, with issue 31's targets.

Both servers run for the whole run, pinned to the same core (``--server-core``, default
1): ``rocketmq standalone`` (mmap store, async flush, in a temp dir) and Debian's
``nats-server -js`` (file store in a temp dir). The load comes from the other core
(``--client-core``, default 0), from clients that cost little per message: a C client
for RocketMQ frames (benchmarks/loadgen_c/rocketmq_load.c) and a Go client on nats.go
for NATS (benchmarks/peers/nats_load.go), both built at run time into a temp dir. 1 KiB
bodies. Each row measures our side, then NATS, back to back:

* single: SEND_MESSAGE_V2, 64 in flight | JetStream async publish, 64 acks outstanding;
* batch: SEND_BATCH_MESSAGE of 32, 16 in flight | async publish, 64 outstanding;
* one: SEND_MESSAGE_V2, one at a time (rate, p50, p99) | sync publish;
* pull: ``--messages`` stored (batches of 32), then drained by PULL_MESSAGE of 32 with
  ``--pull-inflight`` pulls outstanding | the same stored by async publish, then drained
  by as many subscriptions of one pull consumer (AckNone) each looping Fetch(32); the
  first 10% warm up;
* sdk-send: our SDK, 64 tasks looping ``await producer.send()`` | nats-py, 64 tasks
  looping ``await (await js.publish_async())``;
* sdk-consume: ``--messages`` stored, then our PushConsumer (batches of 32) | nats-py's
  pull ``fetch(32)`` in a loop (AckNone); from the first message to the last.

Send rows warm up ``--warmup`` s, then count ``--seconds`` s. Each row also gives the
servers' CPU per message. Besides: the idle RSS of ``rocketmq standalone``, its peak RSS
under the single row's load, and its time to ready. After each of our send rows the
broker's per-queue counts (admin API, GET_TOPIC_STATS_INFO) must equal what the client
saw acknowledged per queue; a mismatch makes the run exit 1. Prints a table with each
ratio against its target and writes JSON.

    python benchmarks/vs_nats.py                      # everything, 5 s per row
    python benchmarks/vs_nats.py --rows single,batch --seconds 3
    python benchmarks/vs_nats.py --ours-only          # our side only; ratios against the
                                                      # NATS figures of the last full run
    python benchmarks/vs_nats.py --broker-setting commitLogPageCacheWindow=268435456

``--broker-setting KEY=VALUE`` (repeatable) adds a line to the broker's broker.conf; the
first line printed names them, and the JSON keeps them (by default in
``vs_nats_settings.json``: such a run is no baseline for ``--ours-only``).

The peers come from benchmarks/peers/install.sh (Debian's nats-server, golang-go and
golang-github-nats-io-go-nats-dev; PyPI's nats-py); a missing one is named in one line
and the run exits 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import anyio
import orjson
from broker_send import start_standalone
from loadgen import (
    CpuMeter,
    _busy_jiffies,
    _jiffies_of,
    build_c_load_client,
    closed_loop,
    machine,
    pinned,
    run_backend,
    write_results,
)
from sdk_throughput import consume_row, send_async_row

from rocketmq_core.client.admin import Admin
from rocketmq_core.testing.ports import free_port

HERE = Path(__file__).resolve().parent
GO_CLIENT = HERE / "peers" / "nats_load.go"
INSTALL = "benchmarks/peers/install.sh"
DEBIAN_GOPATH = Path("/usr/share/gocode")
NATS_GO = DEBIAN_GOPATH / "src/github.com/nats-io/nats.go"
BODY = b"x" * 1024
BATCH = 32
QUEUES = 4
ROWS = ("single", "batch", "one", "pull", "sdk-send", "sdk-consume")
# issue 31: our figure / the NATS figure of the same row, in the same run
TARGET_RATIOS = {
    "single": 1.0,
    "batch": 2.0,
    "one": 0.9,
    "pull": 1.0,
    "sdk-send": 1.0,
    "sdk-consume": 1.0,
}
ONE_P99_US = 200
IDLE_RSS_MB = 50
LOAD_RSS_MB = 150
READY_S = 0.5
LAST_FULL_RUN = "benchmarks/results/vs_nats.json"
METER_KEYS = ("server_cpu_us_per_msg", "client_cpu_us_per_msg", "others_cpu_pct")


# --- peers and clients --------------------------------------------------------------


def missing_peer(ours_only: bool) -> str | None:
    """What this run needs and does not find, said in one line; None when all is there."""
    needed = [("cc", "a C compiler (apt-get install gcc)"), ("taskset", "taskset (util-linux)")]
    if not ours_only:
        needed += [("nats-server", "nats-server"), ("go", "go (golang-go)")]
    for program, what in needed:
        if shutil.which(program) is None:
            return f"{what} is not on PATH"
    if not ours_only:
        if not NATS_GO.is_dir():
            return f"nats.go is not in {NATS_GO} (golang-github-nats-io-go-nats-dev)"
        if importlib.util.find_spec("nats") is None:
            return "the Python package nats-py is not installed"
    return None


def build_clients(scratch: Path, with_go: bool) -> tuple[Path, Path | None]:
    """The C and Go load clients, compiled into ``scratch``."""
    c_binary = build_c_load_client(scratch)
    if not with_go:
        return c_binary, None
    go_binary = scratch / "nats_load"
    # Debian ships Go libraries as sources in a GOPATH tree: build in GOPATH mode
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(DEBIAN_GOPATH), "GOFLAGS": ""}
    subprocess.run(
        ["go", "build", "-o", str(go_binary), str(GO_CLIENT)], check=True, env=env, cwd=scratch
    )
    return c_binary, go_binary


def start_nats(scratch: Path, core: int | None) -> tuple[subprocess.Popen, str]:
    """``nats-server -js`` with its file store in ``scratch``, once it takes connections."""
    port = free_port()
    command = ["nats-server", "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(scratch)]
    log = open(scratch / "nats-server.log", "w")  # noqa: SIM115 - lives as long as the server
    process = subprocess.Popen(pinned(command, core), stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"nats-server exited at start: see {scratch / 'nats-server.log'}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, f"nats://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    process.terminate()
    raise SystemExit("nats-server did not take connections within 10 s")


def cpu_check_us(core: int | None) -> float:
    """Microseconds for ``sum(range(1000))`` on ``core``, best of 5: a yardstick that says
    how fast the shared machine's CPU ran for this run (runs compare by it)."""
    code = (
        "import timeit; print(min(timeit.repeat('sum(range(1000))', number=2000, repeat=5))"
        " / 2000 * 1e6)"
    )
    done = subprocess.run(
        pinned([sys.executable, "-c", code], core), capture_output=True, text=True, check=True
    )
    return round(float(done.stdout), 1)


def compile_sources() -> None:
    """Bytecode for every module the broker may load, as an installed package has it: an
    editable checkout run with PYTHONDONTWRITEBYTECODE would compile them again at each
    start, and the ready figure would count that (~0.25 s here)."""
    import compileall

    root = Path(__file__).resolve().parent.parent
    for tree in (root / "rocketmq_core", root / "plugins"):
        compileall.compile_dir(tree, quiet=1, workers=0)


def rss_mb(pid: int) -> dict:
    """VmRSS and its anonymous part (the rest is mapped files: CommitLog pages), MB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile"):
            fields[name] = round(int(value.split()[0]) / 1024, 1)
    return {"rss_mb": fields.get("VmRSS"), "anon_mb": fields.get("RssAnon")}


class PeakRss:
    """The largest VmRSS of a process while the block runs (sampled every 50 ms)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak: dict = {"rss_mb": 0.0, "anon_mb": 0.0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            now = rss_mb(self.pid)
            if (now["rss_mb"] or 0) > self.peak["rss_mb"]:
                self.peak = now

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_client(command: list[str], core: int | None, server_pid: int) -> dict:
    """Run a load client to its end; its JSON, plus the CPU the client, the server and
    everything else spent meanwhile (per message over all the messages it moved)."""
    tick = os.sysconf("SC_CLK_TCK")
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    server0, busy0, wall0 = _jiffies_of(server_pid), _busy_jiffies(), time.perf_counter()
    done = subprocess.run(pinned(command, core), capture_output=True, text=True)
    wall = time.perf_counter() - wall0
    server = (_jiffies_of(server_pid) - server0) / tick
    busy = (_busy_jiffies() - busy0) / tick
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    client = (children1.ru_utime + children1.ru_stime) - (children0.ru_utime + children0.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"{Path(command[0]).name} failed: {done.stderr.strip()[-500:]}")
    result = json.loads(done.stdout)
    moved = result.get("messages_all") or 0
    result["server_cpu_us_per_msg"] = round(server * 1e6 / moved, 2) if moved else None
    result["client_cpu_us_per_msg"] = round(client * 1e6 / moved, 2) if moved else None
    result["others_cpu_pct"] = round(100 * max(0.0, busy - server - client) / wall)
    return result


# --- our side -----------------------------------------------------------------------


@dataclass
class Ours:
    """Our side: the C client against the broker, and the admin API to check it."""

    c_binary: Path
    broker: str
    namesrv: str
    pid: int
    core: int | None
    checks: list[dict]  # stored = acknowledged, per topic

    def create_topic(self, topic: str) -> None:
        async def create() -> None:
            async with Admin(self.namesrv) as admin:
                await admin.create_topic(topic, QUEUES, broker_addr=self.broker)

        anyio.run(create)

    def stored_per_queue(self, topic: str) -> list[int]:
        async def stats() -> list[int]:
            async with Admin(self.namesrv) as admin:
                found = await admin.topic_stats(topic)
            counts = [0] * QUEUES
            for queue in found.queues:
                counts[queue.queue.queue_id] = queue.messages
            return counts

        return anyio.run(stats)

    def load(self, mode: str, topic: str, inflight: int, args, total: int = 0) -> dict:
        command = [str(self.c_binary), "--addr", self.broker, "--mode", mode]
        command += ["--topic", topic, "--group", f"bench-{topic}", "--inflight", str(inflight)]
        command += ["--queues", str(QUEUES), "--batch", str(BATCH), "--body", str(len(BODY))]
        if total:
            command += ["--total", str(total)]
        else:
            command += ["--seconds", str(args.seconds), "--warmup", str(args.warmup)]
        result = run_client(command, self.core, self.pid)
        if result["failed"]:
            raise SystemExit(
                f"{mode} to {topic}: {result['failed']} requests failed, the first with code"
                f" {result['first_failure_code']}: {result['first_failure']}"
            )
        return result

    def send(self, mode: str, topic: str, inflight: int, args, total: int = 0) -> dict:
        """A send row on a fresh topic, then the check: stored = acknowledged, per queue."""
        self.create_topic(topic)
        result = self.load(mode, topic, inflight, args, total)
        stored = self.stored_per_queue(topic)
        acked = result["acked_per_queue"]
        self.checks.append(
            {"topic": topic, "acknowledged": acked, "stored": stored, "equal": stored == acked}
        )
        return result


# --- rows ---------------------------------------------------------------------------


def figure(result: dict, label: str) -> dict:
    keep = ("messages_per_s", "p50_us", "p99_us", "messages", "seconds", "inflight")
    keep += ("server_cpu_us_per_msg", "client_cpu_us_per_msg", "others_cpu_pct")
    return {"what": label, **{key: result.get(key) for key in keep if key in result}}


def nats_load(go_binary: Path, url: str, pid: int, core: int | None, **options) -> dict:
    command = [str(go_binary), "--url", url]
    for name, value in options.items():
        command += [f"--{name}", str(value)]
    result = run_client(command, core, pid)
    if result["failed"]:
        raise SystemExit(
            f"nats_load {options}: {result['failed']} failed: {result['first_failure']}"
        )
    return result


async def nats_py_publish(url: str, stream: str, args, meter: CpuMeter) -> dict:
    import nats

    connection = await nats.connect(url)
    try:
        js = connection.jetstream(publish_async_max_pending=4 * args.sdk_inflight)
        subject = f"bench.{stream}"
        await js.add_stream(name=stream, subjects=[subject], storage="file")

        async def send() -> None:
            await (await js.publish_async(subject, BODY))

        count, latencies = await closed_loop(
            send, 1, args.sdk_inflight, args.warmup, args.seconds, meter
        )
        stored = (await js.stream_info(stream)).state.messages
    finally:
        await connection.close()
    latencies.sort()
    return {
        "messages_per_s": round(count / args.seconds),
        "p50_us": round(latencies[len(latencies) // 2] * 1e6) if latencies else None,
        "p99_us": round(latencies[int(len(latencies) * 0.99)] * 1e6) if latencies else None,
        "messages": count,
        "seconds": args.seconds,
        "inflight": args.sdk_inflight,
        "stream_messages": stored,
    } | {key: meter.result.get(key) for key in METER_KEYS}


async def nats_py_fetch(url: str, stream: str, total: int, meter: CpuMeter) -> dict:
    """``total`` messages stored by publish_async, then drained by fetch(32), one at a time."""
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig

    connection = await nats.connect(url)
    try:
        js = connection.jetstream()
        subject = f"bench.{stream}"
        await js.add_stream(name=stream, subjects=[subject], storage="file")
        filled_from = time.perf_counter()
        pending = [await js.publish_async(subject, BODY) for _ in range(total)]
        for ack in pending:
            await ack
        fill_seconds = time.perf_counter() - filled_from
        consumer = await js.pull_subscribe(
            subject, "bench-fetch", config=ConsumerConfig(ack_policy=AckPolicy.NONE)
        )
        received = 0
        first_at = last_at = 0.0
        while received < total:
            messages = await consumer.fetch(BATCH, timeout=10)
            now = time.perf_counter()
            if not received:
                first_at = now
                meter.start()
            received += len(messages)
            last_at = now
        meter.stop(received)
    finally:
        await connection.close()
    seconds = last_at - first_at
    return {
        "messages_per_s": round(received / seconds) if seconds > 0 else 0,
        "messages": received,
        "seconds": round(seconds, 3),
        "fill_per_s": round(total / fill_seconds),
    } | {key: meter.result.get(key) for key in METER_KEYS}


def sdk_rows(wanted: list[str], ours: Ours, nats_url: str | None, nats_pid: int, args) -> list:
    """The SDK rows, in this process (pinned to the client core), on uvloop."""
    rows: list[dict] = []

    async def run() -> None:
        if "sdk-send" in wanted:
            topic = "VsNatsSdkSend"
            meter = CpuMeter(ours.pid)
            mine = await send_async_row(
                ours.namesrv, topic, args.sdk_inflight, args.warmup, args.seconds, meter
            )
            theirs = None
            if nats_url:
                theirs = await nats_py_publish(nats_url, "SDKSEND", args, CpuMeter(nats_pid))
            rows.append(
                pair(
                    "sdk-send",
                    figure(mine, f"SDK send, {args.sdk_inflight} tasks"),
                    theirs and figure(theirs, f"nats-py publish_async, {args.sdk_inflight} tasks"),
                )
            )
        if "sdk-consume" in wanted:
            mine = await consume_row(ours.namesrv, args.messages, 8, 120.0, CpuMeter(ours.pid))
            if mine["messages"] != mine["expected"]:
                raise SystemExit(f"sdk-consume: {mine['messages']} of {mine['expected']} arrived")
            theirs = None
            if nats_url:
                theirs = await nats_py_fetch(
                    nats_url, "SDKFETCH", mine["expected"], CpuMeter(nats_pid)
                )
            rows.append(
                pair(
                    "sdk-consume",
                    figure(mine, "SDK PushConsumer, batches of 32"),
                    theirs and figure(theirs, "nats-py fetch(32)"),
                )
            )

    run_backend(run, "asyncio", use_uvloop=importlib.util.find_spec("uvloop") is not None)
    return rows


def pair(row: str, ours: dict, nats: dict | None) -> dict:
    return {"row": row, "ours": ours, "nats": nats}


def previous_nats_figures(path: str) -> tuple[dict, str]:
    """The NATS side of the last full run, by row, and when it ran (for --ours-only)."""
    try:
        last = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}, ""
    figures = {
        entry["row"]: entry["nats"] for entry in last.get("results", []) if entry.get("nats")
    }
    return figures, last.get("setup", {}).get("when", "")


def judge(entry: dict) -> None:
    """Ratio and whether the row meets its target, in place."""
    ours, nats = entry["ours"], entry["nats"]
    target = TARGET_RATIOS[entry["row"]]
    entry["target_ratio"] = target
    if not nats or not nats.get("messages_per_s"):
        entry["ratio"], entry["met"] = None, None
        return
    entry["ratio"] = round(ours["messages_per_s"] / nats["messages_per_s"], 2)
    entry["met"] = entry["ratio"] >= target
    if entry["row"] == "one":
        entry["met"] = entry["met"] and (ours.get("p99_us") or 1e9) <= ONE_P99_US


def describe(figure_: dict | None) -> str:
    if not figure_:
        return "-"
    text = f"{figure_['messages_per_s']:,.0f}/s"
    if figure_.get("p50_us") not in (None, -1):
        text += f" p50 {figure_['p50_us']:.0f} p99 {figure_['p99_us']:.0f} us"
    return text


def print_table(results: list[dict], memory: dict, checks: list[dict], nats_note: str) -> None:
    print(f"{'row':<12} {'rocketmq-py':<34} {'NATS JetStream' + nats_note:<34} ratio  target  met")
    for entry in results:
        ratio = "-" if entry["ratio"] is None else f"{entry['ratio']:.2f}"
        met = "-" if entry["met"] is None else ("yes" if entry["met"] else "NO")
        target = f">= {entry['target_ratio']:.1f}"
        if entry["row"] == "one":
            target += f", p99 <= {ONE_P99_US} us"
        print(
            f"{entry['row']:<12} {describe(entry['ours']):<34} {describe(entry['nats']):<34}"
            f" {ratio:>5}  {target}  {met}"
        )
        nats = entry["nats"] or {}
        print(
            f"{'':<12} {entry['ours']['what']:<34} {nats.get('what', ''):<34}"
            f" server cpu us/msg: {entry['ours'].get('server_cpu_us_per_msg')}"
            f" | {nats.get('server_cpu_us_per_msg')}; others busy:"
            f" {entry['ours'].get('others_cpu_pct')}% | {nats.get('others_cpu_pct')}%"
        )
    for name, value, limit, unit in (
        ("idle RSS", memory.get("idle", {}).get("rss_mb"), IDLE_RSS_MB, "MB"),
        ("RSS, single row", memory.get("under_load", {}).get("rss_mb"), LOAD_RSS_MB, "MB"),
        ("ready", memory.get("ready_s"), READY_S, "s"),
    ):
        if value is None:
            continue
        met = "yes" if value <= limit else "NO"
        print(f"{name:<16} {value} {unit} (target <= {limit} {unit}) {met}", end="")
        if unit == "MB":
            anon = (memory["idle"] if name == "idle RSS" else memory["under_load"])["anon_mb"]
            print(f"  [anonymous {anon} MB; the rest is mapped store files]", end="")
        print()
    if "nats_idle" in memory:
        print(f"nats-server RSS: idle {memory['nats_idle']['rss_mb']} MB", end="")
        if "nats_under_load" in memory:  # measured in the single row only
            print(f", single row {memory['nats_under_load']['rss_mb']} MB", end="")
        print()
    for check in checks:
        state = "yes" if check["equal"] else "NO"
        print(
            f"stored = acknowledged, {check['topic']}: {state}"
            f" (acknowledged {check['acknowledged']}, stored {check['stored']})"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join(ROWS), help=f"of {', '.join(ROWS)}")
    parser.add_argument("--seconds", type=float, default=5.0, help="counted, per send row")
    parser.add_argument("--warmup", type=float, default=1.0, help="per send row")
    parser.add_argument("--ours-only", action="store_true", help="no NATS: our side alone")
    parser.add_argument("--messages", type=int, default=204_800, help="stored, then drained")
    parser.add_argument("--pull-inflight", type=int, default=4)
    parser.add_argument("--sdk-inflight", type=int, default=64)
    parser.add_argument("--server-core", type=int, default=1, help="-1: don't pin")
    parser.add_argument("--client-core", type=int, default=0, help="-1: don't pin")
    parser.add_argument(
        "--broker-setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker.conf line for our broker (repeatable)",
    )
    parser.add_argument(
        "--output",
        help=f"default {LAST_FULL_RUN} (vs_nats_ours.json alone, vs_nats_settings.json with"
        " --broker-setting)",
    )
    args = parser.parse_args()
    wanted = [name.strip() for name in args.rows.split(",") if name.strip()]
    unknown = sorted(set(wanted) - set(ROWS))
    if unknown:
        parser.error(f"unknown rows {unknown}; choose from {', '.join(ROWS)}")
    settings = [line.strip() for line in args.broker_setting]
    for line in settings:
        if "=" not in line or "\n" in line:
            parser.error(f"--broker-setting takes KEY=VALUE, not {line!r}")
    step = BATCH * QUEUES  # every queue gets whole batches
    args.messages = max(step, args.messages // step * step)
    missing = missing_peer(args.ours_only)
    if missing:
        print(f"vs_nats: {missing}: run `bash {INSTALL}` (as root) first", file=sys.stderr)
        return 2
    # a run with settings of its own is no baseline for --ours-only (NATS's figures move
    # with what our broker does to the machine's memory)
    output = args.output or (
        "benchmarks/results/vs_nats_ours.json"
        if args.ours_only
        else "benchmarks/results/vs_nats_settings.json"
        if settings
        else LAST_FULL_RUN
    )
    server_core = None if args.server_core < 0 else args.server_core
    client_core = None if args.client_core < 0 else args.client_core
    if client_core is not None:
        os.sched_setaffinity(0, {client_core})
    load_before = os.getloadavg()
    cpu_before = cpu_check_us(server_core)
    results: list[dict] = []
    memory: dict = {}
    checks: list[dict] = []  # stored = acknowledged, per topic or stream
    nats_version = None

    with tempfile.TemporaryDirectory(prefix="vs-nats-") as scratch_name:
        scratch = Path(scratch_name)
        c_binary, go_binary = build_clients(scratch, with_go=not args.ours_only)
        (scratch / "rocketmq").mkdir()
        compile_sources()
        began = time.perf_counter()
        process, namesrv, broker = start_standalone(
            scratch / "rocketmq", server_core, settings="".join(f"{line}\n" for line in settings)
        )
        memory["ready_s"] = round(time.perf_counter() - began, 3)
        nats_process = None
        try:
            time.sleep(0.5)  # settle before reading the idle figure
            memory["idle"] = rss_mb(process.pid)
            ours = Ours(c_binary, broker, namesrv, process.pid, client_core, checks)
            nats_url = None
            if not args.ours_only:
                (scratch / "nats").mkdir()
                nats_process, nats_url = start_nats(scratch / "nats", server_core)
                time.sleep(0.5)
                memory["nats_idle"] = rss_mb(nats_process.pid)
            nats_pid = nats_process.pid if nats_process else 0

            def nats(**options) -> dict | None:
                if not nats_url:
                    return None
                assert go_binary is not None
                result = nats_load(go_binary, nats_url, nats_pid, client_core, **options)
                if options["mode"] != "fetch":  # the stream holds what was acknowledged
                    stream = f"NATS stream {options['stream']}"
                    acked, stored = result["messages_all"], result["stream_messages"]
                    checks.append(
                        {"topic": stream, "acknowledged": acked, "stored": stored,
                         "equal": acked == stored}
                    )  # fmt: skip
                return result

            def progress(row: str) -> None:
                print(f"vs_nats: {row} ...", file=sys.stderr, flush=True)

            timing = {"seconds": args.seconds, "warmup": args.warmup}
            if "single" in wanted:
                progress("single")
                with PeakRss(process.pid) as peak:
                    mine = ours.send("single", "VsNatsSingle", 64, args)
                memory["under_load"] = peak.peak
                if nats_url:
                    with PeakRss(nats_pid) as nats_peak:
                        theirs = nats(mode="async", stream="SINGLE", inflight=64, **timing)
                    memory["nats_under_load"] = nats_peak.peak
                else:
                    theirs = None
                results.append(
                    pair(
                        "single",
                        figure(mine, "SEND_MESSAGE_V2, 64 in flight"),
                        theirs and figure(theirs, "async publish, 64 in flight"),
                    )
                )
            if "batch" in wanted:
                progress("batch")
                mine = ours.send("batch", "VsNatsBatch", 16, args)
                theirs = nats(mode="async", stream="BATCH", inflight=64, **timing)
                results.append(
                    pair(
                        "batch",
                        figure(mine, "SEND_BATCH_MESSAGE 32, 16 in flight"),
                        theirs and figure(theirs, "async publish, 64 in flight"),
                    )
                )
            if "one" in wanted:
                progress("one")
                mine = ours.send("single", "VsNatsOne", 1, args)
                theirs = nats(mode="sync", stream="ONE", **timing)
                results.append(
                    pair(
                        "one",
                        figure(mine, "SEND_MESSAGE_V2, one at a time"),
                        theirs and figure(theirs, "sync publish"),
                    )
                )
            if "pull" in wanted:
                progress("pull (filling)")
                ours.send("batch", "VsNatsPull", 16, args, total=args.messages)
                if nats_url:
                    nats(mode="async", stream="PULL", inflight=64, total=args.messages)
                progress("pull")
                mine = ours.load("pull", "VsNatsPull", args.pull_inflight, args, args.messages)
                if mine["messages_all"] != args.messages:
                    raise SystemExit(
                        f"pull: {mine['messages_all']} of {args.messages} stored messages came back"
                    )
                theirs = nats(
                    mode="fetch", stream="PULL", inflight=args.pull_inflight, total=args.messages
                )
                results.append(
                    pair(
                        "pull",
                        figure(mine, f"PULL_MESSAGE 32, {args.pull_inflight} in flight"),
                        theirs and figure(theirs, f"Fetch(32), {args.pull_inflight} in flight"),
                    )
                )
            sdk_wanted = [row for row in wanted if row.startswith("sdk-")]
            if sdk_wanted:
                progress(", ".join(sdk_wanted))
                results += sdk_rows(sdk_wanted, ours, nats_url, nats_pid, args)
            if nats_url:
                nats_version = subprocess.run(
                    ["nats-server", "--version"], capture_output=True, text=True
                ).stdout.strip()
        finally:
            process.terminate()
            process.wait(20)
            if nats_process:
                nats_process.terminate()
                nats_process.wait(20)

    nats_note = ""
    if args.ours_only:
        previous, when = previous_nats_figures(LAST_FULL_RUN)
        for entry in results:
            entry["nats"] = previous.get(entry["row"])
        nats_note = f" (run of {when})" if when else " (no full run on file)"
    for entry in results:
        judge(entry)
    load_after = os.getloadavg()
    cpu_after = cpu_check_us(server_core)
    print(
        f"vs_nats: rocketmq standalone (mmap, async flush{''.join(', ' + s for s in settings)})"
        f" vs {nats_version or 'NATS (not run)'}"
        f" -js (file store); servers on core {args.server_core}, load on core"
        f" {args.client_core}; 1 KiB; {args.seconds:g} s per send row after {args.warmup:g} s;"
        f" load average {load_before[0]:.2f} before, {load_after[0]:.2f} after"
    )
    print(
        f"vs_nats: CPU yardstick, sum(range(1000)) on core {args.server_core}: {cpu_before} us"
        f" before, {cpu_after} us after (lower is a faster machine; compare runs by it)"
    )
    if max(load_before[0], load_after[0]) > 1.5:
        print("vs_nats: the machine was busy with other work: take the figures as indicative")
    print_table(results, memory, checks, nats_note)
    setup = {
        "benchmark": "vs_nats",
        "body_bytes": len(BODY),
        "seconds": args.seconds,
        "warmup_s": args.warmup,
        "messages_drained": args.messages,
        "server_core": args.server_core,
        "client_core": args.client_core,
        "ours_only": args.ours_only,
        "broker_settings": settings,
        "nats_server": nats_version,
        "load_average_before": load_before,
        "load_average_after": load_after,
        "cpu_check_us": [cpu_before, cpu_after],
        **machine(),
    }
    write_results(
        output, setup, [*results, {"row": "memory", **memory}, {"row": "stored", "checks": checks}]
    )
    return 0 if all(check["equal"] for check in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
