"""A SYNC_MASTER and its SLAVE killed with SIGKILL again and again while our producer
sends: no message answered SEND_OK is lost (issue 29).

A name server, the master and the slave run as real processes (``rocketmq namesrv``,
``rocketmq broker -c FILE``) on loopback with mmap stores. Several sends stay in flight
the whole time; each cycle kills the master or the slave (in turn) at a seeded random
moment and restarts it on the same directory and ports. At the end every SEND_OK message
must be on both brokers, read queue by queue from offset 0 on each broker's own address,
and the slave's CommitLog must be the master's byte for byte.

Cycles: 2 by default, ``soak_cycles`` times more under ``tox -e soak``. The seed is
printed (shown on failure); ``ROCKETMQ_HA_CRASH_SEED`` replays one.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from rocketmq_core.client.admin import TOOLS_GROUP, Admin
from rocketmq_core.client.message import Message, ReceivedMessage, SendStatus
from rocketmq_core.client.producer import Producer
from rocketmq_core.errors import RocketMQError
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.headers import PullMessageRequestHeader, PullMessageResponseHeader
from rocketmq_core.protocol.message import iter_records
from rocketmq_core.testing.store_crash import soak_cycles
from tests.processes import HAGroup, running_ha_group

CYCLES = soak_cycles(2)  # `tox -e soak`: 20
CLUSTER = "HaCrashCluster"
BROKER = "broker-a"
TOPIC = "HaCrash"
QUEUES = 4
SENDERS = 8  # sends in flight at once
LONGEST_KILL_DELAY = 0.6  # s after a cycle's first SEND_OK
RECOVERY_LIMIT = 60.0  # s for a restarted broker to be replicating again (a hang guard only)
END = "commitLogMaxOffset"  # in GET_BROKER_RUNTIME_INFO's table
FLAG_SUBSCRIPTION = 0x4  # PULL_MESSAGE sysFlag: the request carries its subscription


Queue = list[tuple[int, str, bytes]]  # (queue offset, msg id, body) of each message


Group = HAGroup


@pytest.fixture
def group(tmp_path: Path) -> Iterator[Group]:
    with running_ha_group(tmp_path, CLUSTER) as running:
        yield running


@dataclass
class Ledger:
    """What the producer was told, send by send."""

    ok: dict[str, bytes] = field(default_factory=dict)  # msg id -> body, answered SEND_OK
    attempted: set[bytes] = field(default_factory=set)  # every body ever sent
    answers: Counter[str] = field(default_factory=Counter)  # status or error name -> count


async def keep_sending(producer: Producer, ledger: Ledger, sender: int, stop: anyio.Event) -> None:
    number = 0
    while not stop.is_set():
        body = f"sender-{sender}-{number}".encode()
        number += 1
        ledger.attempted.add(body)
        try:
            result = await producer.send(Message(TOPIC, body))
        except (RocketMQError, OSError) as exc:  # a broker killed or not back yet
            ledger.answers[type(exc).__name__] += 1
            await anyio.sleep(0.05)  # not to spin while the master is down
            continue
        ledger.answers[result.status.value] += 1
        if result.status is SendStatus.SEND_OK:
            ledger.ok[result.msg_id] = body
        else:
            await anyio.sleep(0.01)  # stored, not replicated: no flood while the slave is away


async def until_send_ok(ledger: Ledger) -> bool:
    """Until one more send than now is answered SEND_OK (the master stores and the slave
    acks again); False if none was for RECOVERY_LIMIT."""
    before = len(ledger.ok)
    with anyio.move_on_after(RECOVERY_LIMIT):
        while len(ledger.ok) == before:
            await anyio.sleep(0.02)
        return True
    return False


async def kill_and_restart(group: Group, ledger: Ledger, rng: random.Random) -> str:
    """CYCLES times: kill the master or the slave (in turn) at a random moment, start it
    again, wait for a SEND_OK. What went wrong, if anything ("": nothing)."""
    if not await until_send_ok(ledger):
        return f"no SEND_OK before the first kill for {RECOVERY_LIMIT} s"
    started = time.monotonic()
    for cycle in range(CYCLES):
        victim_name = "master" if cycle % 2 == 0 else "slave"
        victim = group.master if victim_name == "master" else group.slave
        delay = rng.uniform(0, LONGEST_KILL_DELAY)
        await anyio.sleep(delay)
        ok_before = len(ledger.ok)
        victim.kill()
        print(
            f"{time.monotonic() - started:7.2f} s cycle {cycle}: {victim_name} killed"
            f" {delay:.3f} s in, {ok_before} SEND_OK"
        )
        try:
            await anyio.to_thread.run_sync(victim.start)
        except pytest.fail.Exception as exc:
            return f"cycle {cycle}: {exc}"
        if not await until_send_ok(ledger):
            return f"cycle {cycle}: no SEND_OK {RECOVERY_LIMIT} s after the {victim_name} restarted"
    return ""


async def crash_cycles(group: Group, rng: random.Random) -> tuple[Ledger, str]:
    """SENDERS sends in flight all along while kill_and_restart runs; the ledger and what
    went wrong ("": nothing)."""
    ledger = Ledger()
    stop = anyio.Event()
    async with (
        Producer("PID-HaCrash", group.namesrv.address, retry_times=1) as producer,
        anyio.create_task_group() as senders,
    ):
        for sender in range(SENDERS):
            senders.start_soon(keep_sending, producer, ledger, sender, stop)
        try:
            stuck = await kill_and_restart(group, ledger, rng)
        finally:
            stop.set()
    print(f"answers: {dict(ledger.answers)}")
    return ledger, stuck


async def until_slave_caught_up(admin: Admin, group: Group) -> tuple[str, str]:
    """The master's and the slave's CommitLog ends once they are equal, or as they were
    after RECOVERY_LIMIT."""
    master_end = slave_end = "unknown"
    with anyio.move_on_after(RECOVERY_LIMIT):
        while master_end == "unknown" or master_end != slave_end:
            master_end = (await admin.broker_runtime_info(group.master.address))[END]
            slave_end = (await admin.broker_runtime_info(group.slave.address))[END]
            await anyio.sleep(0.05)
    return master_end, slave_end


async def read_queue(admin: Admin, address: str, queue_id: int) -> Queue:
    """(queue offset, msg id, body) of every message of one queue, pulled from offset 0
    from the broker at ``address`` itself."""
    found: Queue = []
    offset = 0
    while True:
        header = PullMessageRequestHeader(
            consumer_group=TOOLS_GROUP,
            topic=TOPIC,
            queue_id=queue_id,
            queue_offset=offset,
            max_msg_nums=32,
            sys_flag=FLAG_SUBSCRIPTION,
            commit_offset=0,
            suspend_timeout_millis=0,
            sub_version=0,
            subscription="*",
        )
        response = await admin.instance.invoke(
            address,
            RequestCode.PULL_MESSAGE,
            header,
            accept=(ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND),
        )
        if response.code != ResponseCode.SUCCESS:
            return found
        for stored in iter_records(response.body or b""):
            message = ReceivedMessage.of(stored, BROKER)
            found.append((message.queue_offset, message.msg_id, message.body))
        offset = PullMessageResponseHeader.from_ext_fields(response.ext_fields).next_begin_offset


def first_difference(one: Queue, other: Queue) -> int:
    """The first offset where two reads of a queue differ (the shorter's length if it is
    the other's start)."""
    for offset, (mine, theirs) in enumerate(zip(one, other, strict=False)):
        if mine != theirs:
            return offset
    return min(len(one), len(other))


def commit_log(store: Path, end: int) -> tuple[int, bytes]:
    """(first offset, bytes up to ``end``) of the CommitLog files under ``store``."""
    files = sorted((store / "commitlog").iterdir(), key=lambda path: int(path.name))
    first = int(files[0].name)
    data = bytearray()
    for path in files:
        start = int(path.name)
        if start >= end:
            break
        with path.open("rb") as file:
            data += file.read(end - start)  # the files follow one another: its part before end
    return first, bytes(data)


@pytest.mark.timeout(120 + 30 * CYCLES)
def test_no_send_ok_message_is_lost_when_master_or_slave_are_killed(group: Group) -> None:
    seed = int(os.environ.get("ROCKETMQ_HA_CRASH_SEED") or random.randrange(2**32))
    backend = random.Random(seed).choice(["asyncio", "trio"])
    print(f"ROCKETMQ_HA_CRASH_SEED={seed} ({CYCLES} cycles on {backend})")
    rng = random.Random(seed)

    async def create_topic() -> None:
        async with Admin(group.namesrv.address) as admin:
            await admin.create_topic(TOPIC, QUEUES, cluster=CLUSTER)

    anyio.run(create_topic, backend=backend)
    ledger, stuck = anyio.run(crash_cycles, group, rng, backend=backend)
    if stuck:
        pytest.fail(f"seed {seed}: {stuck} ({dict(ledger.answers)})\n{group.logs()}")

    async def read_back() -> tuple[tuple[str, str], dict[str, list[Queue]]]:
        async with Admin(group.namesrv.address) as admin:
            ends = await until_slave_caught_up(admin, group)
            read = {
                name: [await read_queue(admin, server.address, q) for q in range(QUEUES)]
                for name, server in (("master", group.master), ("slave", group.slave))
            }
        return ends, read

    (master_end, slave_end), read = anyio.run(read_back, backend=backend)
    if master_end != slave_end:
        pytest.fail(f"seed {seed}: the slave is at {slave_end}, the master at {master_end}")
    end = int(master_end)
    context = f"seed {seed}, {CYCLES} cycles"
    assert ledger.ok, f"{context}: nothing was answered SEND_OK ({ledger.answers})"
    for name, queues in read.items():
        held = {msg_id: body for queue in queues for _offset, msg_id, body in queue}
        lost = {msg_id: body for msg_id, body in ledger.ok.items() if held.get(msg_id) != body}
        assert not lost, f"{context}: {len(lost)} of {len(ledger.ok)} SEND_OK not on the {name}"
        invented = set(held.values()) - ledger.attempted
        assert not invented, f"{context}: the {name} holds bodies never sent: {invented}"
        for queue_id, queue in enumerate(queues):
            offsets = [offset for offset, _msg_id, _body in queue]
            assert offsets == list(range(len(queue))), f"{context}: {name} queue {queue_id}"
    for queue_id in range(QUEUES):
        on_master, on_slave = read["master"][queue_id], read["slave"][queue_id]
        assert on_master == on_slave, (
            f"{context}: queue {queue_id} holds {len(on_master)} messages on the master,"
            f" {len(on_slave)} on the slave; they differ from offset"
            f" {first_difference(on_master, on_slave)}"
        )

    slave_first, slave_log = commit_log(group.slave.home / "store", end)
    master_first, master_log = commit_log(group.master.home / "store", end)
    assert len(slave_log) == end - slave_first, f"{context}: slave CommitLog files short"
    assert slave_log == master_log[slave_first - master_first :], (
        f"{context}: the slave's CommitLog differs from the master's"
    )
