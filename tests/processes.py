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
from pathlib import Path

import pytest

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
