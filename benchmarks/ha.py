"""Master/slave replication: SYNC_MASTER against ASYNC_MASTER send rates, and the lag of
the slave at a steady send rate (issue 29).

For each role a broker group (one master, one slave, mmap stores, async flush) runs as
``rocketmq cluster up DIR`` pinned to ``--server-core`` (default 0). That command runs
the name server in its own process and each broker as a child ``rocketmq broker -c``
process, so by default the three share that core: every hand-off between master and
slave is a switch on one core, and their CPU is shared. ``--slave-core N`` moves every
thread of the slave's process to core N once the group is up (the master and the name
server stay). Our SDK runs here, pinned to ``--client-core`` (default 1), on uvloop when
installed. 1 KiB bodies. Rows:

* send, 64 in flight: 64 tasks looping ``await producer.send(...)``;
* send, 1 in flight: one task, one send at a time;
* lag: sends paced at ``--lag-rate`` msg/s (default 20,000; one send started per slot
  of a fixed schedule, at most 64 in flight) to a one-queue topic, while a reader here
  long-polls that queue *on the slave* (PULL_MESSAGE, suspend flag, 32 per pull). The
  sender is the C load client (benchmarks/loadgen_c/rocketmq_load.c, built into a temp
  folder, ``--rate``, ``--stamp``) pinned to the client core next to this process:
  our SDK tops out below 20k msg/s on one core. It skips a slot that finds 64 sends
  outstanding (counted as late) rather than sending it later. ``--lag-sender sdk``
  paces 64 SDK tasks here instead (a busy task's slot is sent late, not skipped). The
  lag of a message is the time from the start of its send (a CLOCK_MONOTONIC stamp in
  its body) to the pull response from the slave that carries it; with the SDK sender,
  "after SEND_OK" is from the master's answer instead (negative when the slave's copy
  was readable first; shown as 0); the C sender reports its send -> SEND_OK time. What
  the lag includes beyond the copy itself: the slave's dispatch to its consume queue,
  the pull response and this event loop getting to it. The reader's own cost is in the
  row (pulls/s, and the slave's CPU per message with the reader serving them). When
  the rate is not held (fewer than 97% of the scheduled sends done in the window) the
  row is run once more at 85% of the rate reached, and says so.

The ASYNC_MASTER rows are the peer of the SYNC_MASTER rows; the ratio of the 64 in flight
rates is reported. Every row warms up for ``--warmup`` s, then counts ``--seconds`` s
(``--lag-seconds`` for the lag rows); each row reports the CPU per message of this
process (with the C sender: the reader alone), the C sender, the master and the slave
over the counted window, and what every other process on the machine took meanwhile.
The default run takes about 90 s. Prints a table (with the issue's targets), the load
averages, and writes JSON.

    python benchmarks/ha.py --seconds 10 --lag-seconds 20
    python benchmarks/ha.py --roles ASYNC_MASTER --seconds 3 --slave-core 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio
from loadgen import (
    _busy_jiffies,
    _jiffies_of,
    build_c_load_client,
    closed_loop,
    machine,
    pinned,
    run_backend,
    uvloop_wanted,
    write_results,
)
from rocketmq_transport_tcp import TcpTransport

from rocketmq_core.client.admin import Admin
from rocketmq_core.client.message import Message, SendStatus
from rocketmq_core.client.producer import Producer
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.headers import PullMessageRequestHeader, PullMessageResponseHeader
from rocketmq_core.protocol.message import iter_records
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.testing.ports import NoFreePort, free_offset

BODY = b"x" * 1024
SENDERS = ("c", "sdk")  # what paces the lag rows' sends
ROLES = ("ASYNC_MASTER", "SYNC_MASTER")
SEND_TOPIC = "BenchHaSend"
LAG_TOPIC = "BenchHaLag{attempt}"  # one queue, one per attempt: the reader follows queue 0
LAG_ATTEMPTS = 2
LAG_INFLIGHT = 64  # the paced sender's most sends outstanding
PULL_BATCH = 32
PULL_FLAGS = 0x2 | 0x4  # suspend (long poll) + subscription
HELD = 0.97  # a rate is held when this share of the scheduled sends is done
STEP_DOWN = 0.85  # ... else the lag row runs again at this share of the rate reached
# time.monotonic_ns() (CLOCK_MONOTONIC) at the start of the send, first in the body, as the
# C client's --stamp writes it
STAMP = struct.Struct(">q")
TARGETS = {
    "sync_vs_async_64": 0.50,  # SYNC_MASTER 64-in-flight rate / ASYNC_MASTER's
    "lag_p99_ms": 10.0,  # at 20k msg/s
    "sync_lone_p99_ms": 2.0,  # SYNC_MASTER, one send at a time
}
READY = re.compile(r"ready: name server (\S+);(.*)$")
MEMBER = re.compile(r"(\S+)/(\d) (\S+) (\w+) pid (\d+)")
LISTEN_PORTS = {"master": 10911, "slave": 10921}  # moved by a free --port-offset


# --- the broker group -----------------------------------------------------------------


class BrokerGroup:
    """``rocketmq cluster up`` of one master and one slave, pinned to ``core``; the slave's
    process moved to ``slave_core`` once up when one is given."""

    def __init__(
        self, role: str, directory: Path, core: int | None, slave_core: int | None = None
    ) -> None:
        layout = directory / "layout"
        layout.mkdir(parents=True)
        common = (
            "brokerClusterName=BenchCluster\nbrokerName=bench-ha\nflushDiskType=ASYNC_FLUSH\n"
            # the slave copies the topics the benchmark creates at once
            "slaveSyncDelay=0\nslaveSyncInterval=500\n"
        )
        (layout / "broker-a.conf").write_text(
            f"{common}brokerId=0\nbrokerRole={role}\nlistenPort={LISTEN_PORTS['master']}\n"
        )
        (layout / "broker-a-s.conf").write_text(
            f"{common}brokerId=1\nbrokerRole=SLAVE\nlistenPort={LISTEN_PORTS['slave']}\n"
        )
        self.log = directory / "cluster-up.err"
        command = [
            *(sys.executable, "-m", "rocketmq_core.cli", "cluster", "up", str(layout)),
            *("--port-offset", str(_free_port_offset()), "--data-dir", str(directory / "data")),
        ]
        self.process = subprocess.Popen(
            pinned(command, core), stdout=subprocess.PIPE, stderr=self.log.open("wb"), text=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # blocks until ready or the command ends
        ready = READY.search(line)
        if not ready:
            self.process.kill()
            raise SystemExit(f"rocketmq cluster up did not start: {self.log.read_text()[-2000:]}")
        # keep draining stdout so that the cluster never blocks on a full pipe
        threading.Thread(target=self.process.stdout.read, daemon=True).start()
        self.namesrv = ready.group(1)
        members = {
            int(id_): (address, int(pid))
            for _n, id_, address, _r, pid in MEMBER.findall(ready.group(2))
        }
        self.master, self.master_pid = members[0]
        self.slave, self.slave_pid = members[1]
        if slave_core is not None:
            move_to_core(self.slave_pid, slave_core)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def move_to_core(pid: int, core: int) -> None:
    """Every thread of ``pid`` onto ``core`` (``taskset -a -p``); threads it starts later
    inherit the mask of the thread that starts them."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(task.name), {core})


