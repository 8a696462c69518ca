"""The built-in broker: its processors (by request code), the transaction half-message
hook and check-back service, and the broker commands."""

from __future__ import annotations

from ..broker.command import BrokerCommand, StandaloneCommand
from ..broker.processors import PROCESSORS
from ..broker.transaction_check import TransactionCheckService
from ..broker.transactions import CHECK_SERVICE, HalfMessageHook
from ..hookspecs import hookimpl
from ..registry import bound_to_app


@hookimpl
def rocketmq_register_processors(register):
    for code, function in PROCESSORS.items():
        register(code, bound_to_app(function), server="broker")


@hookimpl
def rocketmq_register_put_hooks(register):
    register("transaction", HalfMessageHook)


@hookimpl
def rocketmq_register_broker_services(register):
    register(CHECK_SERVICE, TransactionCheckService)


@hookimpl
def rocketmq_register_cli_commands(register):
    register("broker", BrokerCommand())
    register("standalone", StandaloneCommand())
