"""The built-in broker: its processors (by request code) and the broker commands."""

from __future__ import annotations

from ..broker.command import BrokerCommand, StandaloneCommand
from ..broker.processors import PROCESSORS
from ..hookspecs import hookimpl
from ..registry import bound_to_app


@hookimpl
def rocketmq_register_processors(register):
    for code, function in PROCESSORS.items():
        register(code, bound_to_app(function), server="broker")


@hookimpl
def rocketmq_register_cli_commands(register):
    register("broker", BrokerCommand())
    register("standalone", StandaloneCommand())