def core_or_none(core: int) -> int | None:
    return None if core < 0 else core


def _free_port_offset() -> int:
    """An offset at which the name server's and both brokers' ports are free."""
    try:
        return free_offset(
            [9876, *(port + delta for port in LISTEN_PORTS.values() for delta in (-2, -1, 0, 1))]
        )
    except NoFreePort as exc:
        raise SystemExit(f"no free block of ports for the master and the slave: {exc}") from None


async def prepare(group: BrokerGroup, admin: Admin, remoting: RemotingClient) -> None:
    """Create the topics on the master; wait for the slave to follow and to know them."""
    await admin.create_topic(SEND_TOPIC, 4, broker_addr=group.master)
    for attempt in range(LAG_ATTEMPTS):
        await admin.create_topic(LAG_TOPIC.format(attempt=attempt), 1, broker_addr=group.master)
    with anyio.fail_after(30):
        while True:
            info = await admin.broker_runtime_info(group.master)
            if int(info.get("haConnectionCount", "0")) >= 1:
                break
            await anyio.sleep(0.05)
        while True:  # the slave's copy of the topic table (slaveSyncInterval)
            reply = await remoting.invoke(
                group.slave,
                pull_request(LAG_TOPIC.format(attempt=LAG_ATTEMPTS - 1), 0, suspend_ms=0),
                timeout=5,
            )
            if reply.code not in (
                ResponseCode.TOPIC_NOT_EXIST,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
            ):
                break
            await anyio.sleep(0.1)


