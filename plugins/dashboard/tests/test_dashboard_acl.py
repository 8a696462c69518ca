"""A dashboard on brokers with ACL: unsigned admin requests are refused with a hint to
log in; logging in with an admin account signs every request of that browser only."""

from __future__ import annotations

import re

import httpx
import pytest
from dashboard_pages import csrf_token, error_message
from rocketmq_dashboard.app import create_app
from rocketmq_dashboard.settings import DashboardSettings

from rocketmq_core.testing.cluster import EmbeddedCluster

pytestmark = pytest.mark.anyio

ACCOUNTS = """\
accounts:
  - accessKey: dashboard-admin
    secretKey: dashboard-secret
    admin: true
  - accessKey: reader-key
    secretKey: reader-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    (home / "conf").mkdir()
    (home / "conf" / "plain_acl.yml").write_text(ACCOUNTS)
    directory = tmp_path_factory.mktemp("cluster")
    with EmbeddedCluster(directory, acl_enable=True, rocketmq_home=str(home)) as running:
        yield running


def client_of(app) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")


async def test_an_admin_logs_in_and_out(acl_cluster):
    app = create_app(DashboardSettings(acl_cluster.namesrv_address), host=acl_cluster.host)
    async with client_of(app) as browser, client_of(app) as other_browser:
        refused = await browser.get("/groups")
        assert refused.status_code == 502 and 'id="error-login-hint"' in refused.text
        cluster_page = await browser.get("/")  # the name server answers; the broker refuses
        assert 'data-test="broker-error"' in cluster_page.text

        form = {"csrftoken": csrf_token(await browser.get("/login"))}
        wrong = await browser.post(
            "/login", data={**form, "access_key": "dashboard-admin", "secret_key": "nope"}
        )
        assert wrong.status_code == 502 and error_message(wrong)
        # any valid account logs in (reads are allowed); only an admin one may change things
        reader = await browser.post(
            "/login", data={**form, "access_key": "reader-key", "secret_key": "reader-secret"}
        )
        assert reader.status_code == 303, error_message(reader)
        create = {**form, "topic": "NotByAReader", "write_queues": "1"}
        refused = await browser.post("/topics/create", data=create)
        assert refused.status_code == 502 and "reader-key" in error_message(refused)
        assert acl_cluster.namesrv.routes.route("NotByAReader") is None

        admin = {"access_key": "dashboard-admin", "secret_key": "dashboard-secret"}
        logged_in = await browser.post("/login", data={**form, **admin})
        assert logged_in.status_code == 303, error_message(logged_in)
        groups = await browser.get("/groups")
        assert groups.status_code == 200, error_message(groups)
        assert re.search(r'id="account">dashboard-admin<', groups.text)
        assert "dashboard-secret" not in groups.text and "dashboard-secret" not in str(
            browser.cookies
        )
        assert 'data-test="broker-version"' in (await browser.get("/")).text
        assert (await other_browser.get("/groups")).status_code == 502  # its own session

        logout = await browser.post("/logout", data={"csrftoken": csrf_token(groups)})
        assert logout.status_code == 303
        assert (await browser.get("/groups")).status_code == 502


async def test_the_dashboards_own_account_signs_until_someone_logs_in(acl_cluster):
    from rocketmq_core.acl.signing import Credentials

    settings = DashboardSettings(
        acl_cluster.namesrv_address,
        default_credentials=Credentials("dashboard-admin", "dashboard-secret"),
    )
    async with client_of(create_app(settings, host=acl_cluster.host)) as browser:
        page = await browser.get("/groups")
        assert page.status_code == 200, error_message(page)
