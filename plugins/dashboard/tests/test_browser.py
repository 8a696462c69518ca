"""The dashboard in a real browser: headless Chromium (tests/browser.py) on ``rocketmq
dashboard`` run as its own process, in front of a real name server and broker. Each test
does what an operator does, on the pages an operator sees, and checks the cluster through
the SDK; each page is saved as a screenshot in $ROCKETMQ_SCREENSHOTS (else a temporary
folder) for the record."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import Browser, chromium

from rocketmq_core.client import sync
from rocketmq_core.client.config import ClientConfig
from rocketmq_core.client.message import Message, ReceivedMessage

READY = re.compile(rb"rocketmq dashboard of \S+ on (http://\S+?)/?\n")


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory) -> Path:
    """Where the pages' screenshots go: $ROCKETMQ_SCREENSHOTS, else pytest's temp folder."""
    chosen = os.environ.get("ROCKETMQ_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def dashboard_url(cluster, tmp_path_factory) -> Iterator[str]:
    """``rocketmq dashboard`` on a free port of 127.0.0.1, as its own process; its URL."""
    log = tmp_path_factory.mktemp("dashboard") / "dashboard.log"
    command = ["dashboard", "-n", cluster.namesrv_address, "--listen", "127.0.0.1:0"]
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "rocketmq_core.cli", *command],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while (ready := READY.search(log.read_bytes())) is None:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the dashboard did not start:\n{log.read_text(errors='replace')}")
            time.sleep(0.05)
        yield ready.group(1).decode()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def browser(dashboard_url, screenshots) -> Iterator[Browser]:
    with chromium() as driver:
        yield Browser(driver, dashboard_url, screenshots)


def test_the_cluster_page_shows_the_broker(browser, cluster):
    browser.open("/")
    row = f'[data-test="broker-row"][data-address="{cluster.broker_address}"]'
    browser.until(lambda: browser.find_all(row), f"the row of broker {cluster.broker_address}")
    assert browser.text(f'{row} [data-test="broker-name"]') == "broker-a"
    assert browser.text(f'{row} [data-test="broker-role"]').endswith("MASTER")
    assert browser.text(f'{row} [data-test="broker-version"]').startswith("V")
    assert cluster.broker.config.broker_cluster_name in browser.text(row)
    browser.screenshot("cluster")
    assert browser.javascript_errors() == []


def test_a_topic_created_through_the_form_is_routable(browser, cluster, name):
    topic = name("Orders")
    browser.open("/topics")
    browser.type_into("#topic-create-name", topic)
    browser.type_into("#topic-create-write-queues", "2")
    browser.type_into("#topic-create-read-queues", "2")
    browser.screenshot("topic_create_form")
    browser.find("#topic-create-submit").click()
    browser.wait_for_text("created", "#notice")
    browser.wait_for_text(topic, "main")
    browser.screenshot("topic_detail")

    # the name server routes it as the form said (nothing has been sent to it yet, so
    # nothing else created it), and a producer sends to it
    with sync.Admin(cluster.namesrv_address) as admin:
        route = admin.topic_route(topic)
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas] == [
        ("broker-a", 2, 2)
    ]
    with sync.Producer(name("PG"), cluster.namesrv_address) as producer:
        sent = producer.send(Message(topic, b"routed"))
    assert (sent.queue.topic, sent.queue.broker_name) == (topic, "broker-a")

    browser.open("/topics")
    browser.until(lambda: browser.find_all(f'[data-topic="{topic}"]'), f"{topic} in the list")
    browser.screenshot("topics")
    assert browser.javascript_errors() == []


def test_a_groups_lag_appears_and_shrinks_as_it_consumes(browser, cluster, name):
    topic, group = name("Lag"), name("CG")
    cluster.create_topic(topic, 1)  # one queue: consumed in order, so the lag is exact
    namesrv = cluster.namesrv_address
    permits = threading.Semaphore(0)  # the listener consumes one message per permit
    consumed: list[bytes] = []

    def listener(messages: list[ReceivedMessage]) -> bool:
        for message in messages:
            permits.acquire()
            consumed.append(message.body)
        return True

    consumer = sync.PushConsumer(
        group,
        config=ClientConfig(namesrv_addr=namesrv, persist_offset_interval=0.2),
        listener=listener,
        consume_from="first",
        consume_concurrency=1,
    )
    consumer.subscribe(topic)
    row = f'[data-test="group-row"][data-group="{group}"]'
    with sync.Producer(name("PG"), namesrv) as producer, consumer:
        try:
            # one message consumed first, so that the group has an offset to lag behind
            producer.send(Message(topic, b"first"))
            permits.release()
            browser.open("/groups")
            browser.reload_until(lambda: lag_in(browser, row) == 0, f"{group} at lag 0")

            for number in range(20):
                producer.send(Message(topic, f"order-{number}"))
            browser.reload_until(lambda: lag_in(browser, row) == 20, f"{group} 20 behind")
            assert browser.text(f'{row} [data-test="group-consumers"]') == "1"
            browser.screenshot("groups")

            browser.find(f'{row} [data-test="group-link"]').click()
            browser.wait_for_text("20", "#group-total-lag")
            browser.screenshot("group_lag_20")
            for _ in range(10):
                permits.release()
            browser.reload_until(
                lambda: browser.text("#group-total-lag") == "10", f"{group} 10 behind"
            )
            browser.screenshot("group_lag_10")
            for _ in range(10):
                permits.release()
            browser.reload_until(lambda: browser.text("#group-total-lag") == "0", f"{group} done")
            assert browser.text('[data-test="queue-consumer-offset"]') == "21"
            browser.screenshot("group_lag_0")
        finally:
            for _ in range(21):  # nothing waits for a permit while the consumer stops
                permits.release()
    assert consumed == [b"first", *(f"order-{number}".encode() for number in range(20))]
    assert browser.javascript_errors() == []


def lag_in(browser: Browser, row: str) -> int | None:
    """The lag a group's row shows; None while the row is not there."""
    cells = browser.find_all(f'{row} [data-test="group-lag"]')
    return int(cells[0].text) if cells else None