# --- CPU over a window ----------------------------------------------------------------


class CpuWindow:
    """CPU time per message of this process, the master, the slave (and a sender process,
    when one is watched) over a window, and what every other process on the machine took
    (100 = one core)."""

    def __init__(self, master_pid: int, slave_pid: int) -> None:
        self.pids = {"master": master_pid, "slave": slave_pid}
        self._start: dict[str, float] = {}
        self._end: dict[str, float] = {}
        self.result: dict = {}

    def watch(self, name: str, pid: int) -> None:
        """One more process to account for; before ``start``."""
        self.pids[name] = pid

    def _sample(self) -> dict[str, float]:
        tick = os.sysconf("SC_CLK_TCK")
        sample = {name: _jiffies_of(pid) / tick for name, pid in self.pids.items()}
        sample |= {"wall": time.perf_counter(), "client": time.process_time()}
        return sample | {"busy": _busy_jiffies() / tick}

    def start(self) -> None:
        self._start = self._sample()

    def end(self) -> None:
        """The window's end, when the message count is known only later (``stop``)."""
        self._end = self._sample()

    def stop(self, messages: int) -> dict:
        end = self._end or self._sample()
        used = {key: end[key] - self._start[key] for key in end}
        wall = max(used["wall"], 1e-9)
        per = 1e6 / messages if messages else float("nan")
        processes = sum(used[name] for name in self.pids) + used["client"]
        self.result = {
            "client_cpu_us_per_msg": round(used["client"] * per, 1),
            "master_cpu_us_per_msg": round(used["master"] * per, 1),
            "slave_cpu_us_per_msg": round(used["slave"] * per, 1),
            "server_core_busy_pct": round(100 * (used["master"] + used["slave"]) / wall),
            "others_cpu_pct": round(100 * max(0.0, used["busy"] - processes) / wall),
        }
        if "sender" in self.pids:
            self.result["sender_cpu_us_per_msg"] = round(used["sender"] * per, 1)
        return self.result


# --- rows -----------------------------------------------------------------------------


def percentile_us(sorted_values: list[float], fraction: float) -> float | None:
    if not sorted_values:
        return None
    index = min(len(sorted_values) - 1, int(len(sorted_values) * fraction))
    return round(sorted_values[index] * 1e6, 1)


def send_row(
    role: str, inflight: int, count: int, seconds: float, latencies: list[float], statuses
) -> dict:
    latencies.sort()
    return {
        "role": role,
        "row": f"send {inflight} in flight",
        "inflight": inflight,
        "messages": count,
        "seconds": round(seconds, 3),
        "messages_per_s": round(count / seconds) if seconds > 0 else 0,
        "p50_us": percentile_us(latencies, 0.50),
        "p99_us": percentile_us(latencies, 0.99),
        "not_send_ok": {status.value: n for status, n in statuses.items() if n},
    }


