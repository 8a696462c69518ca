"""``rocketmq cluster up DIR``: a local cluster from a folder of broker configs, for
development (examples/conf/2m-2s-sync, Apache's conf/2m-2s-async, ...).

A name server runs in this process and every ``broker*.conf`` (or ``.properties``) of the
folder as a child ``rocketmq broker`` in a session of its own, so one broker can be
killed (``kill -9 PID``) to try a failover while the rest stay up. Once all are
registered, one ready line goes to stdout; SIGINT or SIGTERM stops the brokers, then
the name server, and prints ``stopped``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import Process, TaskGroup

from ..broker.config import BrokerConfig
from ..config import format_properties, parse_properties
from ..data_paths import check_writable_directory
from ..errors import ConfigError
from ..namesrv.config import NamesrvConfig
from ..namesrv.server import NameServer
from ..plugins import PluginHost
from ..protocol.constants import DEFAULT_NAMESRV_PORT
from ..remoting.transport import parse_address
from ..runtime import STOP_WITH_PARENT

PROG = "rocketmq cluster up"
CONFIG_PATTERNS = ("broker*.conf", "broker*.properties")
DATA_HOME = Path.home() / "rocketmq-py"  # <DATA_HOME>/<folder name>/<conf name> by default
STOP_GRACE = 30.0  # seconds a broker has to flush and exit before it is killed


def add_up_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", metavar="DIR", help="a folder of broker*.conf files")
    parser.add_argument(
        "--port-offset",
        type=int,
        default=0,
        metavar="N",
        help="add N to every port (the name server's 9876, each listenPort, haListenPort"
        " and haMasterAddress): a second cluster next to the first",
    )
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="keep each broker's data in DIR/<conf name> and the name server's in"
        " DIR/namesrv (default: ~/rocketmq-py/<folder name>; a conf's own"
        " storePathRootDir wins unless --data-dir is given)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long the brokers have to register (default 60)",
    )


@dataclass
class Member:
    """One broker of the layout: its file, the settings it runs with, the file it runs."""

    source: Path
    config: BrokerConfig
    effective: Path
    process: Process | None = None

    @property
    def label(self) -> str:
        return f"{self.source.name} ({self.config.broker_name}, brokerId {self.config.broker_id})"


@dataclass
class Plan:
    namesrv: NamesrvConfig
    members: list[Member]
    timeout: float


@dataclass
class Run:
    """What happened while the cluster ran."""

    stop: anyio.Event = field(default_factory=anyio.Event)
    ready: bool = False  # every broker registered
    stopping: bool = False
    failures: list[str] = field(default_factory=list)

    def fail(self, reason: str) -> None:
        self.failures.append(reason)
        self.stop.set()


def run_up(args: argparse.Namespace, host: PluginHost) -> int:
    plan = make_plan(args)
    for member in plan.members:
        member.effective.parent.mkdir(parents=True, exist_ok=True)
        member.effective.write_text(format_properties(member.config.to_properties()))
    return anyio.run(_run_cluster, plan, host)


def make_plan(args: argparse.Namespace) -> Plan:
    """Every broker's settings, checked: ConfigErrors name the file and the key."""
    folder = Path(args.dir)
    if not folder.is_dir():
        raise ConfigError(
            f"{folder}: no such folder; give a folder of broker*.conf files"
            " (examples/conf/2m-2s-async, say)"
        )
    sources = sorted({path for pattern in CONFIG_PATTERNS for path in folder.glob(pattern)})
    if not sources:
        raise ConfigError(f"{folder}: no broker*.conf or broker*.properties file in it")
    offset = args.port_offset
    data_dir = Path(args.data_dir) if args.data_dir else DATA_HOME / folder.resolve().name
    namesrv_port = DEFAULT_NAMESRV_PORT + offset
    if not 0 < namesrv_port < 65536:
        raise ConfigError(f"--port-offset {offset}: the name server's port would be {namesrv_port}")
    check_writable_directory(data_dir, "--data-dir")
    namesrv = NamesrvConfig(
        kv_config_path=str(data_dir / "namesrv" / "kvConfig.json"),
        config_store_path=str(data_dir / "namesrv" / "namesrv.properties"),
        bind_address="0.0.0.0",
        listen_port=namesrv_port,
    )
    members = [
        Member(
            source,
            _broker_config(source, args, data_dir, namesrv_port),
            effective=data_dir / "conf" / f"{source.stem}.conf",  # what the broker runs
        )
        for source in sources
    ]
    members.sort(key=lambda member: (member.config.broker_name, member.config.broker_id))
    _check_distinct(members, namesrv_port)
    return Plan(namesrv, members, args.timeout)


def _broker_config(
    source: Path, args: argparse.Namespace, data_dir: Path, namesrv_port: int
) -> BrokerConfig:
    config = BrokerConfig.load(source)
    try:
        keys = parse_properties(source.read_text(encoding="utf-8"))
    except OSError as exc:  # load read it a moment ago
        raise ConfigError(f"cannot read {source}: {exc.strerror}") from None
    offset = args.port_offset
    config.namesrv_addr = f"127.0.0.1:{namesrv_port}"  # this cluster's own name server
    if args.data_dir or "storePathRootDir" not in keys:
        config.store_path_root_dir = str(data_dir / source.stem)
    if offset:
        config.listen_port += offset
        if config.ha_listen_port:
            config.ha_listen_port += offset
        if config.ha_master_address:
            host, port = parse_address(config.ha_master_address)
            config.ha_master_address = f"{host}:{port + offset}"
    if not 2 < config.listen_port < 65535:
        raise ConfigError(
            f"{source}: listenPort {config.listen_port} (with --port-offset {offset})"
            " is outside 3-65534; choose another offset"
        )
    try:
        config.validate()
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return config


