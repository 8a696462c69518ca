"""Sends and receives through the gRPC proxy against the remoting path, on one broker.

Issue 33's benchmark: RocketMQ 5's gRPC protocol (``apache.rocketmq.v2.MessagingService``)
against RocketMQ 4's remoting, in the same run, on the same broker; the target is that
gRPC keeps at least half of remoting's throughput.

One ``rocketmq standalone`` runs in a child process pinned to one core (async flush,
mmap store in a temp dir) with ``grpcServerPort`` on a free port: the proxy_grpc
plugin serves gRPC from a thread of the broker's own process (local mode), so the
broker's CPU per message below counts the proxy too. The load runs here, pinned to
the other core, on one event loop (uvloop unless ``--no-uvloop``), the same kind of
client on both sides, 1 KiB bodies:

* remoting-send: our SDK's Producer, ``--inflight`` tasks each looping
  ``await producer.send(...)``;
* grpc-send: a grpc.aio channel to the proxy, ``--inflight`` tasks each looping
  ``await stub.SendMessage(...)`` of one message, with the metadata and system
  properties a 5.x client sends (a client id, a request id per call, a message id);
* remoting-receive: a topic pre-filled with ``--receive-messages`` numbered messages,
  drained by our SDK's LitePullConsumer (pulls of 32 on each of the 4 queues at once);
* grpc-receive: the same topic drained by ``--receivers`` ReceiveMessage loops
  (batch 32, invisible 60 s, 5 s long polling: the proxy's shortest), each message then
  acknowledged by an AckMessage of its own, as the 5.x SimpleConsumer does
  (``--ack-inflight`` outstanding at most);
* grpc-null-send: grpc-send's client against a grpc.aio MessagingService in a process
  of its own on the server's core that answers every SendMessage OK at once and keeps
  nothing: what gRPC itself costs in Python on this machine, the most any proxy built
  on grpcio could show in grpc-send (grpc's threads at nice 15 there too, as the
  proxy has them: rocketmq_proxy_grpc/io_threads.py).

With ``--tls`` the broker serves its gRPC port with TLS (``tls.server.mode=permissive``,
a certificate of a CA made for the run): the gRPC rows then pass the TLS listener and
its loopback relay (docs/operations.md, "TLS"); the remoting rows stay plain.

The send rows warm up for ``--warmup`` s, then count the sends that began and ended in
the next ``--duration`` s. A receive row counts from its first message to its last (to
the last acknowledgement for gRPC): rebalance, routes and the first poll are left out.
Each round runs every row (the send rows, then the two receive rows on a freshly
filled topic, their order swapped every round), so that a neighbour's burst
hits both sides alike; reported are medians over the rounds.

Checked in every run: each send answered OK, and the topic stores exactly as many
messages as sends were acknowledged; each receive row got every number it was filled
with exactly once, and every acknowledgement was OK. An answer other than OK ends the
run at once; a count that does not match ends it with exit status 1 after the table.

    python benchmarks/grpc_vs_remoting.py --rounds 3 --duration 4
    python benchmarks/grpc_vs_remoting.py --rows grpc-send,remoting-send --inflight 16
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio
import grpc
from broker_send import start_standalone
from google.protobuf.duration_pb2 import Duration
from loadgen import (
    CpuMeter,
    closed_loop,
    machine,
    pinned,
    run_backend,
    uvloop_wanted,
    write_results,
)
from rocketmq_proxy_grpc.io_threads import GrpcThreadPriority
from rocketmq_proxy_grpc.v2 import definition_pb2 as pb
from rocketmq_proxy_grpc.v2 import service_pb2 as spb
from rocketmq_proxy_grpc.v2 import service_pb2_grpc

from rocketmq_core.client.admin import Admin
from rocketmq_core.client.message import Message, SendStatus
from rocketmq_core.client.producer import Producer
from rocketmq_core.client.pull_consumer import LitePullConsumer
from rocketmq_core.testing.ports import free_port

BODY = b"x" * 1024
NUMBER_DIGITS = 10  # a filled message's body starts with its number, then padding
PADDING = b"x" * (len(BODY) - NUMBER_DIGITS)
BATCH = 32  # gRPC's receive batch, the SDK's pull batch, the fill's send batch
QUEUES = 4
INVISIBLE_S = 60  # longer than any receive row: nothing comes back while it runs
LONG_POLLING_S = 5  # the proxy's shortest long poll
TARGET = 0.50  # issue 33: gRPC >= 50% of the remoting path's throughput
NULL_ROW = "grpc-null-send"
SEND_ROWS = ("remoting-send", "grpc-send", NULL_ROW)
RECEIVE_ROWS = ("remoting-receive", "grpc-receive")
ROWS = (*SEND_ROWS, *RECEIVE_ROWS)
CLIENT_ID = f"bench@{os.getpid()}@0@grpc-vs-remoting"


class CheckFailed(Exception):
    """A send or acknowledgement not answered OK: the row's figures would mean nothing."""


