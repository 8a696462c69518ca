"""Hook implementations of the proxy_grpc plugin (hooks only, no logic)."""

from rocketmq_core.hookspecs import hookimpl
from rocketmq_core.registry import Deferred


@hookimpl
def rocketmq_register_cli_commands(register):
    # made when `rocketmq proxy` is asked for
    register("proxy", Deferred.instance_of("rocketmq_proxy_grpc.cli:ProxyCommand"))


@hookimpl
def rocketmq_register_broker_services(register):
    from .local import local_proxy

    register("grpc_proxy", local_proxy)
