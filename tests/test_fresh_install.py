"""A fresh install works: the README's first command in a new virtual environment, then a
standalone broker from that environment sends and receives messages.

The test runs on a copy of the checkout without what a clone lacks (build output, egg-info,
the compiled kernel), so the shared checkout is left as it is and nothing stale is reused.
pip's cache is used as it is by anyone: after tox's own install, downloads and pyspark's
built wheel come from it.

The install takes ~2 minutes of one core, mostly pip building each editable project in an
isolated environment. So it starts when the test is collected (``tests/conftest.py``), at
a low CPU priority beside the rest of the suite, and the test waits for it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rocketmq_core.plugins import BUILTIN_PLUGINS

REPO = Path(__file__).resolve().parents[1]
NOT_IN_A_CLONE = shutil.ignore_patterns(
    ".git",
    ".tox",
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    "*.so",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    ".benchmarks",
)
PIP_TIMEOUT = 1200  # seconds: a cold cache downloads pyspark (~450 MB) and builds its wheel
READY = re.compile(r"rocketmq standalone ready: name server (\S+), broker (\S+)")
BODY = "fresh install"


def user_environment() -> dict[str, str]:
    """The environment of the user's shell without the test run's Python settings; HOME
    stays, and with it pip's configuration and cache."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PYTHON") and key not in ("VIRTUAL_ENV", "PIP_USER")
    }
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    # no bytecode for the ~1 GB installed (pyspark, pyarrow): ~20 s less; imports still work
    env["PIP_NO_COMPILE"] = "1"
    return env


def tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])


def run(command: list[str], *, timeout: float, **options) -> subprocess.CompletedProcess:
    return subprocess.run(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        **options,
    )


def plugin_folders() -> set[str]:
    return {
        path.name for path in (REPO / "plugins").iterdir() if (path / "pyproject.toml").exists()
    }


class BackgroundInstall:
    """The README's first command in a new venv, in a clone of the checkout, run by a
    process of its own from the moment the test is collected."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.scripts = workspace / "venv" / "bin"
        self.log = workspace / "install.log"
        self.env = user_environment()
        self.started = time.monotonic()
        checkout = workspace / "rocketmq-py"
        shutil.copytree(REPO, checkout, ignore=NOT_IN_A_CLONE)
        steps = (
            f'"{sys.executable}" -m venv "{workspace / "venv"}"'
            f' && "{self.scripts / "python"}" -m pip install -r requirements.txt'
        )
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                ["sh", "-c", steps],
                cwd=checkout,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=lambda: os.nice(10),  # the suite's own tests come first
                start_new_session=True,  # so that discard() ends pip too, not only sh
            )

    def wait(self) -> Path:
        """The venv's scripts folder, once pip succeeded."""
        try:
            self.process.wait(timeout=max(1.0, PIP_TIMEOUT - (time.monotonic() - self.started)))
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        assert self.process.returncode == 0, (
            f"python -m venv, then pip install -r requirements.txt, failed"
            f" (exit {self.process.returncode}):\n{tail(self.log.read_text())}"
        )
        return self.scripts

    def discard(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        shutil.rmtree(self.workspace, ignore_errors=True)


@contextmanager
def standalone(rocketmq: str, home: Path, env: dict[str, str]) -> Iterator[str]:
    """``rocketmq standalone`` on free ports until its ready line: the name server's
    address. On leaving, SIGTERM, and it must exit 0 without a traceback."""
    conf = home / "broker.conf"  # small files, as in the other CLI tests
    conf.write_text(
        "listenPort=0\nmappedFileSizeCommitLog=4194304\nmaxHashSlotNum=1000\nmaxIndexNum=4000\n"
    )
    log = home / "standalone.log"
    with log.open("w") as log_file:
        server = subprocess.Popen(
            [rocketmq, "standalone", "-c", str(conf), "--namesrv-listen", "127.0.0.1:0"],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=home,
            env=env,
        )
    try:
        yield wait_for_ready(server, log, timeout=60).group(1)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        finally:
            server.kill()
    assert server.returncode == 0, tail(log.read_text())
    assert "Traceback" not in log.read_text()


def wait_for_ready(process: subprocess.Popen, log: Path, timeout: float) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = READY.search(log.read_text())
        if match:
            return match
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    process.wait()
    raise AssertionError(f"rocketmq standalone never said it was ready:\n{tail(log.read_text())}")


@pytest.mark.timeout(PIP_TIMEOUT + 300)
def test_the_readme_install_in_a_new_venv_lists_every_plugin_and_serves(tmp_path, fresh_install):
    waited = time.monotonic()
    scripts = fresh_install.wait()
    env = fresh_install.env
    installed = time.monotonic()
    rocketmq = str(scripts / "rocketmq")
    home = tmp_path / "home"  # the servers' data and the CLI's files go here
    home.mkdir()
    env = {**env, "HOME": str(home), "PATH": os.pathsep.join([str(scripts), env["PATH"]])}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [rocketmq, *args], capture_output=True, text=True, timeout=120, cwd=home, env=env
        )

    listing = cli("plugins", "list", "--json")
    assert listing.returncode == 0, listing.stdout + listing.stderr
    status = {
        plugin["name"]: (plugin["status"], plugin["error"]) for plugin in json.loads(listing.stdout)
    }
    expected = {"builtin." + module.rsplit(".", 1)[-1] for module in BUILTIN_PLUGINS}
    expected |= plugin_folders()
    assert expected <= status.keys(), f"not installed: {sorted(expected - status.keys())}"
    assert {name: state for name, state in status.items() if state[0] != "loaded"} == {}

    with standalone(rocketmq, home, env) as namesrv:
        topic = ("-n", namesrv, "-t", "FreshInstall")
        sent = cli("send", *topic, "--body", BODY, "--count", "100", "--json")
        assert sent.returncode == 0, tail(sent.stdout + sent.stderr)
        consumed = cli(
            "consume", *topic, "--group", "fresh-install", "--from", "first",
            "--count", "100", "--idle", "30", "--json",
        )  # fmt: skip
        assert consumed.returncode == 0, tail(consumed.stdout + consumed.stderr)
        # one JSON object per message; any other line (a summary, a progress bar) is not one
        lines = consumed.stdout.splitlines()
        documents = [json.loads(line) for line in lines if line.startswith("{")]
        messages = [doc for doc in documents if isinstance(doc, dict) and doc.get("body") == BODY]
        assert len(messages) == 100, tail(consumed.stdout + consumed.stderr)
        assert len({message["msg_id"] for message in messages}) == 100
    assert (home / "rocketmq-py" / "store").is_dir()  # the standalone's data went under HOME
    print(
        f"fresh install: {installed - fresh_install.started:.0f} s to install in the background,"
        f" {installed - waited:.0f} s of it waited for, {time.monotonic() - waited:.0f} s here"
    )
