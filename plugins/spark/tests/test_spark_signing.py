"""``accessKey`` and ``secretKey``: a batch write and a batch read sign every request the
broker receives for them (ACL.md §1), on the driver and in the workers."""

from __future__ import annotations

from pyspark.sql.datasource import CaseInsensitiveDict
from rocketmq_spark.options import sink_options, stream_source_options

from rocketmq_core.acl.signing import ACCESS_KEY, Credentials
from rocketmq_core.protocol.codes import RequestCode
from tests.signed_requests import assert_signed_by, recording

SPARK_ACCOUNT = Credentials("SparkUser", "spark-secret-1")
KEYS = {"accessKey": SPARK_ACCOUNT.access_key, "secretKey": SPARK_ACCOUNT.secret_key}


def test_a_signed_write_and_read_sign_every_request_for_the_topic(spark, cluster, topic):
    frame = spark.createDataFrame([(f"m{n}",) for n in range(8)], "body string")
    with recording(cluster.broker.server) as on_broker:
        writer = frame.write.format("rocketmq").option("nameServer", cluster.namesrv_address)
        for key, value in KEYS.items():
            writer = writer.option(key, value)
        writer.option("topic", topic).mode("append").save()
        reader = spark.read.format("rocketmq").option("nameServer", cluster.namesrv_address)
        for key, value in KEYS.items():
            reader = reader.option(key, value)
        rows = reader.option("subscribe", topic).load().collect()
    assert sorted(row.body for row in rows) == [f"m{n}".encode() for n in range(8)]
    # clients of earlier tests still heartbeat, unsigned: look at what names this topic
    for_topic = [r for r in on_broker.snapshot() if topic in r.ext_fields.values()]
    codes = {request.code for request in for_topic}
    assert RequestCode.PULL_MESSAGE in codes
    assert codes & {RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE}
    assert_signed_by(for_topic, SPARK_ACCOUNT)
    signed = [r for r in on_broker.snapshot() if r.ext_fields.get(ACCESS_KEY)]
    assert_signed_by(signed, SPARK_ACCOUNT)  # heartbeats and offset queries of ours too


def test_the_keys_reach_the_client_config_of_source_and_sink_and_stay_out_of_repr():
    given = CaseInsensitiveDict({"nameServer": "h:9876", "subscribe": "T", **KEYS})
    source = stream_source_options(given)
    sink = sink_options(given, streaming=False)
    for connection in (source.connection, sink.connection):
        assert connection.client_config().credentials == SPARK_ACCOUNT
    assert "spark-secret-1" not in repr(source) + repr(sink)
    assert "SparkUser" in repr(source)