async def timed_sends(
    producer: Producer, inflight: int, warmup: float, seconds: float, cpu: CpuWindow
) -> tuple[int, list[float], dict]:
    """``inflight`` tasks sending back to back (loadgen.closed_loop), counting the answers
    other than SEND_OK by status (warm-up included: any refusal is worth seeing)."""
    statuses = {status: 0 for status in SendStatus if status is not SendStatus.SEND_OK}

    async def send() -> None:
        result = await producer.send(Message(SEND_TOPIC, BODY))
        if result.status is not SendStatus.SEND_OK:
            statuses[result.status] += 1

    count, latencies = await closed_loop(send, 1, inflight, warmup, seconds, cpu)
    return count, latencies, statuses


def pull_request(topic: str, offset: int, suspend_ms: int = 1000) -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumer_group="CG-bench-ha-lag",
        topic=topic,
        queue_id=0,
        queue_offset=offset,
        max_msg_nums=PULL_BATCH,
        sys_flag=PULL_FLAGS,
        commit_offset=0,
        suspend_timeout_millis=suspend_ms,
        sub_version=0,
        subscription="*",
    )
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())


@dataclass
class PacedSends:
    """What a paced sender did; sent, scheduled and late count the messages whose slot
    fell in the counted window."""

    sent: int
    scheduled: int
    late: int | None  # slots skipped because 64 sends were outstanding (the C sender)
    acked: int  # every message answered SEND_OK, warm-up included: what the reader must see
    window_ns: tuple[int, int]  # the counted window, time.monotonic_ns()
    ok_at: dict[int, int] | None = None  # queue offset -> SEND_OK received (the SDK sender)
    ack_p50_us: float | None = None  # send -> SEND_OK (the C sender)
    ack_p99_us: float | None = None


# (topic, rate, warm-up s, counted s, cpu) -> what was sent
PacedSender = Callable[[str, float, float, float, "CpuWindow"], Awaitable[PacedSends]]


async def sdk_paced_sends(
    producer: Producer, topic: str, rate: float, warmup: float, seconds: float, cpu: CpuWindow
) -> PacedSends:
    """64 SDK tasks here take the slots of a fixed schedule in turn; a slot whose task is
    still busy is sent when the task is free (late, bunched)."""
    ok_at: dict[int, int] = {}
    clock = time.monotonic_ns
    start_ns = clock()
    window = (start_ns + round(warmup * 1e9), start_ns + round((warmup + seconds) * 1e9))
    interval_ns = round(1e9 / rate)
    next_slot = 0
    sent = 0

    async def sender() -> None:
        nonlocal next_slot, sent
        while True:
            slot = next_slot
            next_slot += 1
            due = start_ns + slot * interval_ns
            if due >= window[1] or clock() >= window[1]:
                return  # the schedule's end, or the window's when the rate is not held
            wait = due - clock()
            if wait > 0:
                await anyio.sleep(wait / 1e9)
            began = clock()
            result = await producer.send(Message(topic, STAMP.pack(began) + BODY[8:]))
            if result.status is SendStatus.SEND_OK:
                ok_at[result.queue_offset] = clock()
            if window[0] <= began < window[1]:
                sent += 1

    async with anyio.create_task_group() as senders:
        for _ in range(LAG_INFLIGHT):
            senders.start_soon(sender)
    scheduled = round(seconds * rate)
    return PacedSends(sent, scheduled, None, len(ok_at), window, ok_at=ok_at)


