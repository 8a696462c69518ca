"""Permission bits, their text in plain_acl.yml, and the check (docs/spec/ACL.md §2.3).

Admin accounts follow the 4.9 rule: an admin account with no topicPerms and no
groupPerms skips every resource check; one that lists any is checked like any other
account. (5.1.1+ lets every admin skip; we keep the rule the 4.9 brokers our users
run today apply, so a file behaves the same on either broker.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..protocol.codes import RequestCode
from ..protocol.constants import RETRY_GROUP_TOPIC_PREFIX

DENY = 1
ANY = 2
PUB = 4
SUB = 8

PERM_BY_TEXT = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}

# requests only an account with admin: true may send to a broker: Java's ADMIN_CODE, plus
# (stricter than Java 4.9, ACL.md §2.3) the ACL changes and reads of secrets, and every
# request that moves a group's offsets
BROKER_ADMIN_CODES = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_AND_CREATE_TOPIC_LIST,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
        RequestCode.DELETE_ACL_CONFIG,
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
        RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,  # answers every secretKey in clear
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        RequestCode.RESET_CONSUMER_OFFSET_IN_BROKER,
        RequestCode.CLONE_GROUP_OFFSET,
    }
)


def parse_perm(text: object) -> int:
    """A perm string as bits; anything but the five known strings (``ANY`` too) is DENY."""
    if not isinstance(text, str):
        return DENY
    return PERM_BY_TEXT.get(text.strip(), DENY)


def is_known_perm(text: str) -> bool:
    return text.strip() in PERM_BY_TEXT


def perm_allows(needed: int, owned: int) -> bool:
    """Whether ``owned`` grants ``needed``: DENY refuses all; ANY asks for PUB or SUB."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def retry_topic(group: str) -> str:
    """Where a group's permission is kept: its retry topic."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def is_group_resource(resource: str) -> bool:
    return resource.startswith(RETRY_GROUP_TOPIC_PREFIX)


def describe_resource(resource: str) -> str:
    """``topic:T`` or ``group:G``, as the refusal names a resource."""
    if is_group_resource(resource):
        return "group:" + resource[len(RETRY_GROUP_TOPIC_PREFIX) :]
    return "topic:" + resource


@dataclass(frozen=True)
class Grants:
    """What one account owns: explicit perms by resource (groups under %RETRY%<group>),
    else the default for topics or for groups."""

    default_topic: int = DENY
    default_group: int = DENY
    explicit: Mapping[str, int] = field(default_factory=dict)
    admin: bool = False

    def owned(self, resource: str) -> int:
        perm = self.explicit.get(resource)
        if perm is not None:  # an explicit entry replaces the default entirely
            return perm
        return self.default_group if is_group_resource(resource) else self.default_topic

    def refused(self, needed: Mapping[str, int]) -> str | None:
        """The first resource of ``needed`` these grants refuse, or None."""
        if self.admin and not self.explicit:
            return None  # the 4.9 admin rule (module docstring)
        for resource, perm in needed.items():
            if not perm_allows(perm, self.owned(resource)):
                return resource
        return None
