"""Real server processes and volumes for tests: ``rocketmq standalone`` in a process of
its own (SIGTERM and kill -9 able, restartable on the same files), and a small tmpfs a
test can fill (root only; where it cannot be mounted, the test skips locally and fails
under CI: tests/missing.py)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocketmq_core.config import format_properties
from rocketmq_core.testing.broker import broker_config
from rocketmq_core.testing.ports import free_port
from tests.missing import missing

READY = re.compile(rb"ready: name server (\S+), broker (\S+) ")


@contextmanager
def tmpfs(point: Path, size_mb: int) -> Iterator[Path]:
    """A tmpfs of ``size_mb`` mounted at ``point`` (made here), unmounted on leaving."""
    point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        missing(f"cannot mount a {size_mb} MB tmpfs (needs root): {mounted.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


class StandaloneProcess:
    """``rocketmq standalone`` with ``broker.conf`` lines, HOME in ``home``; each start
    waits for a new ready line and records the addresses it names."""

    def __init__(
        self,
        home: Path,
        conf: str,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        self.conf = home / "broker.conf"
        self.conf.write_text(conf)
        self.log = home / "standalone.log"
        self.env = {**os.environ, "HOME": str(home)}  # the name server's files go there
        self.preexec_fn = preexec_fn
        self.process: subprocess.Popen | None = None
        self.namesrv = self.broker = ""
        self.started = 0  # ready lines in the log: one per start

    def start(self, timeout: float = 15.0) -> None:
        command = ["standalone", "-c", str(self.conf), "--namesrv-listen", "127.0.0.1:0"]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "rocketmq_core.cli", *command],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                preexec_fn=self.preexec_fn,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready = READY.findall(self.log.read_bytes())
            if len(ready) > self.started:
                self.namesrv, self.broker = (part.decode() for part in ready[-1])
                self.started = len(ready)
                return
            if self.process.poll() is not None:
                pytest.fail(f"the broker exited {self.process.returncode}:\n{self.output()}")
            time.sleep(0.05)
        pytest.fail(f"the broker did not start in {timeout} s:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def descriptors(self) -> int:
        assert self.process is not None
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def stop(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=15)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


NAMESRV_READY = re.compile(rb"The Name Server boot success\. .* listening on (\S+)")
BROKER_READY = re.compile(rb"The broker\[[^,]+, (\S+)\] boot success")


class ServerProcess:
    """One ``rocketmq`` server command, restartable on the same files and ports; its
    output goes to one log and each start waits for a boot line more than before."""

    def __init__(self, home: Path, command: list[str], ready: re.Pattern[bytes]) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.home = home
        self.command = command
        self.ready = ready
        self.log = home / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.address = ""
        self.starts = 0

    def start(self, timeout: float = 30.0) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "rocketmq_core.cli", *self.command],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "HOME": str(self.home)},  # the name server's files go there
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            booted = self.ready.findall(self.log.read_bytes())
            if len(booted) > self.starts:
                self.starts = len(booted)
                self.address = booted[-1].decode()
                return
            if self.process.poll() is not None:
                pytest.fail(f"{self.log} exited {self.process.returncode}:\n{self.output()}")
            time.sleep(0.05)
        pytest.fail(f"{self.log}: not started in {timeout} s:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing flushed, no goodbye to anyone."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


def listen_port_with_free_neighbours() -> int:
    """A free listenPort whose VIP port (- 2) and HA port (+ 1) are free too: a restart
    binds all three again, and a slave asks its master's listenPort - 2 for topics.
    Outside the ephemeral range: a port the kernel gave out there could be taken by any
    outgoing connection between a kill -9 and the restart (rocketmq_core.testing.ports)."""
    return free_port(neighbours=(-2, 1))


def broker_process(
    home: Path,
    namesrv: str,
    role: str,
    broker_id: int,
    *,
    cluster: str,
    broker_name: str = "broker-a",
    listen_port: int | None = None,
) -> ServerProcess:
    """A broker of a master/slave group, started: ``listen_port`` None picks one whose
    VIP and HA ports are free too, so that restarts bind the same three."""
    config = broker_config(
        home / "store",
        namesrv,
        listen_port=listen_port_with_free_neighbours() if listen_port is None else listen_port,
        broker_name=broker_name,
        broker_cluster_name=cluster,
        broker_role=role,
        # the slave copies the master's topics soon after it starts, then twice a second
        slave_sync_delay=100,
        slave_sync_interval=500,
    )
    config.broker_id = broker_id
    home.mkdir(parents=True, exist_ok=True)
    conf = home / "broker.conf"
    conf.write_text(format_properties(config.to_properties()))
    server = ServerProcess(home, ["broker", "-c", str(conf)], BROKER_READY)
    server.start()
    return server


@dataclass
class HAGroup:
    """A name server, a SYNC_MASTER and its SLAVE, each a process."""

    namesrv: ServerProcess
    master: ServerProcess
    slave: ServerProcess

    def logs(self) -> str:
        return "\n".join(
            f"--- {name} ({server.log}):\n{server.output()}"
            for name, server in (("master", self.master), ("slave", self.slave))
        )


@contextmanager
def running_ha_group(directory: Path, cluster: str) -> Iterator[HAGroup]:
    """Start the three under ``directory``; stop them (those started) on leaving."""
    servers: list[ServerProcess] = []
    try:
        namesrv = ServerProcess(
            directory / "namesrv", ["namesrv", "--listen", "127.0.0.1:0"], NAMESRV_READY
        )
        servers.append(namesrv)
        namesrv.start()
        master = broker_process(
            directory / "master", namesrv.address, "SYNC_MASTER", 0, cluster=cluster
        )
        servers.append(master)
        slave = broker_process(directory / "slave", namesrv.address, "SLAVE", 1, cluster=cluster)
        servers.append(slave)
        yield HAGroup(namesrv, master, slave)
    finally:
        for server in reversed(servers):
            server.stop()