async def c_paced_sends(
    binary: Path,
    master: str,
    core: int | None,
    topic: str,
    rate: float,
    warmup: float,
    seconds: float,
    cpu: CpuWindow,
) -> PacedSends:
    """The C load client, paced (--rate) and stamping each body (--stamp), to the end of
    its run; its CPU is accounted in ``cpu`` as the sender's."""
    command = [str(binary), "--addr", master, "--mode", "single", "--topic", topic]
    command += ["--group", "PG-bench-ha-lag", "--queues", "1", "--inflight", str(LAG_INFLIGHT)]
    command += ["--body", str(len(BODY)), "--rate", f"{rate:.0f}", "--stamp", "1"]
    command += ["--warmup", str(warmup), "--seconds", str(seconds)]
    async with await anyio.open_process(pinned(command, core), stdin=subprocess.DEVNULL) as run:
        cpu.watch("sender", run.pid)  # taskset execs the client: the same pid
        status = await run.wait()
        assert run.stdout is not None and run.stderr is not None
        output = b"".join([chunk async for chunk in run.stdout])
        errors = b"".join([chunk async for chunk in run.stderr])
    if status != 0:
        raise SystemExit(f"the C sender failed ({status}): {errors.decode().strip()[-500:]}")
    result = json.loads(output)
    if result["failed"]:
        raise SystemExit(
            f"the C sender to {topic}: {result['failed']} sends failed, the first with code"
            f" {result['first_failure_code']}: {result['first_failure']}"
        )
    return PacedSends(
        sent=result["sent"],
        scheduled=result["slots"],
        late=result["late"],
        acked=result["messages_all"],
        window_ns=(result["window_from_ns"], result["window_to_ns"]),
        ack_p50_us=result["p50_us"],
        ack_p99_us=result["p99_us"],
    )


class LagReader:
    """Long-polls queue 0 of ``topic`` on the slave from offset 0, noting for every message
    its queue offset, its send stamp and when the pull response carrying it came."""

    def __init__(self, remoting: RemotingClient, slave: str, topic: str) -> None:
        self.remoting, self.slave, self.topic = remoting, slave, topic
        self.read: list[tuple[int, int, int]] = []  # (queue offset, send began ns, read ns)
        self.pulls = 0
        self.pulled = 0  # messages in the counted pulls
        self.codes: dict[str, int] = {}  # the counted pulls' response codes

    def restart_counts(self) -> None:
        self.pulls = self.pulled = 0
        self.codes.clear()

    async def run(self, stop: anyio.Event) -> None:
        offset = 0
        clock = time.monotonic_ns
        while not stop.is_set():
            reply = await self.remoting.invoke(
                self.slave, pull_request(self.topic, offset), timeout=5
            )
            now = clock()
            self.pulls += 1
            name = ResponseCode(reply.code).name
            self.codes[name] = self.codes.get(name, 0) + 1
            header = PullMessageResponseHeader.from_ext_fields(reply.ext_fields)
            if reply.code == ResponseCode.SUCCESS:
                before = len(self.read)
                for record in iter_records(reply.body):
                    self.read.append((record.queue_offset, STAMP.unpack_from(record.body)[0], now))
                self.pulled += len(self.read) - before
            elif reply.code not in (
                ResponseCode.PULL_NOT_FOUND,
                ResponseCode.PULL_RETRY_IMMEDIATELY,
            ):
                raise SystemExit(f"pull from the slave {self.slave}: {reply.code!r} {reply.remark}")
            offset = header.next_begin_offset


