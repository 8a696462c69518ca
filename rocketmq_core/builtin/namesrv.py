"""The built-in name server: its processors and the ``rocketmq namesrv`` command (hooks
only; each imports what it registers)."""

from __future__ import annotations

from ..hookspecs import hookimpl
from ..registry import Deferred, bound_to_app


@hookimpl
def rocketmq_register_processors(register):
    from ..namesrv.processors import PROCESSORS

    for code, function in PROCESSORS.items():
        register(code, bound_to_app(function), server="namesrv")


@hookimpl
def rocketmq_register_cli_commands(register):
    # made when `rocketmq namesrv` is asked for
    register("namesrv", Deferred.instance_of("rocketmq_core.namesrv.startup:NamesrvCommand"))
