"""The ACL admin requests (ACL.md §5) against a real name server and broker with ACL on:
through the SDK (signed by its ClientConfig credentials), ``rocketmq acl`` and the
mqadmin names; the files on disk, and what the rules then let through."""

from __future__ import annotations

import os
import stat

import orjson
import pytest
import yaml

from rocketmq_core.acl.signing import Credentials, sign
from rocketmq_core.cli import main
from rocketmq_core.cli.base import ACCESS_KEY_VARIABLE, SECRET_KEY_VARIABLE
from rocketmq_core.cli.mqadmin import mqadmin
from rocketmq_core.client.admin_types import AdminError
from rocketmq_core.client.config import ClientConfig
from rocketmq_core.client.sync import Admin
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.headers import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.testing.cluster import EmbeddedCluster
from tests.broker.wire import send_request

ADMIN = Credentials("admin-key-1", "admin-secret")
PLAIN = Credentials("plain-key-1", "plain-secret")  # no admin flag: may only read the versions
APP = Credentials("app-key-01", "app-secret-1")
JAVA = "org.apache.rocketmq.acl.common.AclException: "
RULES = """\
accounts:
  - accessKey: admin-key-1
    secretKey: admin-secret
    admin: true
  - accessKey: plain-key-1
    secretKey: plain-secret
    defaultTopicPerm: DENY
"""
TEAM_RULES = """\
# the team's own file
accounts:
  - accessKey: team-key-1
    secretKey: team-secret
    topicPerms: [Orders=SUB]
"""


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home"
    (home / "conf" / "acl").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(RULES)
    (home / "conf" / "acl" / "team.yml").write_text(TEAM_RULES)
    return home


@pytest.fixture
def cluster(tmp_path, home):
    # the watcher polls once a minute: every change must apply without it
    with EmbeddedCluster(
        tmp_path / "rocketmq",
        store="memory",
        acl_enable=True,
        rocketmq_home=str(home),
        acl_file_watch_interval=60_000,
    ) as cluster:
        cluster.create_topic("Orders")
        yield cluster


@pytest.fixture
def admin(cluster):
    config = ClientConfig(cluster.namesrv_address, credentials=ADMIN)
    with Admin(config=config) as admin:
        yield admin


def invoke(cluster, request, credentials=None):
    """One request straight to the broker, signed with ``credentials`` if given."""
    if credentials is not None:
        sign(request, credentials)

    async def send():
        transport = cluster.host.registry.transports.get("tcp")
        async with RemotingClient(transport) as client:
            return await client.invoke(cluster.broker_address, request)

    return cluster.call(send)


def send_as(cluster, credentials):
    return invoke(cluster, send_request("Orders"), credentials)


def read_yaml(path):
    return yaml.safe_load(path.read_text())


def version_of(path):
    return read_yaml(path)["dataVersion"][0]["counter"]


def test_account_lifecycle_through_the_sdk(cluster, admin, home):
    default_file = home / "conf" / "plain_acl.yml"
    address = cluster.broker_address
    assert (
        send_as(cluster, APP).remark
        == f"{JAVA}No acl config for app-key-01, rocketmq_core.acl.validator"
    )

    admin.update_acl_account(
        address,
        APP.access_key,
        APP.secret_key,
        default_topic_perm="DENY",
        topic_perms=["Orders=PUB"],
    )
    assert send_as(cluster, APP).code == ResponseCode.SUCCESS  # at once, no watcher
    written = read_yaml(default_file)
    assert written["accounts"][-1] == {
        "accessKey": "app-key-01",
        "secretKey": "app-secret-1",
        "admin": False,
        "defaultTopicPerm": "DENY",
        "topicPerms": ["Orders=PUB"],
    }
    assert [a["accessKey"] for a in written["accounts"]] == [
        "admin-key-1",
        "plain-key-1",
        "app-key-01",
    ]
    assert written["dataVersion"][0]["counter"] == 1

    # a change merges into the account: what is not given stays
    admin.update_acl_account(address, APP.access_key, APP.secret_key, topic_perms=["Orders=SUB"])
    refused = send_as(cluster, APP)
    assert refused.code == ResponseCode.SYSTEM_ERROR
    assert "No default permission for topic:Orders" in refused.remark
    account = read_yaml(default_file)["accounts"][-1]
    assert account["topicPerms"] == ["Orders=SUB"] and account["defaultTopicPerm"] == "DENY"
    assert version_of(default_file) == 2

    config = admin.acl_config(address)
    by_key = {account.access_key: account for account in config.plain_access_configs}
    assert set(by_key) == {"admin-key-1", "plain-key-1", "app-key-01", "team-key-1"}
    assert by_key["app-key-01"].secret_key == "app-secret-1"
    assert by_key["app-key-01"].topic_perms == ["Orders=SUB"]
    assert by_key["admin-key-1"].admin is True

    versions = admin.acl_versions(address)
    assert (versions.cluster_name, versions.broker_name) == ("DefaultCluster", "broker-a")
    assert versions.broker_addr == address
    assert versions.version.counter == 2
    assert versions.files[str(default_file)].counter == 2
    assert versions.files[str(home / "conf" / "acl" / "team.yml")].counter == 0

    admin.delete_acl_account(address, APP.access_key)
    assert "No acl config for app-key-01" in send_as(cluster, APP).remark
    assert "app-key-01" not in default_file.read_text()
    assert version_of(default_file) == 3
    with pytest.raises(AdminError) as failed:
        admin.delete_acl_account(address, APP.access_key)
    assert failed.value.code == ResponseCode.DELETE_ACL_CONFIG_FAILED
    assert (
        "The accesskey[app-key-01] corresponding to accessConfig has been deleted failed."
        in str(failed.value)
    )


