"""Hook implementations of the proxy_grpc plugin (hooks only, no logic)."""

from rocketmq_core.hookspecs import hookimpl
from rocketmq_core.registry import Deferred


def _command():
    from .cli import ProxyCommand

    return ProxyCommand()


@hookimpl
def rocketmq_register_cli_commands(register):
    register("proxy", Deferred(_command))  # made when `rocketmq proxy` is asked for


@hookimpl
def rocketmq_register_broker_services(register):
    from .local import local_proxy

    register("grpc_proxy", local_proxy)
