"""``rocketmq broker``, ``standalone`` and ``namesrv`` refuse a bad setup in one line.

Each case runs the real command and expects what a person can act on: exit status 2, one
line on stderr naming the path or key (and the fix), no traceback. The stores, sockets and
files are real. Most cases run ``rocketmq_core.cli.main`` in this process (a child process
costs ~1 s of imports); the cases that read HOME (the standalone data directory, the default
store) and the clean stops run the command in a child process, end to end.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocketmq_core.cli import main

STORES = ["mmap", "rocksdb"]
BROKER_COMMAND = [sys.executable, "-m", "rocketmq_core.cli", "broker"]


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


def rocketmq_in_child(*args: str, home: Path, timeout: float = 60) -> Result:
    """``rocketmq ARGS`` as a user runs it: a process of its own, with ``HOME`` set."""
    done = subprocess.run(
        [sys.executable, "-m", "rocketmq_core.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "HOME": str(home)},
    )
    return Result(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def rocketmq(capsys, caplog):
    """``rocketmq ARGS`` in this process, through ``cli.main``: what a user would see. On
    stderr a server also logs (INFO and up, one line per record), so the records caught
    count as stderr lines; an exception escaping ``main`` fails the test, as a traceback
    would. HOME is read when the modules are imported, so a case whose outcome depends on
    HOME uses ``rocketmq_in_child``. Only records of the thread that runs the command
    count: a broker another test left running in this process (in a thread of its own)
    logs what is not this command's (a disk over diskMaxUsedSpaceRatio on a fuller
    machine, say)."""
    caplog.set_level(logging.INFO)

    def invoke(*args: str) -> Result:
        capsys.readouterr()
        caplog.clear()
        command_thread = threading.get_ident()
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse's usage errors
            code = exit_.code
        out, err = capsys.readouterr()
        logged = "".join(
            f"{r.levelname} {r.name}: {r.getMessage()}\n"
            for r in caplog.records
            if r.thread == command_thread
        )
        return Result(code, out, err + logged)

    return invoke


def assert_one_line_error(result: Result, *needles: str) -> str:
    err = result.stderr
    assert result.returncode == 2, err
    assert "Traceback" not in err and "ExceptionGroup" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err
    return err


def server_args(command: str, conf: Path, *more: str) -> list[str]:
    """The command with its config file, listening on free ports where it can."""
    args = [command, "-c", str(conf), *more]
    if command == "standalone":
        args += ["--namesrv-listen", "127.0.0.1:0"]
    if command == "namesrv" and "--listen" not in more:
        args += ["--listen", "127.0.0.1:0"]
    return args


def run_server(rocketmq, command: str, conf: Path, *more: str, home: Path) -> Result:
    """A server command that gets past its config: ``standalone`` then checks its data
    directory under HOME, so it runs in a child process with ``home``; the rest in-process."""
    args = server_args(command, conf, *more)
    if command == "standalone":
        return rocketmq_in_child(*args, home=home)
    return rocketmq(*args)


def broker_conf(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "broker.conf"
    path.write_text("listenPort=0\n" + "".join(line + "\n" for line in lines))
    return path


def namesrv_conf(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "namesrv.conf"
    path.write_text(
        f"configStorePath={tmp_path / 'ns.properties'}\n" + "".join(line + "\n" for line in lines)
    )
    return path


@pytest.fixture
def read_only_dir(tmp_path):
    """A directory nobody may create files in: mode 0555, and immutable when the tests
    run as root (root ignores modes, not the immutable attribute)."""
    directory = tmp_path / "read-only"
    directory.mkdir()
    directory.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    immutable = os.geteuid() == 0
    if immutable:
        subprocess.run(["chattr", "+i", str(directory)], check=True)
    try:
        probe = directory / "probe"
        with pytest.raises(PermissionError):
            probe.mkdir()  # the test would prove nothing on a writable directory
        yield directory
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(directory)], check=True)
        directory.chmod(0o755)


@pytest.fixture
def regular_file(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("not a directory\n")
    return path


# --- the store directory -------------------------------------------------------------------


@pytest.mark.parametrize("command", ["broker", "standalone"])
@pytest.mark.parametrize("store", STORES)
def test_a_read_only_store_directory_is_one_line(tmp_path, read_only_dir, rocketmq, command, store):
    root = read_only_dir / "store"
    conf = broker_conf(tmp_path, f"storePathRootDir={root}")
    result = run_server(rocketmq, command, conf, "--store", store, home=tmp_path)
    assert_one_line_error(result, "storePathRootDir", str(root), "not writable", "chmod")
    assert not root.exists()


@pytest.mark.parametrize("command", ["broker", "standalone"])
def test_a_store_path_through_a_file_is_one_line(tmp_path, regular_file, rocketmq, command):
    root = regular_file / "store"
    conf = broker_conf(tmp_path, f"storePathRootDir={root}")
    result = run_server(rocketmq, command, conf, home=tmp_path)
    assert_one_line_error(result, "storePathRootDir", str(root), f"{regular_file} is a file")


@pytest.mark.parametrize("command", ["broker", "standalone"])
def test_a_store_path_that_is_a_file_is_one_line(tmp_path, regular_file, rocketmq, command):
    conf = broker_conf(tmp_path, f"storePathRootDir={regular_file}")
    result = run_server(rocketmq, command, conf, home=tmp_path)
    assert_one_line_error(result, f"storePathRootDir {regular_file} is a file")


@pytest.mark.parametrize("store", STORES)
def test_store_files_left_unwritable_are_named(tmp_path, rocketmq, store):
    """A store an earlier run (another user, say) left with a file this user cannot write."""
    root = tmp_path / "store"
    conf = broker_conf(tmp_path, f"storePathRootDir={root}", "mappedFileSizeCommitLog=4194304")
    first = Broker(tmp_path, conf, store)
    first.stop(signal.SIGTERM)
    victim = next(path for path in sorted(root.rglob("*")) if path.is_file())
    victim.chmod(0o444)
    immutable = os.geteuid() == 0
    if immutable:
        subprocess.run(["chattr", "+i", str(victim)], check=True)
    try:
        result = rocketmq("broker", "-c", str(conf), "--store", store)
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(victim)], check=True)
    assert_one_line_error(result, "storePathRootDir", str(victim), "cannot read and write")


def test_standalone_with_an_unwritable_home_says_to_set_home(tmp_path, read_only_dir):
    conf = broker_conf(tmp_path, f"storePathRootDir={tmp_path / 'store'}")
    result = rocketmq_in_child(*server_args("standalone", conf), home=read_only_dir)
    assert_one_line_error(result, str(read_only_dir / "rocketmq-py"), "set HOME")


# --- the name server's files ------------------------------------------------------------------


def test_namesrv_kv_config_in_a_read_only_directory_is_one_line(tmp_path, read_only_dir, rocketmq):
    kv = read_only_dir / "kvConfig.json"
    conf = namesrv_conf(tmp_path, f"kvConfigPath={kv}")
    result = rocketmq(*server_args("namesrv", conf))
    assert_one_line_error(result, "kvConfigPath", str(kv), "not writable")


def test_namesrv_kv_config_through_a_file_is_one_line(tmp_path, regular_file, rocketmq):
    kv = regular_file / "kvConfig.json"
    conf = namesrv_conf(tmp_path, f"kvConfigPath={kv}")
    result = rocketmq(*server_args("namesrv", conf))
    assert_one_line_error(result, "kvConfigPath", str(kv), f"{regular_file} is a file")


def test_namesrv_kv_config_that_is_a_directory_is_one_line(tmp_path, rocketmq):
    conf = namesrv_conf(tmp_path, f"kvConfigPath={tmp_path}")
    result = rocketmq(*server_args("namesrv", conf))
    assert_one_line_error(result, f"kvConfigPath {tmp_path} is a directory")


# --- the config file and its values -----------------------------------------------------------


@pytest.mark.parametrize("command", ["broker", "standalone", "namesrv"])
@pytest.mark.parametrize("kind", ["missing", "a directory"])
def test_a_config_file_that_cannot_be_read_is_one_line(tmp_path, rocketmq, command, kind):
    conf = tmp_path / "absent.conf" if kind == "missing" else tmp_path
    result = rocketmq(*server_args(command, conf))
    assert_one_line_error(result, "cannot read the config file", str(conf), "-c")


@pytest.mark.parametrize("command", ["broker", "standalone", "namesrv"])
def test_a_listen_port_in_use_is_one_line(tmp_path, rocketmq, command):
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        if command == "namesrv":
            args = server_args(command, namesrv_conf(tmp_path), "--listen", f"0.0.0.0:{port}")
        else:
            conf = broker_conf(tmp_path, f"storePathRootDir={tmp_path / 'store'}")
            conf.write_text(conf.read_text() + f"listenPort={port}\n")
            args = server_args(command, conf)
        if command == "standalone":
            result = rocketmq_in_child(*args, home=tmp_path)  # its name server's files: HOME
        else:
            result = rocketmq(*args)
    assert_one_line_error(result, f":{port}", "in use", "choose another port")


@pytest.mark.parametrize("command", ["broker", "standalone"])
@pytest.mark.parametrize(
    ("line", "needles"),
    [
        ("listenPort=abc", ["listenPort must be an integer, not 'abc'"]),
        (
            "flushDiskType=SOMETIMES",
            ["flushDiskType must be ASYNC_FLUSH or SYNC_FLUSH", "SOMETIMES"],
        ),
        ("mappedFileSizeCommitLog=-1", ["mappedFileSizeCommitLog must be 1 or more, not -1"]),
        ("maxMessageSize=0", ["maxMessageSize must be 1 or more, not 0"]),
        ("diskMaxUsedSpaceRatio=150", ["diskMaxUsedSpaceRatio must be between 0 and 100"]),
    ],
)
def test_a_bad_broker_value_is_one_line(tmp_path, rocketmq, command, line, needles):
    conf = broker_conf(tmp_path, f"storePathRootDir={tmp_path / 'store'}", line)
    result = rocketmq(*server_args(command, conf))
    assert_one_line_error(result, *needles)
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize(
    ("line", "needles"),
    [
        ("listenPort=abc", ["listenPort must be an integer, not 'abc'"]),
        ("listenPort=70000", ["listenPort must be between 0 and 65535, not 70000"]),
        ("scanNotActiveBrokerInterval=-5", ["scanNotActiveBrokerInterval must be 1 or more"]),
    ],
)
def test_a_bad_namesrv_value_is_one_line(tmp_path, rocketmq, line, needles):
    conf = namesrv_conf(tmp_path, f"kvConfigPath={tmp_path / 'kv.json'}", line)
    result = rocketmq("namesrv", "-c", str(conf))
    assert_one_line_error(result, *needles)


# --- keys it does not know ----------------------------------------------------------------------


@pytest.mark.parametrize("command", ["broker", "standalone"])
def test_a_misspelt_broker_key_is_refused_with_a_suggestion(tmp_path, command):
    store = tmp_path / "my-store"
    conf = broker_conf(tmp_path, f"storePathRotDir={store}", "listenPrt=20921")
    # in a child: the defaults it must not have created (HOME/store, HOME/rocketmq-py) are HOME's
    result = rocketmq_in_child(*server_args(command, conf), home=tmp_path)
    assert_one_line_error(
        result,
        "storePathRotDir (did you mean storePathRootDir?)",
        "listenPrt (did you mean listenPort?)",
        "--allow-unknown-keys",
    )
    assert not (tmp_path / "rocketmq-py").exists() and not (tmp_path / "store").exists()


def test_allow_unknown_keys_starts_with_a_warning(tmp_path):
    conf = broker_conf(tmp_path, f"storePathRotDir={tmp_path / 'my-store'}")
    args = ("broker", "-c", str(conf), "--allow-unknown-keys", "-p")
    result = rocketmq_in_child(*args, home=tmp_path)  # the default store is under HOME
    assert result.returncode == 0, result.stderr
    assert "ignoring unknown keys: storePathRotDir (did you mean storePathRootDir?)" in (
        result.stderr
    )
    assert f"storePathRootDir={tmp_path / 'store'}\n" in result.stdout  # the default stays


def test_java_keys_we_do_not_implement_are_a_warning_only(tmp_path, rocketmq):
    # RocketMQ 5 keys: one we lack (a warning), one that is meaningless here (silent)
    conf = broker_conf(tmp_path, "storePathEpochFile=/data/epoch", "sendMessageThreadPoolNums=4")
    result = rocketmq("broker", "-c", str(conf), "-p")
    assert result.returncode == 0, result.stderr
    assert "does not implement: storePathEpochFile" in result.stderr
    assert "sendMessageThreadPoolNums" not in result.stderr


def test_a_misspelt_namesrv_key_is_refused_unless_allowed(tmp_path, rocketmq):
    conf = namesrv_conf(tmp_path, "listenPrt=9999", "serverWorkerThreads=8")
    refused = rocketmq("namesrv", "-c", str(conf), "-p")
    assert_one_line_error(refused, f"{conf}: unknown key listenPrt (did you mean listenPort?)")
    allowed = rocketmq("namesrv", "-c", str(conf), "-p", "--allow-unknown-keys")
    assert allowed.returncode == 0, allowed.stderr
    assert "listenPort=9876\n" in allowed.stdout
    assert "listenPrt (did you mean listenPort?)" in allowed.stderr
    assert "serverWorkerThreads" not in allowed.stderr


# --- a clean stop ---------------------------------------------------------------------------


class Broker:
    """``rocketmq broker`` in a child process, read until its ready line."""

    READY = re.compile(r"The broker\[(\S+), (\S+)\] boot success")

    def __init__(self, tmp_path: Path, conf: Path, store: str) -> None:
        self.process = subprocess.Popen(
            [*BROKER_COMMAND, "-c", str(conf), "--store", store],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "HOME": str(tmp_path)},
        )
        deadline = time.monotonic() + 30
        seen = []
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line:
                break
            seen.append(line)
            match = self.READY.search(line)
            if match:
                self.name, self.address = match.groups()
                return
        self.process.kill()
        raise AssertionError("no ready line: " + "".join(seen) + self.process.stderr.read())

    def stop(self, how: signal.Signals) -> str:
        try:
            self.process.send_signal(how)
            _out, err = self.process.communicate(timeout=20)
        finally:
            self.process.kill()
        assert self.process.returncode == 0, err
        assert "Traceback" not in err
        return err


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM])
def test_the_broker_says_it_stopped_last(tmp_path, how):
    root = tmp_path / "store"
    conf = broker_conf(
        tmp_path,
        "brokerName=broker-x",
        f"storePathRootDir={root}",
        "mappedFileSizeCommitLog=4194304",
    )
    broker = Broker(tmp_path, conf, "mmap")
    assert broker.name == "broker-x"
    err = broker.stop(how)
    lines = err.strip().splitlines()
    assert f"{how.name} received: shutting down" in lines[0]
    assert lines[-1].endswith("rocketmq.broker: broker broker-x stopped"), err
    assert not (root / "abort").exists()  # the store was closed before the line
    assert (root / "config" / "topics.json").exists()
