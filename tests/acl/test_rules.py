"""plain_acl.yml: reading, the checks Java makes, file discovery, writing back."""

from __future__ import annotations

import logging
import textwrap

import pytest

from rocketmq_core.acl.permissions import DENY, PUB, SUB
from rocketmq_core.acl.rules import (
    AccountConfig,
    AclConfigError,
    acl_files,
    load_rules,
    read_acl_file,
    write_acl_file,
)

SAMPLE = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB
  - accessKey: rocketmq2
    secretKey: "12345678"
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""


def write(home, text, name="conf/plain_acl.yml"):
    path = home / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_sample_file(tmp_path):
    write(tmp_path, SAMPLE)
    rules = load_rules(tmp_path)
    assert [pattern.text for pattern in rules.global_white] == ["10.10.103.*", "192.168.0.*"]
    account = rules.accounts["RocketMQ"]
    assert account.secret_key == "12345678"  # a quoted number stays text
    grants = account.grants
    assert (grants.default_topic, grants.default_group, grants.admin) == (DENY, SUB, False)
    assert grants.explicit == {
        "topicA": DENY,
        "topicB": PUB | SUB,
        "topicC": SUB,
        "%RETRY%groupA": DENY,  # groups are kept under their retry topic
        "%RETRY%groupB": PUB | SUB,
        "%RETRY%groupC": SUB,
    }
    assert rules.accounts["rocketmq2"].grants.admin is True
    assert "12345678" not in repr(account) and "12345678" not in repr(rules.files[0].accounts[0])


@pytest.mark.parametrize(
    ("account", "problem"),
    [
        ("{accessKey: short, secretKey: '12345678'}", "accessKey must be longer than 6"),
        ("{accessKey: RocketMQ, secretKey: '123456'}", "secretKey must be longer than 6"),
        ("{secretKey: '12345678'}", "accessKey must be longer than 6 characters (missing)"),
        (
            "{accessKey: RocketMQ, secretKey: '12345678', topicPerms: ['a=PUB=SUB']}",
            "topicPerms: 'a=PUB=SUB' must be name=PERM, with one '='",
        ),
        (
            "{accessKey: RocketMQ, secretKey: '12345678', groupPerms: ['justaname']}",
            "groupPerms: 'justaname' must be name=PERM",
        ),
        (
            "{accessKey: RocketMQ, secretKey: '12345678', whiteRemoteAddress: 10.0.0.500}",
            "whiteRemoteAddress '10.0.0.500' is not an IPv4 or IPv6 address",
        ),
        ("{accessKey: RocketMQ, secretKey: '12345678', admin: maybe}", "admin must be true"),
    ],
)
def test_bad_account_names_file_account_and_key(tmp_path, account, problem):
    path = write(tmp_path, f"accounts:\n  - {account}\n")
    with pytest.raises(AclConfigError) as raised:
        load_rules(tmp_path)
    message = str(raised.value)
    assert message.startswith(f"{path}: accounts[0]")
    assert problem in message
    assert "'12345678'" not in message and "123456'" not in message  # never the secret


def test_unknown_perm_string_is_deny(tmp_path):
    write(
        tmp_path,
        "accounts:\n  - {accessKey: RocketMQ, secretKey: '12345678', defaultTopicPerm: ANY,"
        " topicPerms: ['t=WRITE']}\n",
    )
    grants = load_rules(tmp_path).accounts["RocketMQ"].grants
    assert grants.default_topic == DENY and grants.explicit == {"t": DENY}


def test_bad_yaml_and_bad_global_pattern(tmp_path):
    path = write(tmp_path, "accounts: [unclosed\n")
    with pytest.raises(AclConfigError, match=f"^{path}: not valid YAML"):
        load_rules(tmp_path)
    write(tmp_path, "globalWhiteRemoteAddresses: ['1.2.3.4-']\n")
    with pytest.raises(AclConfigError, match=r"globalWhiteRemoteAddresses '1\.2\.3\.4-'"):
        load_rules(tmp_path)


def test_no_file_at_all_says_where_to_put_one(tmp_path):
    with pytest.raises(AclConfigError, match=r"create .*conf/plain_acl\.yml"):
        load_rules(tmp_path)


def test_extra_files_merge_and_first_definition_wins(tmp_path, caplog):
    default = write(
        tmp_path,
        "globalWhiteRemoteAddresses: [10.0.0.1]\n"
        "accounts: [{accessKey: RocketMQ, secretKey: '12345678'}]\n",
    )
    extra = write(
        tmp_path,
        "globalWhiteRemoteAddresses: [10.0.0.2]\n"
        "accounts: [{accessKey: RocketMQ, secretKey: 'another1'},"
        " {accessKey: team-b-key, secretKey: 'team-b-secret'}]\n",
        "conf/acl/team/b.yaml",
    )
    write(tmp_path, "accessKey: mqadmin1\nsecretKey: '12345678'\n", "conf/acl/tools.yml")
    write(tmp_path, "", "conf/acl/empty.yml")
    write(tmp_path, "not: rules\n", "conf/acl/readme.txt")
    assert acl_files(tmp_path) == [default, tmp_path / "conf/acl/empty.yml", extra]
    with caplog.at_level(logging.WARNING, "rocketmq.acl"):
        rules = load_rules(tmp_path)
    assert [pattern.text for pattern in rules.global_white] == ["10.0.0.1", "10.0.0.2"]
    assert rules.accounts["RocketMQ"].secret_key == "12345678"
    assert rules.accounts["RocketMQ"].source == default
    assert rules.accounts["team-b-key"].source == extra
    assert rules.file_holding("team-b-key").path == extra
    warnings = [record.getMessage() for record in caplog.records]
    assert any("accessKey RocketMQ is already defined" in line for line in warnings)
    assert any("empty.yml holds no ACL rules" in line for line in warnings)
    assert not any("another1" in line for line in warnings)


def test_write_then_read_back(tmp_path):
    path = write(tmp_path, SAMPLE + "dataVersion:\n  - counter: 3\n    timestamp: 1700000000000\n")
    acl_file = read_acl_file(path)
    acl_file.accounts.append(
        AccountConfig("new-account", "new-secret", topic_perms=["Orders=PUB"], admin=False)
    )
    write_acl_file(acl_file)
    again = read_acl_file(path)
    assert [account.access_key for account in again.accounts] == [
        "RocketMQ",
        "rocketmq2",
        "new-account",
    ]
    assert again.accounts[0].group_perms == ["groupA=DENY", "groupB=PUB|SUB", "groupC=SUB"]
    assert again.accounts[2].topic_perms == ["Orders=PUB"]
    assert again.others["dataVersion"] == [{"counter": 3, "timestamp": 1700000000000}]
    assert load_rules(tmp_path).accounts["new-account"].grants.explicit == {"Orders": PUB}
