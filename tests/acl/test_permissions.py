"""Permission bits, their text, the check, and the 4.9 admin rule (ACL.md §2.3)."""

from __future__ import annotations

import pytest

from rocketmq_core.acl.permissions import (
    ANY,
    DENY,
    PUB,
    SUB,
    Grants,
    describe_resource,
    parse_perm,
    perm_allows,
)


@pytest.mark.parametrize(
    ("text", "bits"),
    [
        ("PUB", PUB),
        ("SUB", SUB),
        (" PUB|SUB ", PUB | SUB),
        ("SUB|PUB", PUB | SUB),
        ("DENY", DENY),
        ("ANY", DENY),  # not one of the five strings
        ("pub", DENY),
        ("", DENY),
        (None, DENY),
    ],
)
def test_parse_perm(text, bits):
    assert parse_perm(text) == bits


@pytest.mark.parametrize(
    ("needed", "owned", "allowed"),
    [
        (PUB, PUB, True),
        (PUB, SUB, False),
        (SUB, PUB | SUB, True),
        (PUB, PUB | DENY, False),  # DENY refuses whatever else is owned
        (ANY, SUB, True),
        (ANY, PUB, True),
        (ANY, DENY, False),
    ],
)
def test_perm_allows(needed, owned, allowed):
    assert perm_allows(needed, owned) is allowed


def test_explicit_entry_replaces_the_default():
    grants = Grants(default_topic=PUB | SUB, default_group=SUB, explicit={"Secret": DENY})
    assert grants.refused({"Secret": SUB}) == "Secret"
    assert grants.refused({"Other": PUB, "%RETRY%CG": SUB}) is None
    assert grants.refused({"%RETRY%CG": PUB}) == "%RETRY%CG"  # groups use defaultGroupPerm
    assert grants.refused({"%DLQ%CG": PUB}) is None  # a DLQ topic is an ordinary topic


def test_admin_without_perms_skips_resource_checks():
    assert Grants(admin=True).refused({"Anything": PUB, "%RETRY%G": SUB}) is None


def test_admin_with_perms_is_checked_like_anyone():
    grants = Grants(admin=True, explicit={"Orders": PUB})
    assert grants.refused({"Orders": PUB}) is None
    assert grants.refused({"Other": PUB}) == "Other"


def test_describe_resource():
    assert describe_resource("Orders") == "topic:Orders"
    assert describe_resource("%RETRY%CG") == "group:CG"
