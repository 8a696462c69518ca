"""Hook implementations of the dashboard plugin (hooks only, no logic)."""

from rocketmq_core.hookspecs import hookimpl
from rocketmq_core.registry import Deferred


@hookimpl
def rocketmq_register_cli_commands(register):
    # made when `rocketmq dashboard` (or the list of commands) is asked for; Starlette,
    # uvicorn and Jinja2 load only when the command runs
    register("dashboard", Deferred.instance_of("rocketmq_dashboard.command:DashboardCommand"))