async def lag_row(
    role: str,
    group: BrokerGroup,
    send_paced: PacedSender,
    remoting: RemotingClient,
    topic: str,
    rate: float,
    warmup: float,
    seconds: float,
    cpu: CpuWindow,
) -> dict:
    """Sends paced at ``rate`` while a reader long-polls the slave; the lag per message."""
    reader = LagReader(remoting, group.slave, topic)
    measure_from = time.monotonic() + warmup

    async def timekeeper() -> None:
        await anyio.sleep(measure_from - time.monotonic())
        cpu.start()
        reader.restart_counts()
        await anyio.sleep(measure_from + seconds - time.monotonic())
        cpu.end()

    # the reader starts at offset 0 of a fresh queue: earlier rounds are read, not counted
    stop_reading = anyio.Event()
    async with anyio.create_task_group() as outer:
        outer.start_soon(reader.run, stop_reading)
        async with anyio.create_task_group() as senders:
            senders.start_soon(timekeeper)
            sends = await send_paced(topic, rate, warmup, seconds, cpu)
        with anyio.move_on_after(5):  # let the last messages reach the reader
            while len(reader.read) < sends.acked:
                await anyio.sleep(0.01)
        stop_reading.set()
        outer.cancel_scope.cancel()
    cpu.stop(sends.sent)
    window = sends.window_ns
    counted = [
        (q, began, read_ns) for q, began, read_ns in reader.read if window[0] <= began < window[1]
    ]
    from_send = sorted((read_ns - began) / 1e9 for _q, began, read_ns in counted)
    ok_at = sends.ok_at
    from_ok = (
        None
        if ok_at is None
        else sorted(max(0, read_ns - ok_at[q]) / 1e9 for q, _b, read_ns in counted if q in ok_at)
    )
    codes = reader.codes
    return {
        "role": role,
        "row": "lag",
        "sender": "sdk" if ok_at is not None else "c",
        "rate_asked": round(rate),
        "messages": sends.sent,
        "seconds": round(seconds, 3),
        "messages_per_s": round(sends.sent / seconds),
        "held": sends.sent >= HELD * sends.scheduled,
        "scheduled": sends.scheduled,
        "late": sends.late,
        "read": len(from_send),
        "lag_p50_us": percentile_us(from_send, 0.50),
        "lag_p99_us": percentile_us(from_send, 0.99),
        "lag_max_us": percentile_us(from_send, 1.0),
        "lag_after_ok_p50_us": percentile_us(from_ok, 0.50) if from_ok is not None else None,
        "lag_after_ok_p99_us": percentile_us(from_ok, 0.99) if from_ok is not None else None,
        "read_before_send_ok": None
        if ok_at is None
        else sum(1 for q, _b, read_ns in counted if read_ns < ok_at.get(q, 0)),
        "send_ack_p50_us": sends.ack_p50_us,
        "send_ack_p99_us": sends.ack_p99_us,
        "pulls_per_s": round(reader.pulls / seconds),
        "messages_per_pull": round(reader.pulled / codes["SUCCESS"], 1)
        if codes.get("SUCCESS")
        else None,
        "pull_codes": dict(codes),
    }


# --- the run --------------------------------------------------------------------------


async def measure_role(
    role: str, group: BrokerGroup, args: argparse.Namespace, c_binary: Path | None
) -> list[dict]:
    """The send rows, then the lag row (paced by the C client at ``c_binary``, else by
    the SDK)."""
    rows: list[dict] = []
    async with (
        Admin(namesrv_addr=group.namesrv) as admin,
        RemotingClient(TcpTransport()) as remoting,
        Producer(f"PG-bench-ha-{role.lower()}", group.namesrv) as producer,
    ):
        await prepare(group, admin, remoting)
        for inflight in (64, 1):
            cpu = CpuWindow(group.master_pid, group.slave_pid)
            count, latencies, statuses = await timed_sends(
                producer, inflight, args.warmup, args.seconds, cpu
            )
            row = send_row(role, inflight, count, args.seconds, latencies, statuses)
            rows.append(row | cpu.result)
            print_row(rows[-1])
        send_paced: PacedSender = (
            partial(c_paced_sends, c_binary, group.master, core_or_none(args.client_core))
            if c_binary is not None
            else partial(sdk_paced_sends, producer)
        )
        rate = args.lag_rate
        for attempt in range(LAG_ATTEMPTS):
            cpu = CpuWindow(group.master_pid, group.slave_pid)
            topic = LAG_TOPIC.format(attempt=attempt)
            row = await lag_row(
                role, group, send_paced, remoting, topic, rate, args.warmup, args.lag_seconds, cpu
            )
            rows.append(row | cpu.result)
            print_row(rows[-1])
            if row["held"]:
                break
            rate = STEP_DOWN * row["messages_per_s"]
    return rows