def _ports(config: BrokerConfig) -> set[int]:
    # the fast (VIP) port, the remoting port and the HA port
    ha = config.ha_listen_port or config.listen_port + 1
    return {config.listen_port - 2, config.listen_port, ha}


def _check_distinct(members: list[Member], namesrv_port: int) -> None:
    """Two brokers of one layout on one machine may share neither identity nor ports."""
    seen: dict[tuple[str, int], Path] = {}
    used: dict[int, str] = {namesrv_port: "the name server"}
    for member in members:
        config = member.config
        identity = (config.broker_name, config.broker_id)
        if identity in seen:
            raise ConfigError(
                f"{member.source} and {seen[identity]} are both brokerName={identity[0]}"
                f" brokerId={identity[1]}: give one of them another brokerId"
            )
        seen[identity] = member.source
        for port in sorted(_ports(config)):
            if port in used:
                raise ConfigError(
                    f"{member.source}: listenPort={config.listen_port} needs port {port},"
                    f" which {used[port]} uses; space the listenPorts 4 or more apart"
                )
            used[port] = str(member.source)


async def _run_cluster(plan: Plan, host: PluginHost) -> int:
    run = Run()
    namesrv = NameServer(plan.namesrv, host=host)
    async with anyio.create_task_group() as group:
        await group.start(_watch_signals, run)
        namesrv_address = await group.start(namesrv.run)
        try:
            masters = [member for member in plan.members if member.config.broker_id == 0]
            slaves = [member for member in plan.members if member.config.broker_id != 0]
            with anyio.move_on_after(plan.timeout):
                # masters first: a slave learns its master's HA address when it registers
                for wave in (masters, slaves):
                    for member in wave:
                        await _start_broker(member, run, group)
                    await _until_registered(namesrv, wave, run)
            if not run.stop.is_set():
                missing = _unregistered(namesrv, plan.members)
                if missing:
                    run.fail(
                        f"not registered within {plan.timeout:.0f} s: "
                        + ", ".join(member.label for member in missing)
                    )
                else:
                    run.ready = True
                    port = namesrv_address.rsplit(":", 1)[1]
                    print(f"{PROG}: ready: {_ready_text(port, plan)}", flush=True)
            await run.stop.wait()
        finally:
            with anyio.CancelScope(shield=True):
                run.stopping = True
                await _stop_brokers(plan.members)
                await namesrv.stop()
            group.cancel_scope.cancel()
    for failure in run.failures:
        print(f"{PROG}: error: {failure}", file=sys.stderr)
    print(f"{PROG}: stopped", flush=True)
    return 1 if run.failures else 0


async def _watch_signals(run: Run, *, task_status=anyio.TASK_STATUS_IGNORED) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for _received in signals:
            run.stop.set()


async def _start_broker(member: Member, run: Run, group: TaskGroup) -> None:
    member.process = await anyio.open_process(
        [sys.executable, "-m", "rocketmq_core.cli", "broker", "-c", member.effective],
        stdin=subprocess.DEVNULL,
        stdout=sys.stderr,  # stdout is for this command's own lines
        stderr=None,  # the brokers' logs show where this command's do
        start_new_session=True,  # a terminal's Ctrl-C reaches this process only
        # and when this process dies, even by SIGKILL, each broker stops (SIGTERM)
        env={**os.environ, STOP_WITH_PARENT: str(os.getpid())},
    )
    group.start_soon(_watch_broker, member, run)


async def _watch_broker(member: Member, run: Run) -> None:
    assert member.process is not None
    status = await member.process.wait()
    if run.stopping:
        return
    how = f"was killed by {signal.Signals(-status).name}" if status < 0 else f"exited {status}"
    if not run.ready:
        run.fail(f"{member.label} {how} while starting; its log is above")
    else:  # a broker killed on purpose (to try a failover, say): the others run on
        print(f"{PROG}: {member.label} {how}; the others run on", file=sys.stderr, flush=True)


async def _until_registered(namesrv: NameServer, members: list[Member], run: Run) -> None:
    while _unregistered(namesrv, members) and not run.stop.is_set():
        await anyio.sleep(0.1)


def _unregistered(namesrv: NameServer, members: list[Member]) -> list[Member]:
    registered = {
        (name, broker_id)
        for name, data in namesrv.routes.cluster_info().broker_addr_table.items()
        for broker_id in data.broker_addrs
    }
    return [m for m in members if (m.config.broker_name, m.config.broker_id) not in registered]


def _ready_text(namesrv_port: str, plan: Plan) -> str:
    parts = [f"name server 127.0.0.1:{namesrv_port}"]
    for member in plan.members:
        config = member.config
        pid = member.process.pid if member.process else "-"
        parts.append(
            f"{config.broker_name}/{config.broker_id} {config.broker_addr}"
            f" {config.broker_role} pid {pid}"
        )
    return "; ".join(parts)


async def _stop_brokers(members: list[Member]) -> None:
    """SIGTERM to every broker still running; those not gone after STOP_GRACE are killed."""
    running = [m.process for m in members if m.process and m.process.returncode is None]
    for process in running:
        process.terminate()
    async with anyio.create_task_group() as group:
        for process in running:
            group.start_soon(_reap, process)


async def _reap(process: Process) -> None:
    with anyio.move_on_after(STOP_GRACE):
        await process.wait()
    if process.returncode is None:
        process.kill()
    await process.aclose()
