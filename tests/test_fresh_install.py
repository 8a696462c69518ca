"""A fresh install works: the README's first command in a new virtual environment, then a
standalone broker from that environment sends and receives messages.

The test runs on a copy of the checkout without what a clone lacks (build output, egg-info,
the compiled kernel), so the shared checkout is left as it is and nothing stale is reused.
pip's cache is used as it is by anyone: after tox's own install, downloads and pyspark's
built wheel come from it.
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


def install_like_the_readme(tmp_path: Path, env: dict[str, str]) -> Path:
    """A new venv, then the README's first command in a clone of the checkout: the
    venv's scripts folder."""
    checkout = tmp_path / "rocketmq-py"
    shutil.copytree(REPO, checkout, ignore=NOT_IN_A_CLONE)
    venv = tmp_path / "venv"
    made = run([sys.executable, "-m", "venv", str(venv)], timeout=120, env=env)
    assert made.returncode == 0, tail(made.stdout)
    install = run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-r", "requirements.txt"],
        timeout=PIP_TIMEOUT,
        cwd=checkout,
        env=env,
    )
    assert install.returncode == 0, (
        f"pip install -r requirements.txt failed:\n{tail(install.stdout)}"
    )
    return venv / "bin"


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
def test_the_readme_install_in_a_new_venv_lists_every_plugin_and_serves(tmp_path):
    started = time.monotonic()
    env = user_environment()
    scripts = install_like_the_readme(tmp_path, env)
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
        f"fresh install: {installed - started:.0f} s to install,"
        f" {time.monotonic() - started:.0f} s in all"
    )
