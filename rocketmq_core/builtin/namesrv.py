"""The built-in name server: its processors and the ``rocketmq namesrv`` command."""

from __future__ import annotations

from ..hookspecs import hookimpl
from ..namesrv.command import NamesrvCommand
from ..namesrv.processors import PROCESSORS
from ..registry import bound_to_app


@hookimpl
def rocketmq_register_processors(register):
    for code, function in PROCESSORS.items():
        register(code, bound_to_app(function), server="namesrv")


@hookimpl
def rocketmq_register_cli_commands(register):
    register("namesrv", NamesrvCommand())
