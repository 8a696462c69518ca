"""The dashboard's pages over HTTP, on a real name server and broker: each renders what
the cluster holds, its forms change the cluster, and they refuse a request without
their CSRF token. Failures of the cluster show as a message on the page."""

from __future__ import annotations

import re
import time
from urllib.parse import quote

import httpx
import pytest
from dashboard_pages import csrf_token, error_message, eventually, rows
from rocketmq_dashboard.app import create_app
from rocketmq_dashboard.settings import DashboardSettings

from rocketmq_core.client.message import Message, ReceivedMessage
from rocketmq_core.client.producer import Producer
from rocketmq_core.client.push import ConsumeStatus, PushConsumer

pytestmark = pytest.mark.anyio


async def test_the_cluster_page_shows_the_broker_with_its_runtime_info(dashboard, cluster):
    page = await dashboard.get("/")
    assert page.status_code == 200
    [row] = rows(page, "broker-row")
    assert f'data-address="{cluster.broker_address}"' in row
    assert 'data-broker="broker-a"' in row
    cells = dict(re.findall(r'data-test="(broker-[a-z-]+)">([^<]*)<', page.text))
    assert cells["broker-role"] == "ASYNC_MASTER"
    assert cells["broker-version"].startswith("V")
    float(cells["broker-in-tps"]), float(cells["broker-out-tps"])  # numbers, from putTps
    assert cells["broker-disk-ratio"].endswith("%")


async def test_a_topic_created_through_the_form_is_routable_then_updated_then_deleted(
    dashboard, cluster, name
):
    topic = name("Orders")
    listing = await dashboard.get("/topics")
    token = csrf_token(listing)
    form = {"csrftoken": token, "topic": topic, "write_queues": "2", "read_queues": "2"}
    created = await dashboard.post("/topics/create", data={**form, "perm": "6"})
    assert created.status_code == 303, error_message(created)
    assert cluster.namesrv.routes.route(topic) is not None  # create waits for the route

    detail = await dashboard.get(created.headers["location"])
    assert detail.status_code == 200
    assert len(rows(detail, "queue-offset-row")) == 2
    assert 'id="notice"' in detail.text
    assert f'data-topic="{topic}"' in (await dashboard.get("/topics")).text

    again = await dashboard.post("/topics/create", data={**form, "perm": "6"})
    assert again.status_code == 400 and "exists on broker-a" in error_message(again)

    updated = await dashboard.post(
        "/topics/update", data={**form, "write_queues": "3", "read_queues": "3", "perm": "6"}
    )
    assert updated.status_code == 303, error_message(updated)
    detail = await dashboard.get(updated.headers["location"])
    assert len(rows(detail, "queue-offset-row")) == 3

    confirm = await dashboard.get(f"/topics/delete?topic={quote(topic)}")
    assert 'id="topic-delete-form"' in confirm.text
    wrong = await dashboard.post(
        "/topics/delete", data={"csrftoken": token, "topic": topic, "confirm": "x"}
    )
    assert wrong.status_code == 400 and "to confirm" in error_message(wrong)
    assert cluster.namesrv.routes.route(topic) is not None
    deleted = await dashboard.post(
        "/topics/delete", data={"csrftoken": token, "topic": topic, "confirm": topic}
    )
    assert deleted.status_code == 303, error_message(deleted)
    assert cluster.namesrv.routes.route(topic) is None


async def test_a_form_without_its_csrf_token_is_refused(dashboard, cluster, name):
    topic = name("Forged")
    await dashboard.get("/topics")  # the browser holds the CSRF cookie
    form = {"topic": topic, "write_queues": "1"}
    refused = await dashboard.post("/topics/create", data=form)
    assert refused.status_code == 403 and 'id="csrf-refused"' in refused.text
    wrong = await dashboard.post("/topics/create", data={**form, "csrftoken": "forged"})
    assert wrong.status_code == 403
    # a page of another site posts without the dashboard's cookies: refused all the same
    transport = dashboard._transport
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as stranger:
        assert (await stranger.post("/topics/create", data=form)).status_code == 403
        assert (await stranger.post("/dlq/resend", data=form)).status_code == 403
    assert cluster.namesrv.routes.route(topic) is None


