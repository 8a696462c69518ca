"""``rocketmq namesrv`` as an operator runs it: config file, -p, ready line, signals."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from rocketmq_core.errors import PluginError
from rocketmq_core.namesrv.server import NameServer
from rocketmq_core.plugins import BUILTIN_PLUGINS, load_plugins
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.testing.namesrv import namesrv_config

READY = re.compile(r"The Name Server boot success\. .*listening on (\S+)")


def rocketmq(*args: str, **options) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rocketmq_core.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **options,
    )


def write_config(tmp_path, *lines: str):
    path = tmp_path / "namesrv.conf"
    path.write_text(
        f"kvConfigPath={tmp_path / 'kv.json'}\nconfigStorePath={tmp_path / 'ns.properties'}\n"
        + "".join(line + "\n" for line in lines)
    )
    return path


def wait_until_ready(process: subprocess.Popen, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        seen.append(line)
        match = READY.search(line)
        if match:
            return match.group(1)
    process.kill()
    raise AssertionError("no ready line; stderr was:\n" + "".join(seen))


def test_print_config_shows_the_file_and_the_listen_override(tmp_path):
    path = write_config(tmp_path, "listenPort=9999", "orderMessageEnable=true")
    out, _err = rocketmq(
        "namesrv", "-c", str(path), "-p", "--listen", "127.0.0.2:7777"
    ).communicate(timeout=30)
    assert "orderMessageEnable=true\n" in out
    assert "listenPort=7777\n" in out and "bindAddress=127.0.0.2\n" in out
    assert f"kvConfigPath={tmp_path / 'kv.json'}\n" in out


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_serves_until_signalled_then_exits_cleanly(tmp_path, stop):
    process = rocketmq("namesrv", "-c", str(write_config(tmp_path)), "--listen", "127.0.0.1:0")
    try:
        address = wait_until_ready(process)
        assert re.fullmatch(r"127\.0\.0\.1:\d+", address) and not address.endswith(":0")

        async def ask_for_a_route():
            async with RemotingClient(load_plugins().registry.transports.get("tcp")) as client:
                request = RemotingCommand.request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}
                )
                return await client.invoke(address, request, timeout=5)

        assert anyio.run(ask_for_a_route).code == ResponseCode.TOPIC_NOT_EXIST
        process.send_signal(stop)
        _out, err = process.communicate(timeout=15)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert f"{stop.name} received: shutting down" in err
    assert "The Name Server stopped" in err
    assert "Traceback" not in err


def test_bad_config_is_an_error_a_person_can_act_on(tmp_path):
    path = write_config(tmp_path, "listenPort=ninety")
    process = rocketmq("namesrv", "-c", str(path))
    _out, err = process.communicate(timeout=30)
    assert process.returncode == 2
    assert f"rocketmq namesrv: error: {path}: listenPort must be an integer, not 'ninety'" in err


def test_port_in_use_is_reported_without_a_traceback(tmp_path):
    first = rocketmq("namesrv", "-c", str(write_config(tmp_path)), "--listen", "127.0.0.1:0")
    try:
        address = wait_until_ready(first)
        second = rocketmq("namesrv", "-c", str(write_config(tmp_path)), "--listen", address)
        _out, err = second.communicate(timeout=30)
        assert second.returncode == 2, err
        assert "Traceback" not in err
        assert address.split(":")[1] in err and "in use" in err
    finally:
        first.kill()
        first.communicate()


def test_broken_plugins_stop_a_server_from_starting(tmp_path):
    host = load_plugins(blocked=(), builtins=(*BUILTIN_PLUGINS, "no_such_module_here"))
    assert host.problems

    async def start():
        await NameServer(namesrv_config(tmp_path), host=host).run()

    with pytest.raises(PluginError, match="refusing to start with broken plugins"):
        anyio.run(start)


def test_cli_runs_with_the_installed_entry_point():
    # the console script exists and names the namesrv command
    out = subprocess.run(
        [str(Path(sys.executable).with_name("rocketmq")), "namesrv", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    assert "--config-file" in out and "--listen" in out
