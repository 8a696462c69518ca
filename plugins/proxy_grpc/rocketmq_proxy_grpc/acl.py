"""ACL for the 5.x clients: their signed metadata checked against the accounts of
plain_acl.yml (the rules rocketmq_core.acl loads), as a broker with aclEnable checks
remoting requests (GRPC.md §2, §8; ACL.md for the rules).

The signature is lowercase hex HMAC-SHA1, keyed by the account's secret key, over the
``x-mq-date-time`` value; topics need PUB to send and SUB to receive, groups SUB."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping

from rocketmq_core.acl.addresses import peer_ip
from rocketmq_core.acl.permissions import PUB, SUB, describe_resource, retry_topic
from rocketmq_core.acl.rules import AclRules

from .metadata import RequestMetadata
from .status import Code, ProxyError


def signature(secret_key: str, date_time: str) -> str:
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def publish(topic: str) -> dict[str, int]:
    return {topic: PUB}


def consume(topic: str, group: str) -> dict[str, int]:
    return {topic: SUB, retry_topic(group): SUB}


class GrpcAclVerifier:
    """``verify(meta, peer, needed)`` returns when the caller may go on, else raises
    ProxyError UNAUTHORIZED (no or a bad signature) or FORBIDDEN (no permission)."""

    def __init__(self, rules: Callable[[], AclRules]) -> None:
        self.rules = rules  # the rules in force, which a watcher may replace

    def verify(self, meta: RequestMetadata, peer: str, needed: Mapping[str, int]) -> None:
        rules = self.rules()
        ip = peer_ip(peer)
        if any(pattern.matches(ip) for pattern in rules.global_white):
            return
        credential = meta.credential()
        if credential is None:
            raise ProxyError(
                Code.UNAUTHORIZED,
                "ACL is on: sign requests (set Credentials with an access key and secret key)",
            )
        access_key, signed = credential
        account = rules.accounts.get(access_key)
        if account is None:
            raise ProxyError(Code.UNAUTHORIZED, f"no ACL account for access key {access_key}")
        if account.white.matches(ip):
            return
        if not meta.date_time:
            raise ProxyError(Code.UNAUTHORIZED, "the signed request has no x-mq-date-time")
        expected = signature(account.secret_key, meta.date_time)
        if not hmac.compare_digest(expected, signed.lower()):
            raise ProxyError(
                Code.UNAUTHORIZED, f"signature check failed for access key {access_key}"
            )
        refused = account.grants.refused(dict(needed))
        if refused is not None:
            raise ProxyError(
                Code.FORBIDDEN,
                f"access key {access_key} has no permission for {describe_resource(refused)}",
            )