def numbered_body(number: int) -> bytes:
    return f"{number:0{NUMBER_DIGITS}d}".encode() + PADDING


def number_of(body: bytes) -> int:
    return int(body[:NUMBER_DIGITS])


# --- what a 5.x client sends -----------------------------------------------------------


def call_metadata() -> tuple[tuple[str, str], ...]:
    """The headers of every call of a 5.x client (no ACL: no signature)."""
    return (
        ("x-mq-client-id", CLIENT_ID),
        ("x-mq-language", "PYTHON"),
        ("x-mq-protocol", "GRPC_V2"),
        ("x-mq-client-version", "5.1.2"),
        ("x-mq-request-id", str(uuid.uuid4())),
    )


def grpc_message(topic: pb.Resource) -> pb.Message:
    system = pb.SystemProperties(
        message_id=uuid.uuid4().hex.upper(),
        body_encoding=pb.IDENTITY,
        message_type=pb.NORMAL,
        born_host="127.0.0.1",
    )
    system.born_timestamp.GetCurrentTime()
    return pb.Message(topic=topic, system_properties=system, body=BODY)


def check_status(what: str, status: pb.Status) -> None:
    if status.code != pb.OK:
        raise CheckFailed(f"{what} answered {pb.Code.Name(status.code)}: {status.message}")


# --- send rows -------------------------------------------------------------------------


def send_row(
    name: str, topic: str, count: int, acked: int, stored: int | None, latencies: list[float]
) -> dict:
    latencies.sort()

    def percentile_us(fraction: float) -> int | None:
        if not latencies:
            return None
        return round(latencies[min(len(latencies) - 1, int(len(latencies) * fraction))] * 1e6)

    return {
        "row": name,
        "topic": topic,
        "messages": count,
        "p50_us": percentile_us(0.50),
        "p99_us": percentile_us(0.99),
        "acknowledged": acked,
        "stored": stored,
        "problem": (
            f"{stored:,} stored for {acked:,} acknowledged"
            if stored is not None and stored != acked
            else None
        ),
    }


async def remoting_send(namesrv: str, topic: str, args: argparse.Namespace, meter) -> tuple:
    acked = 0
    async with Producer("PG-bench-remoting", namesrv) as producer:

        async def send() -> None:
            nonlocal acked
            result = await producer.send(Message(topic, BODY))
            if result.status is not SendStatus.SEND_OK:
                raise CheckFailed(f"remoting send answered {result.status.value}")
            acked += 1

        count, latencies = await closed_loop(
            send, 1, args.inflight, args.warmup, args.duration, meter
        )
    return count, acked, latencies


async def grpc_send(stub, topic: str, args: argparse.Namespace, meter) -> tuple:
    acked = 0
    resource = pb.Resource(name=topic)

    async def send() -> None:
        nonlocal acked
        request = spb.SendMessageRequest(messages=[grpc_message(resource)])
        response = await stub.SendMessage(request, metadata=call_metadata(), timeout=10)
        check_status("SendMessage", response.status)
        acked += 1

    count, latencies = await closed_loop(send, 1, args.inflight, args.warmup, args.duration, meter)
    return count, acked, latencies


# --- receive rows ----------------------------------------------------------------------