def test_a_rewritten_file_keeps_its_mode(cluster, admin, home):
    default_file = home / "conf" / "plain_acl.yml"
    default_file.chmod(0o600)
    umask = os.umask(0o022)  # one that would make a new file world-readable
    try:
        admin.update_acl_account(cluster.broker_address, APP.access_key, APP.secret_key)
        admin.update_global_white_addrs(cluster.broker_address, ["10.1.1.*"])
    finally:
        os.umask(umask)
    assert "app-secret-1" in default_file.read_text()
    assert stat.S_IMODE(default_file.stat().st_mode) == 0o600  # secrets stay owner-only


def test_an_existing_key_changes_in_the_file_that_holds_it(cluster, admin, home):
    team_file = home / "conf" / "acl" / "team.yml"
    default_before = (home / "conf" / "plain_acl.yml").read_text()
    team = Credentials("team-key-1", "team-secret")
    assert "topic:Orders" in send_as(cluster, team).remark  # SUB only
    admin.update_acl_account(
        cluster.broker_address, "team-key-1", "team-secret", topic_perms=["Orders=PUB|SUB"]
    )
    assert send_as(cluster, team).code == ResponseCode.SUCCESS
    written = read_yaml(team_file)
    assert written["accounts"] == [
        {
            "accessKey": "team-key-1",
            "secretKey": "team-secret",
            "admin": False,
            "topicPerms": ["Orders=PUB|SUB"],
        }
    ]
    assert written["dataVersion"][0]["counter"] == 1
    assert "# the team's own file" not in team_file.read_text()  # rewritten, as Java does
    assert (home / "conf" / "plain_acl.yml").read_text() == default_before


def test_global_white_list(cluster, admin, home):
    default_file = home / "conf" / "plain_acl.yml"
    assert "No accessKey is configured" in invoke(cluster, send_request("Orders")).remark
    admin.update_global_white_addrs(cluster.broker_address, ["127.0.0.1", "10.10.103.*"])
    assert invoke(cluster, send_request("Orders")).code == ResponseCode.SUCCESS
    assert read_yaml(default_file)["globalWhiteRemoteAddresses"] == ["127.0.0.1", "10.10.103.*"]
    assert admin.acl_config(cluster.broker_address).global_white_addrs == [
        "127.0.0.1",
        "10.10.103.*",
    ]
    admin.update_global_white_addrs(cluster.broker_address, [])
    assert "No accessKey is configured" in invoke(cluster, send_request("Orders")).remark
    assert read_yaml(default_file)["globalWhiteRemoteAddresses"] == []
    # another file, named by its full path
    team_file = home / "conf" / "acl" / "team.yml"
    admin.update_global_white_addrs(cluster.broker_address, ["192.168.0.*"], str(team_file))
    assert read_yaml(team_file)["globalWhiteRemoteAddresses"] == ["192.168.0.*"]


def create_request(**fields):
    header = CreateAccessConfigRequestHeader(**fields)
    return RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, header.to_ext_fields())


