"""The built-in name server: its processors and the ``rocketmq namesrv`` command."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from ..hookspecs import hookimpl
from ..namesrv.command import NamesrvCommand
from ..namesrv.processors import PROCESSORS


def _bound_to_server(function: Callable[..., Any]) -> Callable[[Any], Any]:
    def factory(namesrv: Any) -> Any:
        return partial(function, namesrv)

    return factory


@hookimpl
def rocketmq_register_processors(register):
    for code, function in PROCESSORS.items():
        register(code, _bound_to_server(function), server="namesrv")


@hookimpl
def rocketmq_register_cli_commands(register):
    register("namesrv", NamesrvCommand())