class Tally:
    """Which numbers of a filled topic a receive row got, and from the first to the last
    message (for gRPC: to the last acknowledgement) how long it took."""

    def __init__(self, total: int, meter: CpuMeter) -> None:
        self.total = total
        self.meter = meter
        self.seen = bytearray(total)
        self.received = 0
        self.duplicates = 0
        self.strangers = 0  # numbers outside the fill: another run's messages
        self.first_at: float | None = None
        self.last_at = 0.0

    def add(self, bodies: list[bytes]) -> None:
        if not bodies:
            return
        now = time.perf_counter()
        if self.first_at is None:
            self.first_at = now
            self.meter.start()
        for body in bodies:
            number = number_of(body)
            if not 0 <= number < self.total:
                self.strangers += 1
            elif self.seen[number]:
                self.duplicates += 1
            else:
                self.seen[number] = 1
                self.received += 1
        self.last_at = now

    @property
    def complete(self) -> bool:
        return self.received >= self.total

    def finish(self, name: str, topic: str, done_at: float, **extra: object) -> dict:
        seconds = max(done_at - self.first_at, 1e-9) if self.first_at is not None else 0.0
        self.meter.stop(self.received)
        problems = []
        if self.received < self.total:
            problems.append(f"{self.total - self.received:,} of {self.total:,} never received")
        if self.duplicates:
            problems.append(f"{self.duplicates:,} received twice")
        if self.strangers:
            problems.append(f"{self.strangers:,} not of the fill")
        return {
            "row": name,
            "topic": topic,
            "messages": self.received,
            "seconds": round(seconds, 3),
            "messages_per_s": round(self.received / seconds) if seconds else 0,
            "expected": self.total,
            "duplicates": self.duplicates,
            "problem": "; ".join(problems) or None,
            **extra,
        }


async def fill(namesrv: str, topic: str, total: int) -> float:
    """``total`` numbered messages into ``topic``, in batches of 32; the seconds it took."""
    starts = iter(range(0, total, BATCH))
    started = time.perf_counter()
    async with Producer("PG-bench-fill", namesrv) as producer:

        async def worker() -> None:
            for start in starts:
                numbers = range(start, min(start + BATCH, total))
                await producer.send_batch([Message(topic, numbered_body(n)) for n in numbers])

        async with anyio.create_task_group() as task_group:
            for _ in range(8):
                task_group.start_soon(worker)
    return time.perf_counter() - started


async def remoting_receive(
    namesrv: str, topic: str, group: str, args: argparse.Namespace, meter: CpuMeter
) -> dict:
    tally = Tally(args.receive_messages, meter)
    consumer = LitePullConsumer(group, namesrv, consume_from="first", pull_batch_size=BATCH)
    consumer.subscribe(topic, "*")
    async with consumer:
        with anyio.move_on_after(args.receive_timeout):
            while not tally.complete:
                messages = await consumer.poll(1.0)
                if messages:
                    tally.add([message.body for message in messages])
        done_at = tally.last_at
    return tally.finish("remoting-receive", topic, done_at, consumer="LitePullConsumer")


