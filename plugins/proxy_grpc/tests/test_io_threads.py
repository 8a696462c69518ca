"""grpc's own threads at nice 15 while a proxy serves, and no other thread (io_threads.py)."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

import grpc
import pytest
from grpc_requests import metadata
from rocketmq_proxy_grpc.io_threads import (
    GRPC_THREAD_NAMES,
    NICE,
    RESCAN_S,
    GrpcThreadPriority,
    wanted_nice,
)
from rocketmq_proxy_grpc.server import GrpcProxy, ProxyThread
from rocketmq_proxy_grpc.v2 import definition_pb2 as pb
from rocketmq_proxy_grpc.v2 import service_pb2 as spb
from rocketmq_proxy_grpc.v2 import service_pb2_grpc

from tests.missing import missing


@pytest.fixture(autouse=True)
def linux():
    # nice values are a thread's own on Linux only, and only there does a proxy set them
    if not sys.platform.startswith("linux"):
        missing("per-thread nice values need Linux")


def grpc_thread_ids() -> list[int]:
    found = []
    for entry in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{entry}/comm", "rb") as comm:
                if comm.read().rstrip(b"\n") in GRPC_THREAD_NAMES:
                    found.append(int(entry))
        except OSError:  # gone meanwhile
            continue
    return found


def test_a_serving_proxy_lowers_grpcs_threads_and_no_other(cluster, monkeypatch):
    monkeypatch.delenv("ROCKETMQ_GRPC_THREAD_NICE", raising=False)
    base = os.getpriority(os.PRIO_PROCESS, 0)  # this thread's: what every thread starts at
    expected = max(base, NICE)  # only ever lowered: under a nicer parent they keep its value
    proxy = GrpcProxy(
        cluster.namesrv_address, host="127.0.0.1", port=0, advertised_host="127.0.0.1"
    )
    runner = ProxyThread(proxy)
    port = runner.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            answer = stub.QueryRoute(
                spb.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic")),
                metadata=metadata(),
                timeout=10,
            )
            assert answer.status.code == pb.TOPIC_NOT_FOUND
        # the proxy's own looks, once a second: every grpc thread ends up at ``expected``,
        # and this proxy has seen them (a proxy of an earlier test in this process may
        # have lowered them already: grpc's threads are the process's)
        deadline = time.monotonic() + 10 * RESCAN_S
        while time.monotonic() < deadline:
            found = {os.getpriority(os.PRIO_PROCESS, tid) for tid in grpc_thread_ids()}
            if found == {expected} and proxy.thread_priority.handled > 0:
                break
            time.sleep(0.05)
        assert found == {expected}
        assert proxy.thread_priority.handled > 0
        assert runner._thread is not None and runner._thread.native_id is not None
        assert os.getpriority(os.PRIO_PROCESS, runner._thread.native_id) == base  # its loop
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base
    finally:
        runner.stop()


@pytest.mark.parametrize(
    ("setting", "nice", "said"),
    [
        (None, NICE, ""),
        ("7", 7, ""),
        ("40", 19, ""),  # the lowest priority there is
        ("0", 0, ""),
        ("-5", 0, ""),  # a thread cannot be raised above the process: off
        ("low", NICE, "ROCKETMQ_GRPC_THREAD_NICE='low' is not a number: using 15"),
    ],
)
def test_the_nice_value_comes_from_the_environment(monkeypatch, caplog, setting, nice, said):
    if setting is None:
        monkeypatch.delenv("ROCKETMQ_GRPC_THREAD_NICE", raising=False)
    else:
        monkeypatch.setenv("ROCKETMQ_GRPC_THREAD_NICE", setting)
    with caplog.at_level(logging.WARNING, logger="rocketmq.proxy"):
        assert wanted_nice() == nice
        priority = GrpcThreadPriority()
    assert priority.enabled == (nice > 0)
    assert caplog.text.strip().endswith(said)
    if nice == 0:  # off: no thread is looked at
        assert priority.lower_new_threads() == 0 and priority.handled == 0
