"""The validation order and Java's refusal texts (ACL.md §4), on the worked example."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_core.acl import validator as validator_module
from rocketmq_core.acl.addresses import peer_ip
from rocketmq_core.acl.permissions import BROKER_ADMIN_CODES
from rocketmq_core.acl.resources import DECIDING_FIELDS
from rocketmq_core.acl.rules import AccountConfig, AclFile, build_rules
from rocketmq_core.acl.signing import Credentials, sign
from rocketmq_core.acl.validator import AclDenied, AclValidator
from rocketmq_core.protocol.codes import RequestCode as R
from rocketmq_core.protocol.command import RemotingCommand

PEER = peer_ip("10.1.1.1:40000")
# the worked example of docs/spec/ACL.md: a C++-style SEND_MESSAGE signed with 12345678
WORKED_FIELDS = {
    "AccessKey": "RocketMQ",
    "OnsChannel": "ALIYUN",
    "batch": "0",
    "bornTimestamp": "1700000000000",
    "defaultTopic": "TBW102",
    "defaultTopicQueueNums": "4",
    "flag": "0",
    "producerGroup": "PG_demo",
    "properties": "TAGS\x01TagA\x02",
    "queueId": "0",
    "reconsumeTimes": "0",
    "sysFlag": "0",
    "topic": "TopicTest",
    "unitMode": "0",
    "Signature": "eBQV3M2fG2r723N6TEve9zuZC/g=",
}


def validator(*accounts, whites=()):
    acl_file = AclFile(Path("plain_acl.yml"), list(whites), list(accounts))
    return AclValidator(build_rules(Path("."), [acl_file]), admin_codes=BROKER_ADMIN_CODES)


def account(**options):
    return AccountConfig("RocketMQ", "12345678", **options)


def worked_request():
    return RemotingCommand.request(R.SEND_MESSAGE, dict(WORKED_FIELDS), b"Hello RocketMQ")


def refusal(check, request):
    with pytest.raises(AclDenied) as raised:
        check.check(PEER, request)
    return str(raised.value)


def test_worked_example_passes():
    validator(account(default_topic_perm="PUB")).check(PEER, worked_request())


def test_worked_example_without_pub_is_refused_by_topic():
    check = validator(account(default_topic_perm="SUB"))
    assert refusal(check, worked_request()) == "No default permission for topic:TopicTest"


def test_order_of_the_checks():
    check = validator(account(default_topic_perm="PUB"))
    unsigned = RemotingCommand.request(R.SEND_MESSAGE, {"topic": "T"})
    assert refusal(check, unsigned) == "No accessKey is configured"
    stranger = worked_request()
    stranger.ext_fields["AccessKey"] = ""  # C++ without credentials
    assert refusal(check, stranger) == "No acl config for "
    tampered = worked_request()
    tampered.body = b"Hello RocketMQ!"
    assert refusal(check, tampered) == "Check signature failed for accessKey=RocketMQ"


def test_white_lists_skip_signature_and_perms():
    unsigned = RemotingCommand.request(R.SEND_MESSAGE, {"topic": "T", "AccessKey": "RocketMQ"})
    validator(account(white_remote_address="10.1.1.*")).check(PEER, unsigned)
    anonymous = RemotingCommand.request(R.UPDATE_AND_CREATE_TOPIC, {"topic": "T"})
    validator(account(), whites=["10.1.*.*"]).check(PEER, anonymous)
    with pytest.raises(AclDenied):
        validator(account(white_remote_address="10.2.1.*")).check(PEER, unsigned)


def test_admin_codes_need_admin():
    request = RemotingCommand.request(R.UPDATE_AND_CREATE_TOPIC, {"topic": "T"})
    sign(request, Credentials("RocketMQ", "12345678"))
    assert refusal(validator(account()), request) == (
        "Need admin permission for request code=17, but accessKey=RocketMQ is not"
    )
    validator(account(admin=True)).check(PEER, request)


def test_trace_topic_needs_only_the_signature():
    request = RemotingCommand.request(R.SEND_MESSAGE_V2, {"a": "PG", "b": "RMQ_SYS_TRACE_TOPIC"})
    sign(request, Credentials("RocketMQ", "12345678"))
    validator(account(default_topic_perm="DENY")).check(PEER, request)


def test_unreadable_body_is_a_refusal():
    request = RemotingCommand.request(R.HEART_BEAT, {}, b"{oops")
    sign(request, Credentials("RocketMQ", "12345678"))
    assert "heartbeat body is not JSON" in refusal(validator(account()), request)


def signed_send(topic, access_key="RocketMQ", secret="12345678", body=b"payload"):
    request = RemotingCommand.request(
        R.SEND_MESSAGE_V2, {"a": "PG", "b": topic, "c": "TBW102"}, body
    )
    sign(request, Credentials(access_key, secret))
    return request


def test_a_kept_verdict_still_checks_every_signature_and_each_account_alone():
    check = validator(
        account(default_topic_perm="DENY", topic_perms=["Orders=PUB"]),
        AccountConfig("Reader01", "reader-secret", default_topic_perm="SUB"),
    )
    for _ in range(3):  # the first decides, the others find its verdict
        check.check(PEER, signed_send("Orders"))
        assert refusal(check, signed_send("Refunds")) == "No default permission for topic:Refunds"
    tampered = signed_send("Orders")
    tampered.body = b"payload!"
    assert refusal(check, tampered) == "Check signature failed for accessKey=RocketMQ"
    other_account = signed_send("Orders", "Reader01", "reader-secret")
    assert refusal(check, other_account) == "No default permission for topic:Orders"
    # a new set of rules is a new validator: nothing decided before carries over
    changed = validator(account(default_topic_perm="DENY", topic_perms=["Orders=SUB"]))
    assert refusal(changed, signed_send("Orders")) == "No default permission for topic:Orders"


def test_a_full_verdict_store_starts_afresh_and_long_names_are_never_kept(monkeypatch):
    monkeypatch.setattr(validator_module, "MOST_VERDICTS", 2)
    check = validator(account(default_topic_perm="DENY", topic_perms=["T3=PUB"]))
    for topic in ("T1", "T2", "T3", "T4"):
        for _ in range(2):
            if topic == "T3":
                check.check(PEER, signed_send(topic))
            else:
                assert (
                    refusal(check, signed_send(topic)) == f"No default permission for topic:{topic}"
                )
    assert len(check._verdicts) <= 2
    check._verdicts.clear()
    long_topic = "T" * (validator_module.LONGEST_KEPT_VALUE + 1)
    assert refusal(check, signed_send(long_topic)).endswith(f"topic:{long_topic}")
    assert not check._verdicts


VALUES = st.sampled_from([None, "", "Orders", "%RETRY%CG", "%DLQ%CG", "RMQ_SYS_TRACE_TOPIC", "CG"])
PERMS = st.sampled_from(["PUB", "SUB", "PUB|SUB", "DENY"])


@settings(max_examples=60, deadline=None)
@given(
    default_topic=PERMS,
    default_group=PERMS,
    topic_perms=st.dictionaries(st.sampled_from(["Orders", "%DLQ%CG"]), PERMS, max_size=2),
    group_perms=st.dictionaries(st.sampled_from(["CG", "PG"]), PERMS, max_size=2),
    admin=st.booleans(),
    requests=st.lists(
        st.tuples(st.sampled_from(sorted(DECIDING_FIELDS)), VALUES, VALUES), min_size=1, max_size=12
    ),
)
def test_a_kept_verdict_is_the_one_a_fresh_validator_gives(
    default_topic, default_group, topic_perms, group_perms, admin, requests
):
    rules = account(
        default_topic_perm=default_topic,
        default_group_perm=default_group,
        topic_perms=[f"{name}={perm}" for name, perm in topic_perms.items()],
        group_perms=[f"{name}={perm}" for name, perm in group_perms.items()],
        admin=admin,
    )
    warmed = validator(rules)

    def outcome(check, request):
        try:
            check.check(PEER, request)
        except AclDenied as denied:
            return str(denied)
        return "allowed"

    def make(code, first, second):
        names = DECIDING_FIELDS[code]
        fields = {
            name: value
            for name, value in zip(names, (first, second), strict=False)
            if value is not None
        }
        request = RemotingCommand.request(code, fields, b"body")
        sign(request, Credentials("RocketMQ", "12345678"))
        return request

    for _ in range(2):  # the second pass answers from the kept verdicts
        for code, first, second in requests:
            fresh = validator(rules)
            assert outcome(warmed, make(code, first, second)) == outcome(
                fresh, make(code, first, second)
            )
