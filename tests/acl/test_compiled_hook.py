"""The compiled ACL hook (``AclValidator.compiled_hook``, _signature.c's before_request):
it may only pass a request the validator's whole check passes, and it must pass the busy
ones (signed right, a verdict kept as allowed) without asking the Python check; every
other request goes on to that check. The guard takes a new hook with each set of rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_core.acl import signing
from rocketmq_core.acl.guard import AclGuard
from rocketmq_core.acl.permissions import BROKER_ADMIN_CODES
from rocketmq_core.acl.resources import DECIDING_FIELDS
from rocketmq_core.acl.rules import AccountConfig, AclFile, build_rules
from rocketmq_core.acl.service import AclService
from rocketmq_core.acl.signing import UNIQUE_KEY_QUERY, Credentials, sign
from rocketmq_core.acl.validator import AclValidator
from rocketmq_core.protocol.codes import RequestCode as R
from rocketmq_core.protocol.codes import ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.processor import RequestContext
from tests.acl.test_signing import compiled_helper

PEER_ADDRESS = "10.1.1.1:40000"
UNDECIDED = RemotingCommand.request(R.HEART_BEAT)  # what the stand-in check answers
ACCOUNTS = {
    "plain-key": "plain-secret",  # no white list: the hook decides its busy requests
    "white-key": "white-secret",  # white-listed here: always the Python check's
    "elsewhere": "elsewhere-secret",  # a white list this peer is not in
}


@pytest.fixture(autouse=True)
def with_helper(monkeypatch):
    monkeypatch.setattr(signing, "COMPILED", compiled_helper())


def context() -> RequestContext:
    return RequestContext(connection=None, peer_address=PEER_ADDRESS, local_address="x:1")


def rules(topic_perm: str, group_perm: str, global_white: list[str]):
    accounts = [
        AccountConfig(
            "plain-key",
            ACCOUNTS["plain-key"],
            default_topic_perm="DENY",
            topic_perms=[f"Orders={topic_perm}"],
            group_perms=[f"CG={group_perm}"],
        ),
        AccountConfig("white-key", ACCOUNTS["white-key"], white_remote_address="10.1.1.*"),
        AccountConfig(
            "elsewhere", ACCOUNTS["elsewhere"], white_remote_address="10.9.*.*", admin=True
        ),
    ]
    return build_rules(Path("."), [AclFile(Path("plain_acl.yml"), global_white, accounts)])


CODES = st.sampled_from(
    [*sorted(DECIDING_FIELDS), R.UPDATE_AND_CREATE_TOPIC, R.HEART_BEAT, R.GET_MAX_OFFSET]
)
VALUES = st.sampled_from([None, "", "Orders", "Refunds", "CG", "%RETRY%CG", "T" * 300])
SIGNING = st.sampled_from(["right", "wrong secret", "tampered", "unsigned", "no signature"])


@st.composite
def requests(draw):
    code = draw(CODES)
    names = DECIDING_FIELDS.get(code, ("topic", "group"))
    fields = {
        name: value
        for name, value in zip(names, (draw(VALUES), draw(VALUES)), strict=False)
        if value is not None
    }
    version = draw(st.sampled_from([399, 479]))
    if draw(st.booleans()):
        fields[UNIQUE_KEY_QUERY] = "true"  # left out of old clients' signatures
    request = RemotingCommand.request(
        draw(st.sampled_from([code, int(code)])),  # a decoded request's code is an int
        fields,
        draw(st.sampled_from([b"", b"body", None])),
    )
    request.version = version
    access_key = draw(st.sampled_from([*ACCOUNTS, "stranger"]))
    how = draw(SIGNING)
    if how != "unsigned":
        secret = ACCOUNTS.get(access_key, "anything")
        sign(request, Credentials(access_key, secret if how != "wrong secret" else secret + "!"))
        if how == "tampered":
            request.body = (request.body or b"") + b"!"
        elif how == "no signature":
            del request.ext_fields["Signature"]
    return request, access_key, how


@settings(max_examples=80, deadline=None)
@given(
    topic_perm=st.sampled_from(["PUB", "SUB", "PUB|SUB", "DENY"]),
    group_perm=st.sampled_from(["PUB", "SUB", "DENY"]),
    global_white=st.sampled_from([[], ["10.9.9.9"], ["10.1.1.1"]]),
    drawn=st.lists(requests(), min_size=1, max_size=10),
)
def test_the_hook_passes_only_what_the_whole_check_passes(
    topic_perm, group_perm, global_white, drawn
):
    validator = AclValidator(
        rules(topic_perm, group_perm, global_white), admin_codes=BROKER_ADMIN_CODES
    )
    guard = AclGuard(lambda: validator)
    hook = validator.compiled_hook(lambda _ctx, _request: UNDECIDED)
    assert hook is not None
    allowed_before = set()
    for round_number in range(2):  # the second round meets the verdicts the first kept
        for request, access_key, how in drawn:
            reference = guard.check(context(), request)
            compiled = hook(context(), request)
            assert compiled is None or compiled is UNDECIDED
            if compiled is None:  # passed by the hook: the whole check passes it too
                assert reference is None
            decidable = (
                access_key == "plain-key"
                and how == "right"
                and request.code in DECIDING_FIELDS
                and all(len(value) <= 255 for value in request.ext_fields.values())
            )
            key = (id(request), access_key)
            if round_number == 1 and decidable and key in allowed_before and not global_white:
                assert compiled is None, "a busy request with an allowed verdict was not passed"
            if reference is None:
                allowed_before.add(key)


def test_unusual_requests_go_to_the_python_check():
    validator = AclValidator(rules("PUB", "SUB", []), admin_codes=BROKER_ADMIN_CODES)
    asked = []

    def check(_ctx, request):
        asked.append(request)
        return UNDECIDED

    hook = validator.compiled_hook(check)
    assert hook is not None

    def made(**changes):
        request = RemotingCommand.request(R.SEND_MESSAGE_V2, {"a": "PG", "b": "Orders"}, b"x")
        sign(request, Credentials("plain-key", ACCOUNTS["plain-key"]))
        for name, value in changes.items():
            setattr(request, name, value)
        return request

    usual = made()
    assert hook(context(), usual) is UNDECIDED  # the first meeting: no verdict kept yet
    AclGuard(lambda: validator).check(context(), usual)
    assert hook(context(), made()) is None  # now kept: passed without asking
    asked.clear()
    odd = [
        made(body=bytearray(b"x")),  # a body in another buffer
        made(version=1 << 70),  # a version beyond a C long
        made(code=str(R.SEND_MESSAGE_V2)),  # not an int
    ]
    with_int_value = made()
    with_int_value.ext_fields["b"] = 7
    odd.append(with_int_value)
    non_ascii = made()
    non_ascii.ext_fields["Signature"] = "é" * 28
    odd.append(non_ascii)
    for request in odd:
        assert hook(context(), request) is UNDECIDED
    assert asked == odd


def test_the_guard_takes_each_new_set_of_rules(tmp_path):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    acl_file = home / "conf" / "plain_acl.yml"
    granted = (
        "accounts:\n  - accessKey: plain-key\n    secretKey: plain-secret\n"
        "    defaultTopicPerm: DENY\n    topicPerms: [Orders=PUB]\n"
    )
    acl_file.write_text(granted)
    service = AclService.for_broker(home)
    service.load()
    request = RemotingCommand.request(R.SEND_MESSAGE_V2, {"a": "PG", "b": "Orders"}, b"x")
    sign(request, Credentials("plain-key", "plain-secret"))
    for _ in range(2):  # decided, then passed from the kept verdict
        assert service.guard.before_request(context(), request) is None
    acl_file.write_text(granted.replace("Orders=PUB", "Orders=SUB"))
    service.load()
    refused = service.guard.before_request(context(), request)
    assert refused is not None and refused.code == ResponseCode.SYSTEM_ERROR
    assert "No default permission for topic:Orders" in refused.remark


def test_without_the_helper_the_guard_checks_in_python(monkeypatch, tmp_path):
    monkeypatch.setattr(signing, "COMPILED", None)
    validator = AclValidator(rules("PUB", "SUB", []), admin_codes=BROKER_ADMIN_CODES)
    assert validator.compiled_hook(lambda _ctx, _request: None) is None
    guard = AclGuard(lambda: validator)
    guard.use(validator)
    assert guard.before_request == guard.check
