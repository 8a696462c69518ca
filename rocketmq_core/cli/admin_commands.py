"""The built-in admin commands of ``rocketmq`` (consume, topic, cluster, group, message,
offset, send, broker-config, kv, acl); each lives in its own module of this package,
imported when the command is first asked for (a ``rocketmq standalone`` never loads the
admin client behind them)."""

from __future__ import annotations

from ..hookspecs import hookimpl
from ..registry import Deferred

# command name: (module of this package, its command class)
COMMANDS = {
    "consume": ("consume", "ConsumeCommand"),
    "topic": ("topic", "TopicCommand"),
    "cluster": ("cluster", "ClusterCommand"),
    "group": ("group", "GroupCommand"),
    "message": ("message", "MessageCommand"),
    "offset": ("offset", "OffsetCommand"),
    "send": ("send", "SendCommand"),
    "broker-config": ("broker_config", "BrokerConfigCommand"),
    "kv": ("kv", "KvCommand"),
    "acl": ("acl", "AclCommand"),
}


@hookimpl
def rocketmq_register_cli_commands(register):
    for name, (module, class_name) in COMMANDS.items():
        register(name, Deferred.instance_of(f"{__package__}.{module}:{class_name}"))