def test_refusals(cluster, home):
    default_before = (home / "conf" / "plain_acl.yml").read_text()
    cases = [
        (
            dict(access_key="short", secret_key="app-secret-1"),
            "accessKey 'short': accessKey must be longer than 6 characters (it has 5)",
        ),
        (
            dict(access_key="app-key-01", secret_key="123"),
            "accessKey 'app-key-01': secretKey must be longer than 6 characters (it has 3)",
        ),
        (
            dict(access_key="app-key-01", secret_key="app-secret-1", topic_perms="Orders=ANY"),
            "accessKey app-key-01: topicPerms entry 'Orders=ANY': the permission must be PUB or"
            " SUB or PUB|SUB or SUB|PUB or DENY",
        ),
        (
            dict(access_key="app-key-01", secret_key="app-secret-1", group_perms="G"),
            "accessKey app-key-01: groupPerms entry 'G' must be name=PERM, for example TopicA=SUB",
        ),
        (
            dict(access_key="app-key-01", secret_key="app-secret-1", default_topic_perm="RW"),
            "accessKey app-key-01: defaultTopicPerm 'RW' is no permission; use PUB or SUB or"
            " PUB|SUB or SUB|PUB or DENY",
        ),
    ]
    for fields, remark in cases:
        response = invoke(cluster, create_request(**fields), ADMIN)
        assert (response.code, response.remark) == (
            ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
            remark,
        )
    bad_white = create_request(
        access_key="app-key-01", secret_key="app-secret-1", white_remote_address="10.1.1.300"
    )
    response = invoke(cluster, bad_white, ADMIN)
    assert response.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
    assert "whiteRemoteAddress" in response.remark and "10.1.1.300" in response.remark
    assert (home / "conf" / "plain_acl.yml").read_text() == default_before

    unsigned = invoke(cluster, create_request(access_key="app-key-01", secret_key="app-secret-1"))
    assert unsigned.code == ResponseCode.SYSTEM_ERROR
    assert "No accessKey is configured" in unsigned.remark


def acl_requests():
    """One request of each ACL code 50-54, in an order that succeeds for an admin."""
    return [
        create_request(access_key="app-key-01", secret_key="app-secret-1", admin=True),
        RemotingCommand.request(
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
            UpdateGlobalWhiteAddrsConfigRequestHeader(global_white_addrs="").to_ext_fields(),
        ),
        RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {}),
        RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, {}),
        RemotingCommand.request(
            RequestCode.DELETE_ACL_CONFIG,
            DeleteAccessConfigRequestHeader(access_key="app-key-01").to_ext_fields(),
        ),
    ]


def test_acl_changes_and_secrets_need_an_admin_account(cluster, home):
    # stricter than Java 4.9 (ACL.md §2.3): a signed account must not read every secret
    # (54) or make itself admin (50); the versions (52) stay open to any signed account
    default_before = (home / "conf" / "plain_acl.yml").read_text()
    for request in acl_requests():
        response = invoke(cluster, request, PLAIN)
        if request.code == RequestCode.GET_BROKER_CLUSTER_ACL_INFO:
            assert response.code == ResponseCode.SUCCESS
            continue
        assert (response.code, response.remark) == (
            ResponseCode.SYSTEM_ERROR,
            f"{JAVA}Need admin permission for request code={request.code},"
            " but accessKey=plain-key-1 is not, rocketmq_core.acl.validator",
        )
    assert (home / "conf" / "plain_acl.yml").read_text() == default_before
    for request in acl_requests():
        response = invoke(cluster, request, ADMIN)
        assert response.code == ResponseCode.SUCCESS, (request.code, response.remark)
        if request.code == RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG:
            assert b"app-secret-1" in response.body
    assert "app-key-01" not in (home / "conf" / "plain_acl.yml").read_text()


def test_white_list_file_must_be_an_acl_file_under_home(cluster, admin, tmp_path):
    outside = tmp_path / "elsewhere.yml"
    outside.write_text("accounts: []\n")
    for path, reason in [
        (str(outside), f"{outside} is not an ACL file under"),
        (str(tmp_path / "home" / "conf" / "acl" / "missing.yml"), "does not exist"),
        (str(tmp_path / "home" / "conf" / "broker.conf"), "is not an ACL file (*.yml or *.yaml)"),
    ]:
        with pytest.raises(AdminError) as failed:
            admin.update_global_white_addrs(cluster.broker_address, ["10.0.0.1"], path)
        assert failed.value.code == ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
        assert "The globalWhiteAddresses[10.0.0.1] has been updated failed." in str(failed.value)
        assert reason in str(failed.value)
    with pytest.raises(AdminError, match=r"10\.0\.0\.300"):
        admin.update_global_white_addrs(cluster.broker_address, ["10.0.0.300"])


