"""The built-in admin commands of ``rocketmq`` (consume, topic, cluster, group, message,
offset, send); they live in ``client/commands.py`` and are imported when registered."""

from __future__ import annotations

from ..hookspecs import hookimpl


@hookimpl
def rocketmq_register_cli_commands(register):
    from ..client import commands

    register("consume", commands.ConsumeCommand())
    register("topic", commands.TopicCommand())
    register("cluster", commands.ClusterCommand())
    register("group", commands.GroupCommand())
    register("message", commands.MessageCommand())
    register("offset", commands.OffsetCommand())
    register("send", commands.SendCommand())
