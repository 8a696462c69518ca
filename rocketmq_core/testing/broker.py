"""Helpers for tests that need a broker: small files in a temp dir, one name server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..broker.config import BrokerConfig


def broker_config(directory: Path, namesrv_addr: str = "", **overrides: Any) -> BrokerConfig:
    """A broker on 127.0.0.1 and any free port, with small store files in ``directory``."""
    config = BrokerConfig(
        broker_name="broker-a",
        broker_ip1="127.0.0.1",
        listen_port=0,
        namesrv_addr=namesrv_addr,
        store_path_root_dir=str(directory),
        mapped_file_size_commit_log=8 * 1024 * 1024,
        mapped_file_size_consume_queue=20 * 10_000,
        max_hash_slot_num=10_000,
        max_index_num=40_000,
    )
    for name, value in overrides.items():
        setattr(config, name, value)
    return config
