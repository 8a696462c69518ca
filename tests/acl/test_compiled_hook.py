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
from rocketmq_core.acl.addresses import peer_ip
from rocketmq_core.acl.guard import AclGuard
from rocketmq_core.acl.permissions import BROKER_ADMIN_CODES
from rocketmq_core.acl.resources import DECIDING_FIELDS
from rocketmq_core.acl.rules import AccountConfig, AclConfigError, AclFile, build_rules
from rocketmq_core.acl.service import AclService
from rocketmq_core.acl.signing import UNIQUE_KEY_QUERY, Credentials, sign
from rocketmq_core.acl.validator import AclDenied, AclValidator
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


def plain_acl_file(tmp_path: Path) -> Path:
    """Where a server whose home is under ``tmp_path`` reads its rules (not yet written)."""
    conf = tmp_path / "home" / "conf"
    conf.mkdir(parents=True)
    return conf / "plain_acl.yml"


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
SIGNING = st.sampled_from(
    [
        "right",
        "wrong secret",
        "tampered body",
        "tampered value",  # a deciding value changed after signing
        "tampered version",  # 399 <-> 479: the unique-key field signed or not
        "tampered unique key",  # signed by new clients, not by old ones
        "unsigned",
        "no signature",
    ]
)


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
        if how == "tampered body":
            request.body = (request.body or b"") + b"!"
        elif how == "tampered value":
            request.ext_fields[names[0]] = request.ext_fields.get(names[0], "") + "!"
        elif how == "tampered version":
            request.version = 479 if version == 399 else 399
        elif how == "tampered unique key":
            request.ext_fields[UNIQUE_KEY_QUERY] = "false"
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


def signed_send(**changes_before_signing):
    request = RemotingCommand.request(
        R.SEND_MESSAGE_V2, {"a": "PG", "b": "Orders", UNIQUE_KEY_QUERY: "true"}, b"x"
    )
    for name, value in changes_before_signing.items():
        setattr(request, name, value)
    sign(request, Credentials("plain-key", ACCOUNTS["plain-key"]))
    return request


@pytest.fixture
def warmed():
    """A validator whose verdict on signed_send() is kept as allowed, and its hook, whose
    check records what it is asked."""
    validator = AclValidator(rules("PUB", "SUB", []), admin_codes=BROKER_ADMIN_CODES)
    asked = []

    def check(_ctx, request):
        asked.append(request)
        return UNDECIDED

    hook = validator.compiled_hook(check)
    assert hook is not None
    usual = signed_send()
    assert hook(context(), usual) is UNDECIDED  # the first meeting: no verdict kept yet
    assert AclGuard(lambda: validator).check(context(), usual) is None
    assert hook(context(), signed_send()) is None  # now kept: passed without asking
    asked.clear()
    return validator, hook, asked


def test_what_changed_after_signing_goes_to_the_python_check(warmed):
    validator, hook, asked = warmed
    tampered = []
    request = signed_send()
    request.body = b"y"
    tampered.append(request)
    request = signed_send()
    request.ext_fields["a"] = "PG2"  # a deciding value (the group) allowed as well
    tampered.append(request)
    request = signed_send()
    request.version = 399  # signed with the unique-key field: an old client does not
    tampered.append(request)
    request = signed_send(version=399)
    request.version = 479  # signed without it: this version signs it
    tampered.append(request)
    request = signed_send()
    request.ext_fields[UNIQUE_KEY_QUERY] = "false"  # signed by this version
    tampered.append(request)
    request = signed_send()
    request.ext_fields["AccessKey"] = "elsewhere"  # another account, no white list here
    tampered.append(request)
    for request in tampered:
        assert hook(context(), request) is UNDECIDED
        with pytest.raises(AclDenied, match="Check signature failed"):
            validator.check(peer_ip(PEER_ADDRESS), request)
    assert asked == tampered
    # an old client's unique-key field is not signed: changing it keeps the signature
    old_client = signed_send(version=399)
    old_client.ext_fields[UNIQUE_KEY_QUERY] = "false"
    validator.check(peer_ip(PEER_ADDRESS), old_client)


class OddCode(int):
    """An int that hashes like another: the hook must not look it up."""

    def __hash__(self):
        return 1


def test_requests_of_unusual_types_go_to_the_python_check(warmed):
    _validator, hook, asked = warmed
    odd = []
    request = signed_send()
    request.body = bytearray(request.body)  # the same bytes in another buffer
    odd.append(request)
    request = signed_send()
    request.version = 1 << 70  # beyond a C long: signed as 479 is
    odd.append(request)
    odd.append(signed_send(code=OddCode(R.SEND_MESSAGE_V2)))
    request = signed_send()
    request.ext_fields["AccessKey"] = type("Key", (str,), {})("plain-key")  # a str subclass
    odd.append(request)
    request = signed_send()
    request.ext_fields[7] = "7"  # a key that is not a str
    odd.append(request)
    for request in odd:
        assert hook(context(), request) is UNDECIDED
    assert asked == odd


def test_the_guard_takes_each_new_set_of_rules(tmp_path):
    acl_file = plain_acl_file(tmp_path)
    home = acl_file.parent.parent
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


def test_a_reload_never_keeps_the_old_rules_hook(tmp_path):
    acl_file = plain_acl_file(tmp_path)
    home = acl_file.parent.parent
    acl_file.write_text(
        "accounts:\n  - accessKey: plain-key\n    secretKey: plain-secret\n"
        "    defaultTopicPerm: PUB\n"
    )
    service = AclService.for_broker(home)
    service.load()
    old_hook = service.guard.before_request
    assert old_hook != service.guard.check  # compiled
    # rules whose only account is white-listed: nothing for the compiled hook
    acl_file.write_text(
        "accounts:\n  - accessKey: plain-key\n    secretKey: plain-secret\n"
        "    whiteRemoteAddress: 10.1.1.*\n"
    )
    service.load()
    assert service.guard.before_request == service.guard.check


def test_a_secret_no_request_can_carry_is_refused_by_name(tmp_path):
    acl_file = plain_acl_file(tmp_path)
    acl_file.write_text('accounts:\n  - accessKey: plain-key\n    secretKey: "bad-secret\\ud800"\n')
    service = AclService.for_broker(acl_file.parent.parent)
    with pytest.raises(AclConfigError, match=r"accessKey plain-key.*secretKey holds text"):
        service.load()


def test_the_name_server_guard_stays_in_python(tmp_path):
    acl_file = plain_acl_file(tmp_path)
    acl_file.write_text(
        "accounts:\n  - accessKey: plain-key\n    secretKey: plain-secret\n    admin: true\n"
    )
    service = AclService.for_namesrv(acl_file.parent.parent)
    service.load()
    assert service.guard.before_request == service.guard.check