async def grpc_receive(
    stub, topic: str, group: str, args: argparse.Namespace, meter: CpuMeter
) -> dict:
    tally = Tally(args.receive_messages, meter)
    topic_resource, group_resource = pb.Resource(name=topic), pb.Resource(name=group)
    assignment = await stub.QueryAssignment(
        spb.QueryAssignmentRequest(topic=topic_resource, group=group_resource),
        metadata=call_metadata(),
        timeout=10,
    )
    check_status("QueryAssignment", assignment.status)
    request = spb.ReceiveMessageRequest(
        group=group_resource,
        message_queue=assignment.assignments[0].message_queue,
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        batch_size=BATCH,
        invisible_duration=Duration(seconds=INVISIBLE_S),
        long_polling_timeout=Duration(seconds=LONG_POLLING_S),
    )
    ack_slots = anyio.Semaphore(args.ack_inflight)
    acked = 0
    last_ack_at = 0.0
    all_acked = anyio.Event()
    failures: list[str] = []

    async def ack(message: pb.Message) -> None:
        nonlocal acked, last_ack_at
        try:
            entry = spb.AckMessageEntry(
                message_id=message.system_properties.message_id,
                receipt_handle=message.system_properties.receipt_handle,
            )
            response = await stub.AckMessage(
                spb.AckMessageRequest(group=group_resource, topic=topic_resource, entries=[entry]),
                metadata=call_metadata(),
                timeout=10,
            )
            check_status("AckMessage", response.status)
        except (CheckFailed, grpc.RpcError) as exc:
            failures.append(str(exc))
            all_acked.set()  # no use waiting: the row has failed
            return
        finally:
            ack_slots.release()
        acked += 1
        if acked >= tally.total:
            last_ack_at = time.perf_counter()
            all_acked.set()

    async def receiver(task_group) -> None:
        while not tally.complete:
            received: list[pb.Message] = []
            call = stub.ReceiveMessage(
                request, metadata=call_metadata(), timeout=LONG_POLLING_S + 5
            )
            async for response in call:
                content = response.WhichOneof("content")
                if content == "status" and response.status.code != pb.MESSAGE_NOT_FOUND:
                    check_status("ReceiveMessage", response.status)
                elif content == "message":
                    received.append(response.message)
            tally.add([message.body for message in received])
            for message in received:
                await ack_slots.acquire()
                task_group.start_soon(ack, message)

    with anyio.move_on_after(args.receive_timeout):
        async with anyio.create_task_group() as task_group:
            for _ in range(args.receivers):
                task_group.start_soon(receiver, task_group)
            await all_acked.wait()
            task_group.cancel_scope.cancel()  # receivers left long-polling an empty topic
    if failures:
        raise CheckFailed(f"{len(failures)} acknowledgements failed, first: {failures[0]}")
    row = tally.finish(
        "grpc-receive",
        topic,
        last_ack_at or time.perf_counter(),
        consumer=f"{args.receivers} ReceiveMessage loops, one AckMessage per message",
        acknowledged=acked,
    )
    if acked < tally.received and not row["problem"]:
        row["problem"] = f"{tally.received - acked:,} received, not acknowledged"
    return row


# --- gRPC's own ceiling ----------------------------------------------------------------


class NullMessagingService(service_pb2_grpc.MessagingServiceServicer):
    """Answers every SendMessage OK at once, keeping nothing."""

    async def SendMessage(self, request: spb.SendMessageRequest, context: object) -> object:
        entries = [
            spb.SendResultEntry(
                status=pb.Status(code=pb.OK), message_id=message.system_properties.message_id
            )
            for message in request.messages
        ]
        return spb.SendMessageResponse(status=pb.Status(code=pb.OK), entries=entries)


