"""The built-in broker: its processors (by request code) and the broker commands."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from ..broker.command import BrokerCommand, StandaloneCommand
from ..broker.processors import PROCESSORS
from ..hookspecs import hookimpl


def _bound_to_broker(function: Callable[..., Any]) -> Callable[[Any], Any]:
    def factory(broker: Any) -> Any:
        return partial(function, broker)

    return factory


@hookimpl
def rocketmq_register_processors(register):
    for code, function in PROCESSORS.items():
        register(code, _bound_to_broker(function), server="broker")


@hookimpl
def rocketmq_register_cli_commands(register):
    register("broker", BrokerCommand())
    register("standalone", StandaloneCommand())
