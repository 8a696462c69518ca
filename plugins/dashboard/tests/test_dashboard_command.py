"""``rocketmq dashboard``: the command serves the app with uvicorn on the address asked
(127.0.0.1 unless told), and refuses an address it cannot use in one line."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest
from rocketmq_dashboard.command import DEFAULT_LISTEN, parse_listen

from rocketmq_core.cli import main


def test_the_command_serves_the_pages_of_the_cluster(cluster):
    command = [sys.executable, "-m", "rocketmq_core.cli", "dashboard"]
    command += ["-n", cluster.namesrv_address, "--listen", "127.0.0.1:0"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=os.environ)
    try:
        first_line = server.stdout.readline()
        assert f"rocketmq dashboard of {cluster.namesrv_address} on http://127.0.0.1:" in (
            first_line
        )
        url = first_line.split(" on ")[1].strip()
        page = httpx.get(url, timeout=30)
        assert page.status_code == 200
        assert f'data-address="{cluster.broker_address}"' in page.text
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_it_listens_on_this_machine_only_by_default():
    assert parse_listen(DEFAULT_LISTEN) == ("127.0.0.1", 8082)
    assert parse_listen("[::1]:9000") == ("::1", 9000)


@pytest.mark.parametrize("listen", ["8082", "localhost:http", "127.0.0.1:70000"])
def test_an_address_it_cannot_use_is_one_line_and_exit_2(listen, capsys):
    assert main(["dashboard", "-n", "127.0.0.1:1", "--listen", listen]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and f"--listen {listen!r}" in error and "HOST:PORT" in error


def test_a_port_in_use_is_one_line_and_exit_2(capsys):
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        listen = f"127.0.0.1:{taken.getsockname()[1]}"
        assert main(["dashboard", "-n", "127.0.0.1:1", "--listen", listen]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "cannot listen there" in error
