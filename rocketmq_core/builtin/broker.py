"""The built-in broker: its processors (by request code), the transaction half-message
hook and check-back service, and the broker commands. Hooks only: each imports what it
registers, so loading the plugin costs a process that is no broker nothing."""

from __future__ import annotations

from ..hookspecs import hookimpl
from ..registry import Deferred, bound_to_app


@hookimpl
def rocketmq_register_processors(register):
    from ..broker.processors import PROCESSORS

    for code, function in PROCESSORS.items():
        register(code, bound_to_app(function), server="broker")


@hookimpl
def rocketmq_register_put_hooks(register):
    from ..broker.transactions import HalfMessageHook

    register("transaction", HalfMessageHook)


@hookimpl
def rocketmq_register_broker_services(register):
    from ..broker.ha.service import HAService
    from ..broker.ha.synchronize import SlaveSynchronize
    from ..broker.pop.service import PopService
    from ..broker.transaction_check import TransactionCheckService
    from ..broker.transactions import CHECK_SERVICE

    register(CHECK_SERVICE, TransactionCheckService)
    register("ha", HAService.for_broker)
    register("slave_sync", SlaveSynchronize.for_broker)
    register("pop", PopService)


@hookimpl
def rocketmq_register_cli_commands(register):
    # made when the CLI asks for them: a process that runs another command never loads
    # the broker's startup module
    register("broker", Deferred.instance_of("rocketmq_core.broker.startup:BrokerCommand"))
    register("standalone", Deferred.instance_of("rocketmq_core.broker.startup:StandaloneCommand"))