async def test_a_message_is_found_by_key_by_id_and_by_time(dashboard, cluster, name):
    topic = name("Payments")
    cluster.create_topic(topic, 2)
    before = time.time_ns() // 1_000_000 - 1000
    async with Producer(name("PG"), cluster.namesrv_address) as producer:
        sent = await producer.send(Message(topic, b"paid 42", tags="paid", keys="order-42"))
        await producer.send(Message(topic, b"paid 43", tags="paid", keys="order-43"))

    by_key = await dashboard.get(f"/messages?mode=key&topic={topic}&key=order-42")
    assert by_key.status_code == 200, error_message(by_key)
    [row] = rows(by_key, "message-row")
    assert f'data-msg-id="{sent.msg_id}"' in row

    link = re.search(r'data-test="message-link" href="([^"]+)"', by_key.text).group(1)
    message = await dashboard.get(link.replace("&amp;", "&"))
    assert message.status_code == 200, error_message(message)
    assert re.search(r'<pre id="message-body">paid 42</pre>', message.text)
    assert 'data-key="KEYS"><th>KEYS</th><td>order-42</td>' in message.text
    assert 'id="resend-form"' in message.text

    by_id = await dashboard.get(f"/messages?mode=id&id={sent.msg_id}&topic={topic}")
    assert len(rows(by_id, "message-row")) == 1, error_message(by_id)

    later = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + 60))
    earlier = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(before / 1000))
    by_time = await dashboard.get(f"/messages?mode=topic&topic={topic}&begin={earlier}&end={later}")
    assert len(rows(by_time, "message-row")) == 2, error_message(by_time)
    none_yet = await dashboard.get(f"/messages?mode=topic&topic={topic}&begin={later}")
    assert rows(none_yet, "message-row") == [] and 'id="no-messages"' in none_yet.text


async def test_a_dead_letter_is_listed_resent_and_consumed(dashboard, cluster, name):
    topic, group = name("T"), name("CG")
    cluster.create_topic(topic, 1)
    broken = True
    seen: list[ReceivedMessage] = []

    async def listener(messages: list[ReceivedMessage]) -> ConsumeStatus:
        seen.extend(messages)
        return ConsumeStatus.RECONSUME_LATER if broken else ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group,
        cluster.namesrv_address,
        listener=listener,
        consume_from="first",
        max_reconsume_times=0,  # the first failure dead-letters it
    )
    consumer.subscribe(topic)
    dlq = f"%DLQ%{group}"
    async with consumer, Producer(name("PG"), cluster.namesrv_address) as producer:
        await producer.send(Message(topic, b"order-42"))

        async def listed() -> bool:
            return f'data-topic="{dlq}"' in (await dashboard.get("/dlq")).text

        await eventually(listed)
        page = await dashboard.get(f"/dlq?topic={quote(dlq)}")
        [row] = rows(page, "dlq-message-row")
        offset_id = re.search(r'data-offset-msg-id="([^"]+)"', row).group(1)

        broken = False  # the listener is fixed: resend the dead letter
        resent = await dashboard.post(
            "/dlq/resend", data={"csrftoken": csrf_token(page), "topic": dlq, "id": offset_id}
        )
        assert resent.status_code == 200, error_message(resent)
        assert 'data-result="CR_SUCCESS"' in resent.text
    assert [(m.topic, m.body) for m in seen] == [(topic, b"order-42"), (dlq, b"order-42")]


