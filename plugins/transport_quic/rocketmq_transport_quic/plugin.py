"""Hook implementations of the transport_quic plugin (hooks only, no logic)."""

from rocketmq_core.hookspecs import hookimpl
from rocketmq_core.registry import Deferred


def _transport():
    from .transport import QuicTransport

    return QuicTransport()


@hookimpl
def rocketmq_register_transports(register):
    # aioquic (and cryptography) load when a quic:// address is first used
    register("quic", Deferred(_transport))


@hookimpl
def rocketmq_register_cli_commands(register):
    # made when `rocketmq certs` is asked for
    register("certs", Deferred.instance_of("rocketmq_transport_quic.command:CertsCommand"))
