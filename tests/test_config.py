"""RocketMQ-style config files read into typed settings."""

from __future__ import annotations

import logging

import pytest

from rocketmq_core.config import format_properties, parse_properties
from rocketmq_core.errors import ConfigError
from rocketmq_core.namesrv.config import NamesrvConfig


def test_properties_syntax_as_java_reads_it():
    text = (
        "# a comment\n"
        "  ! another comment\n"
        "\n"
        "listenPort=9877\n"
        "bindAddress : 127.0.0.1\n"
        "kvConfigPath   /data/kv.json\n"
        "rocketmqHome=/opt/\\\n"
        "     rocketmq\n"
        "productEnvName=a\\=b\\tc\\u0041\n"
        "empty=\n"
        "spaced\\ key=v\n"
    )
    assert parse_properties(text) == {
        "listenPort": "9877",
        "bindAddress": "127.0.0.1",
        "kvConfigPath": "/data/kv.json",
        "rocketmqHome": "/opt/rocketmq",
        "productEnvName": "a=b\tcA",
        "empty": "",
        "spaced key": "v",
    }


def test_format_is_key_equals_value_lines():
    assert format_properties({"a": True, "b": 3, "c": "x"}) == "a=true\nb=3\nc=x\n"


def test_settings_from_a_file_are_typed(tmp_path):
    path = tmp_path / "namesrv.conf"
    path.write_text("listenPort=9999\norderMessageEnable=TRUE\nscanNotActiveBrokerInterval= 250 \n")
    config = NamesrvConfig.load(path)
    assert config.listen_port == 9999
    assert config.order_message_enable is True
    assert config.scan_not_active_broker_interval == 250
    assert config.to_properties()["listenPort"] == 9999


def test_unknown_keys_are_reported_and_java_tuning_keys_are_not(tmp_path, caplog):
    path = tmp_path / "namesrv.conf"
    path.write_text("listenPrt=1\nserverWorkerThreads=8\n")
    with caplog.at_level(logging.WARNING, logger="rocketmq.config"):
        config = NamesrvConfig.load(path)
    assert config.listen_port == 9876
    assert "ignoring unknown keys: listenPrt" in caplog.text
    assert "serverWorkerThreads" not in caplog.text


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("listenPort=abc", "listenPort must be an integer, not 'abc'"),
        ("clusterTest=yes", "clusterTest must be true or false, not 'yes'"),
    ],
)
def test_bad_values_name_the_file_and_key(tmp_path, line, message):
    path = tmp_path / "namesrv.conf"
    path.write_text(line + "\n")
    with pytest.raises(ConfigError, match=f"{path}: {message}"):
        NamesrvConfig.load(path)


def test_update_is_all_or_nothing():
    config = NamesrvConfig()
    with pytest.raises(ConfigError):
        config.update({"listenPort": "1", "clusterTest": "maybe"})
    assert config.listen_port == 9876


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the config file"):
        NamesrvConfig.load(tmp_path / "absent.conf")
