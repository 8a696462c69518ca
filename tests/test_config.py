"""RocketMQ-style config files read into typed settings."""

from __future__ import annotations

import logging
import re

import pytest

from rocketmq_core.broker.config import BrokerConfig
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
    path.write_text("fooBar=1\nserverWorkerThreads=8\nenableControllerInNamesrv=true\n")
    with caplog.at_level(logging.WARNING, logger="rocketmq.config"):
        config = NamesrvConfig.load(path)
    assert config.listen_port == 9876
    assert "ignoring unknown keys: fooBar" in caplog.text
    assert "does not implement: enableControllerInNamesrv" in caplog.text  # a Java key
    assert "serverWorkerThreads" not in caplog.text  # Java tuning, meaningless here


def test_a_misspelt_key_is_an_error_with_a_suggestion(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text("storePathRotDir=/data/store\nlistenPort=1\n")
    with pytest.raises(ConfigError) as raised:
        BrokerConfig.load(path)
    assert str(raised.value) == (
        f"{path}: unknown key storePathRotDir (did you mean storePathRootDir?):"
        " correct the spelling, or pass --allow-unknown-keys to start anyway"
    )


def test_allow_unknown_turns_a_misspelling_into_a_warning(tmp_path, caplog):
    path = tmp_path / "broker.conf"
    path.write_text("storePathRotDir=/data/store\nlistenPort=1\n")
    with caplog.at_level(logging.WARNING, logger="rocketmq.config"):
        config = BrokerConfig.load(path, allow_unknown=True)
    assert config.listen_port == 1 and config.store_path_root_dir != "/data/store"
    assert "storePathRotDir (did you mean storePathRootDir?)" in caplog.text


def test_a_runtime_update_names_the_key_it_probably_meant():
    with pytest.raises(ConfigError, match=r"unknown config keys: listenPrt \(did you mean"):
        NamesrvConfig().update({"listenPrt": "1"}, strict=True)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("mapped_file_size_commit_log", -5, "mappedFileSizeCommitLog must be 1 or more, not -5"),
        ("flush_interval_commit_log", 0, "flushIntervalCommitLog must be 1 or more, not 0"),
        ("disk_max_used_space_ratio", 101, "diskMaxUsedSpaceRatio must be between 0 and 100"),
        ("file_reserved_time", -1.0, "fileReservedTime must be 0 or more, not -1.0"),
    ],
)
def test_numbers_out_of_bounds_are_refused_by_key(field, value, message):
    config = BrokerConfig()
    setattr(config, field, value)
    with pytest.raises(ConfigError, match=re.escape(message)):
        config.validate()


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
