"""auto_renew (push consumers): the proxy keeps a received message invisible until the
client acks it, with the handle the client received."""

from __future__ import annotations

import asyncio
import contextlib
import time

import anyio
import grpc
from grpc_requests import message, metadata, receive, resource
from rocketmq_proxy_grpc.server import GrpcProxy, ProxyThread
from rocketmq_proxy_grpc.v2 import definition_pb2 as pb
from rocketmq_proxy_grpc.v2 import service_pb2 as spb
from rocketmq_proxy_grpc.v2 import service_pb2_grpc


@contextlib.contextmanager
def auto_renewed_message(cluster, topic: str, group: str, body: bytes):
    """A proxy renewing every 3 s, and a message of ``topic`` that ``group`` received
    with auto_renew: (its consuming, a stub, the proxy's port, the receipt handle)."""
    runner = ProxyThread(
        GrpcProxy(cluster.namesrv_address, host="127.0.0.1", port=0, advertised_host="127.0.0.1")
    )
    port = runner.start()
    try:
        consuming = runner.proxy.service.consuming
        consuming.auto_renew_invisible_ms = 3000  # renewed every two seconds or so
        cluster.create_topic(topic, queues=1)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            sent = stub.SendMessage(
                spb.SendMessageRequest(messages=[message(topic, body)]), metadata=metadata()
            )
            assert sent.status.code == pb.OK
            responses = receive(stub, topic, group, port, auto_renew=True)
            (received,) = [r.message for r in responses if r.WhichOneof("content") == "message"]
            yield runner, consuming, stub, port, received.system_properties.receipt_handle
    finally:
        runner.stop()


def test_a_message_stays_invisible_while_renewed_and_the_first_handle_acks_it(cluster):
    with auto_renewed_message(cluster, "GrpcRenew", "GID-renew", b"renew me") as (
        _runner,
        consuming,
        stub,
        port,
        handle,
    ):
        time.sleep(8)  # well past the 3 s it was first made invisible for
        assert consuming.renewals.current(handle) != handle  # renewed
        again = receive(stub, "GrpcRenew", "GID-renew", port)
        assert [r.status.code for r in again] == [pb.MESSAGE_NOT_FOUND]

        acked = stub.AckMessage(
            spb.AckMessageRequest(
                group=resource("GID-renew"),
                topic=resource("GrpcRenew"),
                entries=[spb.AckMessageEntry(message_id="m", receipt_handle=handle)],
            ),
            metadata=metadata(),
        )
        assert acked.status.code == pb.OK, acked.status.message
        assert len(consuming.renewals) == 0


def test_a_renewal_waits_for_an_ack_under_way_and_then_renews_nothing(cluster):
    """The client's ack and a renewal of the same handle never overlap: a renewal that
    came due while the ack was using the handle waits, then finds it acked and makes no
    checkpoint (one made meanwhile would outlive the ack, and the message come back)."""
    with auto_renewed_message(cluster, "GrpcRenewRace", "GID-race", b"race me") as (
        runner,
        consuming,
        stub,
        port,
        handle,
    ):
        renewals = consuming.renewals

        async def ack_while_a_renewal_comes_due() -> tuple[str, str]:
            with anyio.fail_after(10):
                async with anyio.create_task_group() as renewing:
                    async with renewals.settled(handle) as current:
                        due = int(time.time() * 1000) + 60_000
                        renewing.start_soon(renewals.renew_due, due)
                        await anyio.sleep(0.3)  # the renewal is due, and waits
                        during = renewals.current(handle)
                        await consuming._ack_one("GID-race", "GrpcRenewRace", current)
                        renewals.forget(handle)
                    # let go of: the renewal goes on, and finds the handle acked
            return during, renewals.current(handle)

        assert runner._loop is not None
        during, after = asyncio.run_coroutine_threadsafe(
            ack_while_a_renewal_comes_due(), runner._loop
        ).result(30)
        assert during == handle and after == handle and len(renewals) == 0
        time.sleep(4)  # past the 3 s a renewal's checkpoint would have hidden it for
        again = receive(stub, "GrpcRenewRace", "GID-race", port)
        assert [r.status.code for r in again] == [pb.MESSAGE_NOT_FOUND]