def print_row(row: dict) -> None:
    def us(value: float | None) -> str:
        return "-" if value is None else f"{value:,.0f}"

    if row["row"] == "lag":
        if row["sender"] == "c":
            sender = (
                f"C sender {row['sender_cpu_us_per_msg']} us/msg, {row['late']:,} late,"
                f" send -> SEND_OK p50 {us(row['send_ack_p50_us'])}"
                f" p99 {us(row['send_ack_p99_us'])} us"
            )
        else:
            sender = (
                f"SDK sender; after SEND_OK p50 {us(row['lag_after_ok_p50_us'])}"
                f" p99 {us(row['lag_after_ok_p99_us'])} us; {row['read_before_send_ok']:,}"
                " read before SEND_OK"
            )
        detail = (
            f"rate {row['rate_asked']:,}/s {'held' if row['held'] else 'NOT held'};"
            f" lag p50 {us(row['lag_p50_us'])} us p99 {us(row['lag_p99_us'])} us"
            f" max {us(row['lag_max_us'])} us; {sender}; {row['pulls_per_s']:,} pulls/s,"
            f" {row['messages_per_pull']} per pull {row['pull_codes']}"
        )
    else:
        refused = row["not_send_ok"]
        detail = f"p50 {us(row['p50_us'])} us  p99 {us(row['p99_us'])} us" + (
            f"  not SEND_OK: {refused}" if refused else ""
        )
    print(
        f"{row['role']:>12}  {row['row']:>19}  {row['messages_per_s']:>9,} msg/s"
        f"  cpu us/msg client {row['client_cpu_us_per_msg']:>5} master"
        f" {row['master_cpu_us_per_msg']:>5} slave {row['slave_cpu_us_per_msg']:>5}"
        f"  core busy {row['server_core_busy_pct']:>3}%  others {row['others_cpu_pct']:>3}%"
        f"  {detail}",
        flush=True,
    )


