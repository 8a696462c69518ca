"""auto_renew (push consumers): the proxy keeps a received message invisible until the
client acks it, with the handle the client received."""

from __future__ import annotations

import time

import grpc
from grpc_requests import message, metadata, receive, resource
from rocketmq_proxy_grpc.server import GrpcProxy, ProxyThread
from rocketmq_proxy_grpc.v2 import definition_pb2 as pb
from rocketmq_proxy_grpc.v2 import service_pb2 as spb
from rocketmq_proxy_grpc.v2 import service_pb2_grpc


def test_a_message_stays_invisible_while_renewed_and_the_first_handle_acks_it(cluster):
    runner = ProxyThread(
        GrpcProxy(cluster.namesrv_address, host="127.0.0.1", port=0, advertised_host="127.0.0.1")
    )
    port = runner.start()
    try:
        consuming = runner.proxy.service.consuming
        consuming.auto_renew_invisible_ms = 3000  # renewed every two seconds or so
        cluster.create_topic("GrpcRenew", queues=1)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            sent = stub.SendMessage(
                spb.SendMessageRequest(messages=[message("GrpcRenew", b"renew me")]),
                metadata=metadata(),
            )
            assert sent.status.code == pb.OK
            responses = receive(stub, "GrpcRenew", "GID-renew", port, auto_renew=True)
            (received,) = [r.message for r in responses if r.WhichOneof("content") == "message"]
            handle = received.system_properties.receipt_handle

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
    finally:
        runner.stop()
