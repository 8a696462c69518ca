"""Hook implementations of the dashboard plugin (hooks only, no logic)."""

from rocketmq_core.hookspecs import hookimpl


@hookimpl
def rocketmq_register_cli_commands(register):
    # Starlette, uvicorn and Jinja2 load when the command runs, not with every `rocketmq`
    from .command import DashboardCommand

    register("dashboard", DashboardCommand())