async def test_a_group_shows_its_lag_and_consumers_and_its_offsets_reset_by_time(
    dashboard, cluster, name
):
    topic, group = name("T"), name("CG")
    cluster.create_topic(topic, 1)
    seen: list[bytes] = []

    async def listener(messages: list[ReceivedMessage]) -> ConsumeStatus:
        seen.extend(m.body for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, cluster.namesrv_address, listener=listener, consume_from="first")
    consumer.subscribe(topic)
    async with Producer(name("PG"), cluster.namesrv_address) as producer:
        for n in range(3):
            await producer.send(Message(topic, f"m{n}".encode()))
    async with consumer:

        async def consumed() -> bool:
            page = await dashboard.get(f"/groups/detail?group={group}")
            return len(seen) == 3 and 'data-test="queue-lag">0<' in page.text

        await eventually(consumed)
        page = await dashboard.get(f"/groups/detail?group={group}")
        assert len(rows(page, "connection-row")) == 1
        assert f'data-topic="{topic}"' in page.text  # its subscription
        listing = await dashboard.get("/groups")
        row = re.search(rf'data-group="{group}">.*?</tr>', listing.text, re.S).group(0)
        assert 'data-test="group-consumers">1<' in row

    reset = await dashboard.post(
        "/groups/reset-offset",
        data={
            "csrftoken": csrf_token(page),
            "group": group,
            "topic": topic,
            "to": "time",
            "timestamp": "2000-01-01T00:00:00",
        },
    )
    assert reset.status_code == 200, error_message(reset)
    assert 'data-test="reset-offset">0<' in reset.text
    page = await dashboard.get(f"/groups/detail?group={group}")
    assert re.search(r'id="group-total-lag">3<', page.text)


async def test_the_producers_of_a_group_are_listed(dashboard, cluster, name):
    topic, group = name("T"), name("PG")
    cluster.create_topic(topic, 1)
    async with Producer(group, cluster.namesrv_address) as producer:
        await producer.send(Message(topic, b"x"))
        await producer.instance.heartbeat_all()
        page = await dashboard.get(f"/producers?group={group}&topic={topic}")
        assert page.status_code == 200, error_message(page)
        [row] = rows(page, "producer-row")
        assert producer.instance.client_id in row


async def test_the_live_charts_poll_tps_and_lag_and_plotly_is_served(dashboard, cluster):
    page = await dashboard.get("/live")
    assert 'src="/static/plotly.min.js"' in page.text and 'id="chart-tps"' in page.text
    sample = (await dashboard.get("/api/live")).json()
    [broker] = sample["brokers"]
    assert broker["address"] == cluster.broker_address
    assert isinstance(broker["in_tps"], float) and isinstance(broker["out_tps"], float)
    assert all(isinstance(g["lag"], int) for g in sample["groups"])
    script = await dashboard.get("/static/plotly.min.js")
    assert script.status_code == 200 and len(script.content) > 1_000_000
    assert script.headers["content-type"].startswith("text/javascript")
    assert (await dashboard.get("/static/app/live.js")).status_code == 200


async def test_user_errors_are_a_message_on_the_page(dashboard, cluster, name):
    unknown = await dashboard.get(f"/topics/detail?topic={name('Nope')}")
    assert unknown.status_code == 502 and "has no route" in error_message(unknown)
    bad_time = await dashboard.get("/messages?mode=topic&topic=x&begin=yesterday")
    assert bad_time.status_code == 400 and "cannot read timestamp" in error_message(bad_time)
    bad_name = await dashboard.post(
        "/topics/create",
        data={"csrftoken": csrf_token(await dashboard.get("/topics")), "topic": "a b"},
    )
    assert bad_name.status_code == 400 and "illegal characters" in error_message(bad_name)

    nowhere = create_app(DashboardSettings("127.0.0.1:1"), host=cluster.host)
    transport = httpx.ASGITransport(app=nowhere)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        for path in ("/", "/topics", "/groups", "/dlq"):
            page = await client.get(path)
            assert page.status_code == 502, path
            assert "127.0.0.1:1" in error_message(page) or "name server" in error_message(page)
            assert "Traceback" not in page.text
        sample = await client.get("/api/live")
        assert sample.status_code == 502 and sample.json()["error"]


async def test_a_request_for_another_host_name_is_refused(dashboard):
    # a site that points its own name at 127.0.0.1 (DNS rebinding) must not read the pages
    page = await dashboard.get("/", headers={"Host": "attacker.example"})
    assert page.status_code == 400
    assert (await dashboard.get("/", headers={"Host": "localhost:8082"})).status_code == 200
