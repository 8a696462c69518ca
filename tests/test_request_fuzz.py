"""Whatever a client sends, the processors answer it: no unexpected exception.

Mutated requests for every code a real broker and name server register (the seeded
mutator of rocketmq_core.testing.frame_fuzz) go straight to their processors, with the
context of a real server-side connection. A processor may refuse a request (a
ProtocolError or RequestRefused, answered with its code); anything else is a crash the
dispatcher would answer SYSTEM_ERROR with a traceback in the log, and fails the test.
ROCKETMQ_FUZZ_CASES raises the count (``tox -e soak`` runs 100,000).
"""

from __future__ import annotations

import os
from inspect import isawaitable

import anyio
import pytest

from rocketmq_core.broker.app import Broker
from rocketmq_core.errors import ProtocolError, RequestRefused
from rocketmq_core.namesrv.server import NameServer
from rocketmq_core.protocol.codec import encode_command
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.testing.broker import broker_config
from rocketmq_core.testing.frame_fuzz import FrameMutator
from rocketmq_core.testing.namesrv import namesrv_config

pytestmark = pytest.mark.anyio
CASES = int(os.environ.get("ROCKETMQ_FUZZ_CASES", "3000"))
SEED = int(os.environ.get("ROCKETMQ_FUZZ_SEED", "27"))
# a held pull or a long poll answers later; that is not a crash
PROCESSOR_WAIT = 0.2


async def server_context(client: RemotingClient, app) -> object:
    """The RequestContext of a real connection the server accepted from ``client``."""
    await client.invoke(app.address, RemotingCommand(0), timeout=5)  # any code opens it
    (connection,) = app.server.connections
    return connection.context


async def run_case(table, ctx, command: RemotingCommand) -> BaseException | None:
    """The unexpected exception ``command`` provokes in its processor, or None."""
    route = table.lookup(command.code)
    try:
        result = route.processor(ctx, command)
        if isawaitable(result):
            with anyio.move_on_after(PROCESSOR_WAIT):
                result = await result
        if isinstance(result, RemotingCommand):
            result.opaque = command.opaque
            encode_command(result)  # an answer that cannot be sent is a crash too
    except (ProtocolError, RequestRefused):
        return None
    except Exception as exc:
        return exc
    return None


async def test_no_request_makes_a_processor_crash(tmp_path, plugin_host):
    async with (
        NameServer.serving(namesrv_config(tmp_path / "ns"), host=plugin_host) as namesrv,
        Broker.serving(broker_config(tmp_path / "broker"), host=plugin_host) as broker,
        RemotingClient(plugin_host.registry.transports.get("tcp")) as client,
    ):
        tables = {"broker": broker.processor_table(), "namesrv": namesrv.processor_table()}
        contexts = {
            "broker": await server_context(client, broker),
            "namesrv": await server_context(client, namesrv),
        }
        server_of = {code: name for name, table in tables.items() for code in table.codes()}
        assert len(server_of) > 60, "expected every registered request code"
        crashes: dict[str, str] = {}
        for case in FrameMutator(sorted(server_of), SEED).cases(CASES):
            server = server_of[case.command.code]
            error = await run_case(tables[server], contexts[server], case.command)
            if error is not None:
                kind = f"{type(error).__name__} in code {case.command.code}"
                crashes.setdefault(kind, f"{case.describe()}: {error!s:.200}")
        assert not crashes, "\n".join(f"{kind}: {example}" for kind, example in crashes.items())
