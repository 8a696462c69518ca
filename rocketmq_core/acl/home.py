"""Where a server's ACL files, and mqadmin's credentials, are looked for (a module of its
own: the admin commands find the home without loading the rules and YAML)."""

from __future__ import annotations

from pathlib import Path


def acl_home(rocketmq_home: str) -> Path:
    """Where conf/plain_acl.yml is looked for: rocketmqHome (ROCKETMQ_HOME by default),
    else the user's home, where the servers keep their other files (~/store, ~/namesrv)."""
    return Path(rocketmq_home) if rocketmq_home else Path.home()