def test_a_message_is_found_by_its_key(browser, cluster, name):
    topic, key = name("Keyed"), name("order")
    cluster.create_topic(topic, 2)
    with sync.Producer(name("PG"), cluster.namesrv_address) as producer:
        for number in range(5):  # others around it, under other keys
            producer.send(Message(topic, f"other-{number}", keys=f"{key}-other-{number}"))
        sent = producer.send(Message(topic, b'{"order": 42}', tags="paid", keys=[key, "k2"]))

    browser.open("/messages")
    browser.type_into("#search-key-topic", topic)
    browser.type_into("#search-key-key", key)
    browser.submit("#search-key-submit")
    # the search is a GET: reloading asks again, until the broker has indexed the key
    row = f'[data-test="message-row"][data-msg-id="{sent.msg_id}"]'
    browser.reload_until(lambda: browser.find_all(row), f"message {sent.msg_id} by key {key}")
    assert browser.text("#messages-count") == "1 message(s)"
    assert browser.text(f'{row} [data-test="message-keys"]') == f"{key} k2"
    assert browser.text(f'{row} [data-test="message-tags"]') == "paid"
    browser.screenshot("messages_by_key")

    browser.find(f'{row} [data-test="message-link"]').click()
    browser.wait_for_text('{"order": 42}', "#message-body")
    assert browser.text("#message-id") == sent.msg_id
    assert browser.text("#message-topic") == topic
    browser.screenshot("message_view")
    assert browser.javascript_errors() == []