async def serve_null(port: int) -> None:
    server = grpc.aio.server()
    service_pb2_grpc.add_MessagingServiceServicer_to_server(NullMessagingService(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    # grpc's threads at the proxy's priority: the ceiling stays one for the proxy
    priority = asyncio.create_task(GrpcThreadPriority().run())
    print("ready", flush=True)
    try:
        await server.wait_for_termination()
    finally:
        priority.cancel()


def start_null(port: int, core: int | None) -> subprocess.Popen:
    """This script serving NullMessagingService on ``port`` in a child process."""
    command = [sys.executable, __file__, "--serve-null-grpc", str(port)]
    process = subprocess.Popen(pinned(command, core), stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        raise SystemExit("the null gRPC server exited before it was ready")
    return process


# --- the run ---------------------------------------------------------------------------


async def wait_for_proxy(channel: grpc.aio.Channel, port: int, seconds: float = 30.0) -> None:
    with anyio.move_on_after(seconds):
        await channel.channel_ready()
        return
    raise SystemExit(
        f"the broker serves no gRPC on 127.0.0.1:{port} after {seconds:g} s:"
        " is the proxy_grpc plugin installed (pip install -e plugins/proxy_grpc)?"
    )


async def run_rounds(
    namesrv: str,
    grpc_port: int,
    pid: int,
    null_server: tuple[int, int] | None,
    wanted: list[str],
    args: argparse.Namespace,
) -> list[dict]:
    """Every wanted row, round after round; ``null_server``: (port, pid) of the null one."""
    measured: list[dict] = []
    null_port, null_pid = null_server or (grpc_port, pid)
    target = f"127.0.0.1:{grpc_port}"
    async with (
        Admin(namesrv) as admin,
        (
            grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(args.tls_ca))
            if args.tls_ca
            else grpc.aio.insecure_channel(target)
        ) as channel,
        grpc.aio.insecure_channel(f"127.0.0.1:{null_port}") as null_channel,
    ):
        await wait_for_proxy(channel, grpc_port)
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        null_stub = service_pb2_grpc.MessagingServiceStub(null_channel)
        for round_number in range(1, args.rounds + 1):
            rows: list[dict] = []
            for name in (row for row in SEND_ROWS if row in wanted):
                topic = f"BenchGrpcVsRemoting_{name.replace('-', '_')}_{round_number}"
                if name != NULL_ROW:
                    await admin.create_topic(topic, QUEUES)
                if name == NULL_ROW:  # nothing stored: only the answers are checked
                    meter = CpuMeter(null_pid)
                    count, acked, latencies = await grpc_send(null_stub, topic, args, meter)
                    stored = None
                else:
                    meter = CpuMeter(pid)
                    if name == "remoting-send":
                        count, acked, latencies = await remoting_send(namesrv, topic, args, meter)
                    else:
                        count, acked, latencies = await grpc_send(stub, topic, args, meter)
                    stored = (await admin.topic_stats(topic)).total_messages
                row = send_row(name, topic, count, acked, stored, latencies)
                row["seconds"] = args.duration
                row["messages_per_s"] = round(count / args.duration)
                rows.append(row | meter.result)
            receive_rows = [row for row in RECEIVE_ROWS if row in wanted]
            if receive_rows:
                topic = f"BenchGrpcVsRemoting_receive_{round_number}"
                await admin.create_topic(topic, QUEUES)
                fill_seconds = await fill(namesrv, topic, args.receive_messages)
                print(
                    f"round {round_number}: {args.receive_messages:,} messages filled"
                    f" in {fill_seconds:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
                if round_number % 2 == 0:
                    receive_rows.reverse()  # neither side always reads first
                for name in receive_rows:
                    group = f"CG-bench-{name}-{round_number}-{os.getpid()}"
                    meter = CpuMeter(pid)
                    if name == "remoting-receive":
                        row = await remoting_receive(namesrv, topic, group, args, meter)
                    else:
                        row = await grpc_receive(stub, topic, group, args, meter)
                    rows.append(row | meter.result)
            for row in rows:
                row["round"] = round_number
                print(
                    f"round {round_number} {row['row']}: {row['messages_per_s']:,} msg/s,"
                    f" broker {row.get('server_cpu_us_per_msg')} us/msg"
                    + (f"; CHECK FAILED: {row['problem']}" if row["problem"] else ""),
                    file=sys.stderr,
                    flush=True,
                )
            measured.extend(rows)
    return measured


def median(runs: list[dict], key: str) -> float | None:
    values = [run[key] for run in runs if run.get(key) is not None]
    return round(statistics.median(values), 1) if values else None


def summarise(measured: list[dict]) -> list[dict]:
    """Per row: medians over the rounds; gRPC's rows with their ratio to remoting's."""
    summary = []
    for name in ROWS:
        runs = [run for run in measured if run["row"] == name]
        if not runs:
            continue
        summary.append(
            {
                "row": name,
                "rounds": len(runs),
                "messages_per_s": round(median(runs, "messages_per_s")),
                "rates": [run["messages_per_s"] for run in runs],
                "p50_us": median(runs, "p50_us"),
                "p99_us": median(runs, "p99_us"),
                "server_cpu_us_per_msg": median(runs, "server_cpu_us_per_msg"),
                "server_cpu_pct": median(runs, "server_cpu_pct"),
                "client_cpu_us_per_msg": median(runs, "client_cpu_us_per_msg"),
                "client_cpu_pct": median(runs, "client_cpu_pct"),
                "others_cpu_pct": median(runs, "others_cpu_pct"),
                "checked": "ok" if not any(run["problem"] for run in runs) else "FAILED",
            }
        )
    by_name = {row["row"]: row for row in summary}
    for grpc_row, remoting_row in (
        (NULL_ROW, "remoting-send"),
        ("grpc-send", "remoting-send"),
        ("grpc-receive", "remoting-receive"),
    ):
        if grpc_row in by_name and remoting_row in by_name:
            ours, theirs = by_name[grpc_row], by_name[remoting_row]
            ours["rate_vs_remoting"] = round(ours["messages_per_s"] / theirs["messages_per_s"], 3)
            if ours["server_cpu_us_per_msg"] and theirs["server_cpu_us_per_msg"]:
                ours["server_cpu_vs_remoting"] = round(
                    ours["server_cpu_us_per_msg"] / theirs["server_cpu_us_per_msg"], 2
                )
    return summary


def print_table(summary: list[dict], measured: list[dict]) -> None:
    def cell(value: object) -> str:
        return "-" if value is None else f"{value:,}" if isinstance(value, int) else str(value)

    print(
        f"{'row':>16}  {'msg/s':>8}  {'vs remoting':>11}  {'p50 us':>7}  {'p99 us':>7}"
        f"  {'broker us/msg':>13}  {'vs remoting':>11}  {'broker %':>8}"
        f"  {'client us/msg':>13}  {'client %':>8}  {'others %':>8}  {'checked':>7}  rates"
    )
    for row in summary:
        print(
            f"{row['row']:>16}  {row['messages_per_s']:>8,}"
            f"  {cell(row.get('rate_vs_remoting')):>11}"
            f"  {cell(row['p50_us']):>7}  {cell(row['p99_us']):>7}"
            f"  {cell(row['server_cpu_us_per_msg']):>13}"
            f"  {cell(row.get('server_cpu_vs_remoting')):>11}  {cell(row['server_cpu_pct']):>8}"
            f"  {cell(row['client_cpu_us_per_msg']):>13}  {cell(row['client_cpu_pct']):>8}"
            f"  {cell(row['others_cpu_pct']):>8}  {row['checked']:>7}"
            f"  {', '.join(f'{rate:,}' for rate in row['rates'])}"
        )
    for run in measured:
        if run["problem"]:
            print(f"CHECK FAILED: round {run['round']} {run['row']}: {run['problem']}")
    for row in summary:
        if row["row"] == NULL_ROW:
            print(
                f"ceiling: grpc.aio against a server that answers at once:"
                f" {row['messages_per_s']:,} msg/s ({row.get('rate_vs_remoting', '-')} x"
                f" remoting-send), {row['server_cpu_us_per_msg']} us/msg in that server"
            )
        elif "rate_vs_remoting" in row:
            ratio = row["rate_vs_remoting"]
            print(
                f"verdict: {row['row']} >= {TARGET:.2f} x remoting's rate: {ratio:.3f} x,"
                f" {'met' if ratio >= TARGET else 'NOT met'};"
                f" broker CPU per message {row.get('server_cpu_vs_remoting', '-')} x remoting's"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="every row this many times")
    parser.add_argument("--duration", type=float, default=4.0, help="counted s per send row")
    parser.add_argument("--warmup", type=float, default=1.5, help="s before counting sends")
    parser.add_argument("--inflight", type=int, default=64, help="sends in flight, both sides")
    parser.add_argument(
        "--receive-messages", type=int, default=20_000, help="filled, then drained by each side"
    )
    parser.add_argument("--receivers", type=int, default=4, help="gRPC ReceiveMessage loops")
    parser.add_argument("--ack-inflight", type=int, default=64, help="gRPC acks outstanding")
    parser.add_argument("--receive-timeout", type=float, default=120.0, help="s per receive row")
    parser.add_argument("--rows", default=",".join(ROWS), help="of: " + ", ".join(ROWS))
    parser.add_argument("--server-core", type=int, default=1, help="-1: don't pin")
    parser.add_argument("--client-core", type=int, default=0, help="-1: don't pin")
    parser.add_argument("--no-uvloop", action="store_true", help="plain asyncio on both sides")
    parser.add_argument("--tls", action="store_true", help="gRPC over TLS (see above)")
    parser.add_argument("--output", default="benchmarks/results/grpc_vs_remoting.json")
    parser.add_argument("--serve-null-grpc", type=int, help=argparse.SUPPRESS)  # the child
    args = parser.parse_args()
    if args.serve_null_grpc is not None:
        asyncio.run(serve_null(args.serve_null_grpc))
        return 0
    wanted = [name.strip() for name in args.rows.split(",") if name.strip()]
    unknown = sorted(set(wanted) - set(ROWS))
    if unknown:
        parser.error(f"unknown rows {unknown}; choose from {', '.join(ROWS)}")
    server_core = None if args.server_core < 0 else args.server_core
    if args.client_core >= 0:
        os.sched_setaffinity(0, {args.client_core})
    use_uvloop = uvloop_wanted(args.no_uvloop)

    grpc_port = free_port()
    measured: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-grpc-vs-remoting-") as scratch:
        settings = f"grpcServerPort={grpc_port}\n"
        args.tls_ca = None
        if args.tls:
            settings += tls_settings(Path(scratch))
            args.tls_ca = (Path(scratch) / "ca.pem").read_bytes()
        process, namesrv, _broker = start_standalone(Path(scratch), server_core, settings=settings)
        null_port = free_port()
        null = start_null(null_port, server_core) if NULL_ROW in wanted else None
        null_server = (null_port, null.pid) if null else None
        try:

            async def run() -> None:
                measured.extend(
                    await run_rounds(namesrv, grpc_port, process.pid, null_server, wanted, args)
                )

            run_backend(run, "asyncio", use_uvloop)
        except* CheckFailed as failed:
            first: BaseException = failed
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]  # what the task groups wrapped
            raise SystemExit(f"grpc_vs_remoting: {first}") from None
        finally:
            for server in (process, null):
                if server is not None:
                    server.terminate()
                    server.wait(20)

    summary = summarise(measured)
    loop = "uvloop" if use_uvloop else "asyncio"
    print(
        f"grpc_vs_remoting: our SDK and a grpc.aio client (core {args.client_core}, {loop}) ->"
        f" rocketmq standalone with its gRPC proxy in-process (core {args.server_core}, mmap,"
        f" async flush){', gRPC over TLS' if args.tls else ''}, 1 KiB; sends:"
        f" {args.inflight} in flight, {args.duration:g} s after"
        f" {args.warmup:g} s warm-up; receives: {args.receive_messages:,} messages, batches"
        f" of {BATCH}; {args.rounds} interleaved rounds; medians"
    )
    print_table(summary, measured)
    setup = {
        "benchmark": "grpc_vs_remoting",
        "body_bytes": len(BODY),
        "inflight": args.inflight,
        "rounds": args.rounds,
        "duration_s": args.duration,
        "warmup_s": args.warmup,
        "receive_messages": args.receive_messages,
        "receivers": args.receivers,
        "ack_inflight": args.ack_inflight,
        "batch": BATCH,
        "server_core": args.server_core,
        "client_core": args.client_core,
        "event_loop": loop,
        "grpc_tls": args.tls,
        "target": f"gRPC messages_per_s >= {TARGET} x remoting's, sends and receives (issue 33)",
        "loadavg": os.getloadavg(),
        **machine(),
    }
    write_results(args.output, setup, [*summary, *measured])
    return 1 if any(run["problem"] for run in measured) else 0


def tls_settings(folder: Path) -> str:
    """broker.conf lines for TLS on (permissive) with a certificate of a CA made now;
    the CA lands in ``folder``/ca.pem."""
    import trustme  # a test dependency: only --tls needs it

    authority = trustme.CA()
    server = authority.issue_cert("127.0.0.1")
    authority.cert_pem.write_to_path(str(folder / "ca.pem"))
    server.cert_chain_pems[0].write_to_path(str(folder / "cert.pem"))
    server.private_key_pem.write_to_path(str(folder / "key.pem"))
    return (
        f"tls.server.mode=permissive\ntls.server.certPath={folder / 'cert.pem'}\n"
        f"tls.server.keyPath={folder / 'key.pem'}\n"
    )


if __name__ == "__main__":
    sys.exit(main())
