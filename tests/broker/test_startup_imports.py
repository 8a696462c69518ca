"""What ``rocketmq standalone`` imports before it is ready: the parts a broker needs,
not every command's module, the ACL rules or POP's processors, which load on first use
(issue 31: ready in under half a second)."""

from __future__ import annotations

import importlib
import os
import re
import signal
import subprocess
import sys
import time

import anyio

from rocketmq_core.broker.processors import PROCESSORS
from rocketmq_core.plugins import load_plugins
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.client import RemotingClient

READY = re.compile(r"rocketmq standalone ready: name server \S+, broker (\S+)")
IMPORTED = re.compile(r"^import time: +\d+ \| +\d+ \| +(\S+)$", re.MULTILINE)
# loaded by other commands, by aclEnable, or by the first request that needs them
NOT_AT_START = {
    "rocketmq_core.client.admin",
    "rocketmq_core.cli.acl",
    "rocketmq_core.cli.topic",
    "rocketmq_core.cli.base",
    "rocketmq_core.namesrv.startup",
    "rocketmq_core.acl.rules",
    "rocketmq_core.acl.service",
    "rocketmq_core.broker.processors.acl",
    "rocketmq_core.broker.processors.pop",
    "yaml",
    "rocketmq_dashboard.command",
    "rocketmq_proxy_grpc.cli",
    "rocketmq_transport_quic.command",
}


def test_every_processor_is_the_function_its_module_defines():
    for code, processor in PROCESSORS.items():
        module = importlib.import_module(processor.__module__)
        function = getattr(module, processor.__name__, None)
        assert callable(function), f"{RequestCode(code).name}: no {processor.__name__}"
        assert function.__module__ == processor.__module__


def test_standalone_imports_what_a_broker_needs_and_acl_requests_load_theirs(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(f"listenPort=0\nstorePathRootDir={tmp_path / 'store'}\ngrpcServerPort=-1\n")
    command = [sys.executable, "-X", "importtime", "-m", "rocketmq_core.cli", "standalone"]
    process = subprocess.Popen(
        [*command, "-c", str(conf), "--namesrv-listen", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    try:
        log, found, deadline = [], None, time.monotonic() + 30
        while found is None and time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line:
                break
            log.append(line)
            found = READY.search(line)
        assert found is not None, "".join(log)
        imported = set(IMPORTED.findall("".join(log)))
        assert {"rocketmq_core.broker.app", "rocketmq_core.broker.startup"} <= imported
        assert not imported & NOT_AT_START

        async def acl_info() -> RemotingCommand:
            async with RemotingClient(load_plugins().registry.transports.get("tcp")) as client:
                request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
                return await client.invoke(found.group(1), request, timeout=10)

        # the ACL processors' module, imported by this first request, answers it
        response = anyio.run(acl_info)
        assert response.code == ResponseCode.SYSTEM_ERROR
        assert "does not enable acl" in response.remark
    finally:
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert "Traceback" not in err
