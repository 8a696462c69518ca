"""Hook implementations of the proxy_grpc plugin (hooks only, no logic)."""

from rocketmq_core.hookspecs import hookimpl


@hookimpl
def rocketmq_register_cli_commands(register):
    from .cli import ProxyCommand

    register("proxy", ProxyCommand())


@hookimpl
def rocketmq_register_broker_services(register):
    from .local import local_proxy

    register("grpc_proxy", local_proxy)
