"""Hook implementations of the spark plugin (hooks only, no logic)."""

from rocketmq_core.hookspecs import hookimpl


@hookimpl
def rocketmq_register_cli_commands(register):
    from .doctor import SparkCommand

    register("spark", SparkCommand())
