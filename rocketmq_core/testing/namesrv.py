"""Helpers for tests that need a name server: settings in a temp dir, registrations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..namesrv.config import NamesrvConfig
from ..protocol.bodies import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigWrapper
from ..protocol.codes import RequestCode
from ..protocol.command import RemotingCommand
from ..protocol.constants import PERM_RW
from ..protocol.headers import RegisterBrokerRequestHeader


def namesrv_config(directory: Path, **overrides: Any) -> NamesrvConfig:
    """A name server on 127.0.0.1, any free port, keeping its files in ``directory``."""
    config = NamesrvConfig(
        kv_config_path=str(directory / "kvConfig.json"),
        config_store_path=str(directory / "namesrv.properties"),
        bind_address="127.0.0.1",
        listen_port=0,
    )
    for name, value in overrides.items():
        setattr(config, name, value)
    return config


def register_broker_request(
    *,
    broker_addr: str,
    broker_name: str = "broker-a",
    cluster: str = "DefaultCluster",
    broker_id: int = 0,
    topics: dict[str, int] | None = None,
    perm: int = PERM_RW,
    version: DataVersion | None = None,
    compressed: bool = False,
    ha_server_addr: str | None = None,
    **header_fields: Any,
) -> RemotingCommand:
    """REGISTER_BROKER as a broker sends it; ``topics`` maps topic -> queue count."""
    configs = {
        name: TopicConfig(name, read_queue_nums=count, write_queue_nums=count, perm=perm)
        for name, count in (topics or {}).items()
    }
    body = RegisterBrokerBody(TopicConfigWrapper(configs, version or DataVersion(1, 1)))
    header = RegisterBrokerRequestHeader(
        broker_name=broker_name,
        broker_addr=broker_addr,
        cluster_name=cluster,
        ha_server_addr=ha_server_addr or broker_addr,
        broker_id=broker_id,
        compressed=compressed,
        **header_fields,
    )
    return RemotingCommand.request(
        RequestCode.REGISTER_BROKER, header.to_ext_fields(), body.encode(compressed)
    )