def verdicts(results: list[dict]) -> list[dict]:
    def find(role: str, name: str) -> dict | None:
        found = [r for r in results if r["role"] == role and r["row"] == name]
        return found[-1] if found else None

    checks: list[dict] = []
    sync64, async64 = (
        find("SYNC_MASTER", "send 64 in flight"),
        find("ASYNC_MASTER", "send 64 in flight"),
    )
    if sync64 and async64 and async64["messages_per_s"]:
        ratio = sync64["messages_per_s"] / async64["messages_per_s"]
        checks.append(
            {
                "target": "SYNC_MASTER 64 in flight >= 50% of ASYNC_MASTER",
                "measured": f"{ratio:.2f} ({sync64['messages_per_s']:,}"
                f" / {async64['messages_per_s']:,} msg/s)",
                "met": ratio >= TARGETS["sync_vs_async_64"],
            }
        )
    for role in ROLES:
        lag = find(role, "lag")
        if lag and lag["lag_p99_us"] is not None:
            p99_ms = lag["lag_p99_us"] / 1000
            at = f"at {lag['messages_per_s']:,} msg/s" + ("" if lag["held"] else ", rate not held")
            checks.append(
                {
                    "target": f"{role} lag p99 <= 10 ms at 20k msg/s",
                    "measured": f"{p99_ms:.2f} ms {at}",
                    "met": p99_ms <= TARGETS["lag_p99_ms"]
                    and lag["rate_asked"] >= 20_000
                    and lag["held"],
                }
            )
    lone = find("SYNC_MASTER", "send 1 in flight")
    if lone and lone["p99_us"] is not None:
        checks.append(
            {
                "target": "a lone SYNC_MASTER send p99 <= 2 ms",
                "measured": f"{lone['p99_us'] / 1000:.2f} ms",
                "met": lone["p99_us"] / 1000 <= TARGETS["sync_lone_p99_ms"],
            }
        )
    return checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="counted, per send row")
    parser.add_argument("--warmup", type=float, default=2.0, help="per row")
    parser.add_argument("--lag-seconds", type=float, default=10.0, help="counted, per lag row")
    parser.add_argument("--lag-rate", type=float, default=20_000.0, help="msg/s")
    parser.add_argument("--roles", default=",".join(ROLES))
    parser.add_argument("--server-core", type=int, default=0, help="-1: don't pin")
    parser.add_argument("--client-core", type=int, default=1, help="-1: don't pin")
    parser.add_argument(
        "--slave-core",
        type=int,
        default=-1,
        help="move the slave's process to this core once up (-1: it stays on --server-core)",
    )
    parser.add_argument(
        "--lag-sender",
        choices=SENDERS,
        default="c",
        help="what paces the lag rows: the C load client (default) or our SDK",
    )
    parser.add_argument("--no-uvloop", action="store_true")
    parser.add_argument("--output", default="benchmarks/results/ha.json")
    args = parser.parse_args()
    roles = [name.strip() for name in args.roles.split(",") if name.strip()]
    if set(roles) - set(ROLES):
        parser.error(f"unknown roles {sorted(set(roles) - set(ROLES))}; choose from {ROLES}")
    server_core = core_or_none(args.server_core)
    slave_core = core_or_none(args.slave_core)
    if args.client_core >= 0:
        os.sched_setaffinity(0, {args.client_core})
    use_uvloop = uvloop_wanted(args.no_uvloop)
    loop = "uvloop" if use_uvloop else "asyncio"
    placement = (
        f"all on core {args.server_core}"
        if slave_core is None
        else f"name server and master on core {args.server_core}, slave on core {slave_core}"
    )
    sender = "the C load client" if args.lag_sender == "c" else "the SDK"
    print(
        f"ha: rocketmq_core.client (core {args.client_core}, {loop}) -> name server, master and"
        f" slave (rocketmq cluster up, {placement}; mmap, async flush), 1 KiB bodies;"
        f" {args.seconds:g} s per send row, {args.lag_seconds:g} s per lag row (sent by"
        f" {sender} on core {args.client_core}), after {args.warmup:g} s warm-up;"
        f" load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    load_before = os.getloadavg()
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ha-") as scratch_name:
        c_binary = build_c_load_client(Path(scratch_name)) if args.lag_sender == "c" else None
        for role in roles:
            directory = Path(scratch_name) / role.lower()
            group = BrokerGroup(role, directory, server_core, slave_core)

            async def run(role: str = role, group: BrokerGroup = group) -> None:
                results.extend(await measure_role(role, group, args, c_binary))

            try:
                run_backend(run, "asyncio", use_uvloop)
            finally:
                group.stop()
                shutil.rmtree(directory, ignore_errors=True)  # the next role's room on disk
    checks = verdicts(results)
    for check in checks:
        print(
            f"target: {check['target']}: {check['measured']}:"
            f" {'met' if check['met'] else 'NOT met'}"
        )
    setup = {
        "benchmark": "ha",
        "body_bytes": len(BODY),
        "seconds": args.seconds,
        "lag_seconds": args.lag_seconds,
        "warmup_s": args.warmup,
        "lag_rate_asked": args.lag_rate,
        "servers": "rocketmq cluster up: name server, master, slave in three processes",
        "lag_sender": "C load client (rocketmq_load.c --rate --stamp)"
        if args.lag_sender == "c"
        else "SDK, 64 tasks",
        "store": "mmap",
        "flush": "ASYNC_FLUSH",
        "event_loop": loop,
        "server_core": args.server_core,
        "client_core": args.client_core,
        "slave_core": args.slave_core if slave_core is not None else args.server_core,
        "load_average_before": [round(load, 2) for load in load_before],
        "load_average_after": [round(load, 2) for load in os.getloadavg()],
        "lag_method": "a reader in the client process long-polls the one-queue lag topic on"
        " the slave (PULL_MESSAGE, suspend, 32 per pull); lag = pull response received -"
        " send began (CLOCK_MONOTONIC stamp in the body); after SEND_OK (SDK sender): -"
        " the master's answer received; late (C sender): slots skipped, 64 outstanding",
        "cpu_columns": "CPU time per message over the counted window of this process (with"
        " the C sender: the reader alone), the C sender, the master and the slave;"
        " server_core_busy_pct: master + slave (100 = one core); others_cpu_pct: every"
        " other process on the machine",
        **machine(),
    }
    write_results(args.output, setup, [*results, {"targets": checks}])
    return 0


if __name__ == "__main__":
    sys.exit(main())