@pytest.fixture
def rocketmq(cluster, capsys):
    """``rocketmq acl ...`` signed as the admin account: (exit code, stdout or JSON)."""

    def run(*args, json=False):
        signing = ["--access-key", ADMIN.access_key, "--secret-key", ADMIN.secret_key]
        code = main(
            ["acl", *args, "-n", cluster.namesrv_address, *signing, *(["--json"] if json else [])]
        )
        captured = capsys.readouterr()
        run.err = captured.err  # what the last run wrote to stderr
        return code, orjson.loads(captured.out) if json and code == 0 else captured.out

    return run


def test_the_cli_signs_with_mqadmins_tools_file(cluster, home, capsys, monkeypatch):
    for variable in ("ROCKETMQ_ACCESS_KEY", "ROCKETMQ_SECRET_KEY"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("ROCKETMQ_HOME", str(home))
    tools = home / "conf" / "tools.yml"
    command = ["acl", "get", "-b", cluster.broker_address, "-n", cluster.namesrv_address]

    tools.write_text(f"accessKey: {ADMIN.access_key}\nsecretKey: {ADMIN.secret_key}\n")
    assert main(command) == 0
    assert "ACCESS KEY" in capsys.readouterr().out
    # a blank key: sent unsigned, as mqadmin does, and refused as anonymous
    for blank in ("accessKey:\nsecretKey: something\n", "accessKey: '  '\nsecretKey: x\n"):
        tools.write_text(blank)
        assert main(command) == 1
        assert "No accessKey is configured" in capsys.readouterr().err
    # the options win over the file
    tools.write_text("accessKey: not-an-account\nsecretKey: not-a-secret\n")
    signed = ["--access-key", ADMIN.access_key, "--secret-key", ADMIN.secret_key]
    assert main([*command, *signed]) == 0
    capsys.readouterr()
    tools.write_text("accessKey: [unclosed\n")
    assert main(command) == 2
    error = capsys.readouterr().err
    assert str(tools) in error and "not YAML" in error and "Traceback" not in error


def test_cli_actions(cluster, rocketmq, home):
    address = cluster.broker_address
    code, text = rocketmq(
        "update", "-b", address, "-a", APP.access_key, "-s", APP.secret_key,
        "-i", "DENY", "-t", "Orders=PUB", "-g", "CG=SUB", "-w", "10.9.9.*", "-m", "false",
    )  # fmt: skip
    assert (code, text) == (0, f"updated account app-key-01 on {address}\n")
    assert send_as(cluster, APP).code == ResponseCode.SUCCESS

    code, document = rocketmq("get", "-c", "DefaultCluster", json=True)
    assert code == 0
    accounts = {a["accessKey"]: a for a in document[address]["accounts"]}
    assert accounts["app-key-01"] == {
        "accessKey": "app-key-01",
        "secretKey": "app-secret-1",
        "admin": False,
        "whiteRemoteAddress": "10.9.9.*",
        "defaultTopicPerm": "DENY",
        "groupPerms": ["CG=SUB"],
        "topicPerms": ["Orders=PUB"],
    }
    code, text = rocketmq("get", "-b", address)
    assert code == 0 and text.startswith(f"# broker-a {address}\nglobal white list: (none)\n")
    assert "ACCESS KEY" in text and "app-secret-1" in text and "Orders=PUB" in text

    code, text = rocketmq("white", "-b", address, "-g", "10.10.103.*, 192.168.0.*")
    assert (code, text) == (0, f"global white list 10.10.103.*,192.168.0.* set on {address}\n")
    code, rows = rocketmq("version", "-c", "DefaultCluster", json=True)
    assert code == 0
    by_file = {row["aclFile"]: row for row in rows}
    default_row = by_file[str(home / "conf" / "plain_acl.yml")]
    assert default_row["version"] == 2 and default_row["brokerName"] == "broker-a"
    assert default_row["clusterName"] == "DefaultCluster" and default_row["updated"] > 0
    code, text = rocketmq("version", "-b", address)
    header, *lines = text.splitlines()
    assert header.split() == ["CLUSTER", "BROKER", "ADDRESS", "ACL", "FILE", "VERSION", "UPDATED"]
    assert len(lines) == 2 and any(" 2  " in line and "plain_acl.yml" in line for line in lines)

    code, text = rocketmq("delete", "-c", "DefaultCluster", "-a", APP.access_key)
    assert (code, text) == (0, f"deleted account app-key-01 on {address}\n")
    assert "No acl config for app-key-01" in send_as(cluster, APP).remark


def test_cli_errors(cluster, rocketmq, capsys):
    code, _ = rocketmq("delete", "-b", cluster.broker_address, "-a", "nobody-at-all")
    err = rocketmq.err
    assert code == 1 and err.count("\n") == 1
    assert "deleting ACL account nobody-at-all failed on broker" in err
    assert "No ACL file under" in err
    account = ["update", "-b", "B", "-a", "app-key-01", "-s", "app-secret-1"]
    for args, expected in [
        ([*account, "-i", "ANY"], "'ANY' is no permission"),
        (["update", "-b", "B", "-a", "short", "-s", "app-secret-1"], "'short' is too short"),
        ([*account, "-t", "Orders"], "'Orders': write name=PERM"),
        ([*account, "-m", "yes"], "'yes': give true or false"),
    ]:
        with pytest.raises(SystemExit) as exited:
            main(["acl", *args])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert expected in err and "Traceback" not in err


def test_mqadmin_names(cluster, home, monkeypatch, capsys):
    monkeypatch.setenv(ACCESS_KEY_VARIABLE, ADMIN.access_key)
    monkeypatch.setenv(SECRET_KEY_VARIABLE, ADMIN.secret_key)
    namesrv = ["-n", cluster.namesrv_address]
    address = cluster.broker_address
    default_file = home / "conf" / "plain_acl.yml"
    assert mqadmin(["updateAclConfig", "-b", address, "-a", APP.access_key, "-s", APP.secret_key,
                    "-t", "Orders=PUB", "-m", "true", *namesrv]) == 0  # fmt: skip
    assert send_as(cluster, APP).code == ResponseCode.SUCCESS
    assert read_yaml(default_file)["accounts"][-1]["admin"] is True
    assert (
        mqadmin(["updateGlobalWhiteAddr", "-c", "DefaultCluster", "-g", "10.1.1.*", *namesrv]) == 0
    )
    assert read_yaml(default_file)["globalWhiteRemoteAddresses"] == ["10.1.1.*"]
    capsys.readouterr()
    assert mqadmin(["clusterAclConfigVersion", "-b", address, *namesrv, "--json"]) == 0
    rows = orjson.loads(capsys.readouterr().out)
    assert {row["aclFile"]: row["version"] for row in rows}[str(default_file)] == 2
    assert mqadmin(["getAclConfig", "-b", address, *namesrv]) == 0
    assert "app-key-01" in capsys.readouterr().out
    assert mqadmin(["deleteAclConfig", "-b", address, "-a", APP.access_key, *namesrv]) == 0
    assert "No acl config for app-key-01" in send_as(cluster, APP).remark
    capsys.readouterr()
    assert mqadmin(["updateAclConfig", "-b", address, "-a", APP.access_key, *namesrv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "-s/--secretKey" in err


def test_acl_off_answers_that_it_is_off(tmp_path, capsys):
    with EmbeddedCluster(tmp_path / "rocketmq", store="memory") as cluster:
        address = cluster.broker_address
        with Admin(cluster.namesrv_address) as admin:
            for call, code in [
                (lambda: admin.update_acl_account(address, "app-key-01", "app-secret-1"),
                 ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED),
                (lambda: admin.delete_acl_account(address, "app-key-01"),
                 ResponseCode.DELETE_ACL_CONFIG_FAILED),
                (lambda: admin.update_global_white_addrs(address, ["10.0.0.1"]),
                 ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED),
                (lambda: admin.acl_versions(address), ResponseCode.SYSTEM_ERROR),
                (lambda: admin.acl_config(address), ResponseCode.SYSTEM_ERROR),
            ]:  # fmt: skip
                with pytest.raises(AdminError) as failed:
                    call()
                assert failed.value.code == code
                assert "The broker does not enable acl: set aclEnable=true" in str(failed.value)
        assert main(["acl", "get", "-b", address, "-n", cluster.namesrv_address]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "The broker does not enable acl" in err


def test_the_written_file_loads_again_after_a_restart(cluster, admin, home):
    admin.update_acl_account(
        cluster.broker_address, APP.access_key, APP.secret_key, topic_perms=["Orders=PUB"]
    )
    cluster.restart_broker()
    assert send_as(cluster, APP).code == ResponseCode.SUCCESS
    accounts = read_yaml(home / "conf" / "plain_acl.yml")["accounts"]
    assert accounts[0]["accessKey"] == "admin-key-1"