def test_a_dead_lettered_message_is_resent_and_consumed(browser, cluster, name):
    topic, group = name("Payments"), name("CG")
    dlq = f"%DLQ%{group}"
    cluster.create_topic(topic, 1)
    broken = True
    seen: list[ReceivedMessage] = []

    def listener(messages: list[ReceivedMessage]) -> bool:
        seen.extend(messages)
        return not broken

    consumer = sync.PushConsumer(
        group,
        cluster.namesrv_address,
        listener=listener,
        consume_from="first",
        max_reconsume_times=0,  # the first failure dead-letters it
    )
    consumer.subscribe(topic)
    with consumer:
        with sync.Producer(name("PG"), cluster.namesrv_address) as producer:
            sent = producer.send(Message(topic, b"payment-7"))

        browser.open("/dlq")
        link = f'[data-test="dlq-topic-link"][data-topic="{dlq}"]'
        browser.reload_until(lambda: browser.find_all(link), f"{dlq} among the dead-letter topics")
        browser.find(link).click()
        row = f'[data-test="dlq-message-row"][data-msg-id="{sent.msg_id}"]'
        browser.until(lambda: browser.find_all(row), f"message {sent.msg_id} in {dlq}")
        browser.screenshot("dlq")

        broken = False  # the listener is fixed: resend the dead letter to the group
        browser.find(f'{row} [data-test="dlq-resend-submit"]').click()
        browser.until(
            lambda: browser.find("#resend-result").get_attribute("data-result") == "CR_SUCCESS",
            "the group's consumer took the resent message",
        )
        browser.screenshot("dlq_resent")

    assert [(m.topic, m.body) for m in seen] == [(topic, b"payment-7"), (dlq, b"payment-7")]
    assert browser.javascript_errors() == []


def test_the_producers_page_lists_a_producer_online(browser, cluster, name):
    topic, group = name("Sent"), name("PG")
    cluster.create_topic(topic, 1)
    with sync.Producer(group, cluster.namesrv_address) as producer:
        producer.send(Message(topic, b"hello"))
        client_id = producer.async_client.instance.client_id
        browser.open("/producers")
        browser.type_into("#producers-group", group)
        browser.type_into("#producers-topic", topic)
        browser.submit("#producers-submit")
        row = f'[data-test="producer-row"][data-client-id="{client_id}"]'
        browser.reload_until(lambda: browser.find_all(row), f"producer {client_id} of {group}")
        assert browser.text("#producers-count").startswith("1 producer(s)")
        browser.screenshot("producers")
    assert browser.javascript_errors() == []


def test_the_live_charts_draw_the_brokers_tps_with_the_dashboards_own_plotly(
    browser, cluster, name
):
    topic = name("Live")
    cluster.create_topic(topic, 1)
    browser.open("/live")
    # plotly.js comes from the dashboard: this browser resolves no other host
    assert browser.until(lambda: browser.driver.execute_script("return !!window.Plotly"), "Plotly")
    with sync.Producer(name("PG"), cluster.namesrv_address) as producer:
        for number in range(50):
            producer.send(Message(topic, f"tick-{number}"))

    def in_tps_drawn() -> list[float] | None:
        """broker-a's In TPS as the chart has it, once sampled twice and above 0."""
        chart = browser.driver.execute_script(
            "return document.getElementById('chart-tps').data || []"
        )
        points = next((t["y"] for t in chart if t["name"] == "broker-a/0 in"), [])
        return points if len(points) >= 2 and max(points) > 0 else None

    browser.until(in_tps_drawn, "broker-a's In TPS above 0 on the chart, sampled twice")
    # and drawn: a line through the samples (an SVG path of more than one point), not only
    # the first sample with later ones in the data
    browser.until(
        lambda: any("L" in line for line in drawn_lines(browser, "chart-tps")),
        "the In/Out TPS lines drawn through two samples or more",
    )
    assert browser.find_all("#chart-tps .main-svg") and browser.find_all("#chart-lag .main-svg")
    assert browser.find("#live-error").get_attribute("hidden") is not None
    browser.screenshot("live")
    assert browser.javascript_errors() == []


def drawn_lines(browser: Browser, chart: str) -> list[str]:
    """The SVG paths (``d``) of the lines a Plotly chart has drawn."""
    return browser.driver.execute_script(
        "return [...document.querySelectorAll(arguments[0] + ' .scatterlayer path.js-line')]"
        ".map(path => path.getAttribute('d') || '')",
        f"#{chart}",
    )
