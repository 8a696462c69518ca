"""A name server with aclEnable=true: changes need an account, routes stay readable."""

from __future__ import annotations

import pytest

from rocketmq_core.acl.signing import Credentials, sign
from rocketmq_core.namesrv.server import NameServer
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.headers import GetRouteInfoRequestHeader, PutKVConfigRequestHeader
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.testing.namesrv import namesrv_config, register_broker_request

pytestmark = pytest.mark.anyio

USER = Credentials("user-key-1", "user-secret")
ADMIN = Credentials("admin-key-1", "admin-secret")
JAVA = "org.apache.rocketmq.acl.common.AclException: "


@pytest.fixture
async def namesrv(tmp_path, plugin_host):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(
        "accounts:\n"
        "  - {accessKey: user-key-1, secretKey: user-secret}\n"
        "  - {accessKey: admin-key-1, secretKey: admin-secret, admin: true}\n"
    )
    config = namesrv_config(tmp_path / "ns", acl_enable=True, rocketmq_home=str(home))
    async with NameServer.serving(config, host=plugin_host) as running:
        yield running


@pytest.fixture
async def client(plugin_host):
    async with RemotingClient(plugin_host.registry.transports.get("tcp")) as remoting:
        yield remoting


def put_kv():
    header = PutKVConfigRequestHeader(namespace="ns", key="k", value="v")
    return RemotingCommand.request(RequestCode.PUT_KV_CONFIG, header.to_ext_fields())


async def test_admin_requests_need_an_admin_account(namesrv, client):
    unsigned = await client.invoke(namesrv.address, put_kv())
    assert unsigned.code == ResponseCode.SYSTEM_ERROR
    assert unsigned.remark.startswith(JAVA + "No accessKey is configured")
    request = put_kv()
    sign(request, USER)
    user = await client.invoke(namesrv.address, request)
    assert user.code == ResponseCode.SYSTEM_ERROR
    assert "Need admin permission for request code=100, but accessKey=user-key-1" in user.remark
    request = put_kv()
    sign(request, ADMIN)
    assert (await client.invoke(namesrv.address, request)).code == ResponseCode.SUCCESS
    assert namesrv.kv.get("ns", "k") == "v"


async def test_register_broker_needs_a_valid_signature(namesrv, client):
    unsigned = register_broker_request(broker_addr="127.0.0.1:10911", topics={"Orders": 4})
    refused = await client.invoke(namesrv.address, unsigned)
    assert refused.code == ResponseCode.SYSTEM_ERROR
    assert "No accessKey is configured" in refused.remark
    request = register_broker_request(broker_addr="127.0.0.1:10911", topics={"Orders": 4})
    sign(request, USER)
    assert (await client.invoke(namesrv.address, request)).code == ResponseCode.SUCCESS


async def test_routes_stay_readable_unsigned(namesrv, client):
    request = register_broker_request(broker_addr="127.0.0.1:10911", topics={"Orders": 4})
    sign(request, USER)
    await client.invoke(namesrv.address, request)
    header = GetRouteInfoRequestHeader(topic="Orders")
    route = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, header.to_ext_fields())
    assert (await client.invoke(namesrv.address, route)).code == ResponseCode.SUCCESS
