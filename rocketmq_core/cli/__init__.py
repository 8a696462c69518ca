"""The command line, apart from the SDK: ``rocketmq`` (``rocketmq.py``: the parser and
``main``), ``mqadmin``/``mqnamesrv``/``mqbroker`` (``mqadmin.py``), one module per admin
command family (topic, cluster, group, message, offset, send, consume, kv, broker-config)
over what they share (``base``, ``render`` for tables and JSON, ``stopping`` for signals),
and the built-in plugins that register them (``admin_commands``, ``plugins_command``)."""

from .rocketmq import main

__all__ = ["main"]
