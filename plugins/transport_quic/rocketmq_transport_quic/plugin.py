"""Hook implementations of the transport_quic plugin (hooks only, no logic)."""

from rocketmq_core.hookspecs import hookimpl


@hookimpl
def rocketmq_register_transports(register):
    from .transport import QuicTransport

    register("quic", QuicTransport())


@hookimpl
def rocketmq_register_cli_commands(register):
    from .command import CertsCommand

    register("certs", CertsCommand())
