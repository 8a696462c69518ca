"""The check of one request against the rules, in Java's order (docs/spec/ACL.md §4).

``AclValidator.check`` raises AclDenied with the message the Java broker gives, so a
client that shows or matches the text sees the same. Resources are worked out only
once the signature has passed: a white-listed peer costs no header or body decoding.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from ..errors import ProtocolError, RocketMQError
from ..protocol.command import RemotingCommand
from ..protocol.constants import TRACE_TOPIC
from .addresses import IPAddress
from .permissions import PUB, describe_resource
from .resources import Needed, needed_resources
from .rules import AclRules
from .signing import ACCESS_KEY, signature_matches

# what a refusal names as the place it was raised (Java names a stack frame)
WHERE = __name__
JAVA_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"


class AclDenied(RocketMQError):
    """A request the rules refuse; the message is the Java broker's text."""

    @property
    def remark(self) -> str:
        """The response remark, as Java writes it: exception, message, where."""
        return f"{JAVA_EXCEPTION}: {self}, {WHERE}"


def _no_resources(_request: RemotingCommand) -> Needed:
    return {}


class AclValidator:
    """Checks requests against one set of rules.

    ``admin_codes``: codes that need ``admin: true``; ``resources``: what a request
    needs (None: nothing beyond the signature and the admin flag).
    """

    __slots__ = ("_accounts", "_admin_codes", "_global_white", "_resources", "rules")

    def __init__(
        self,
        rules: AclRules,
        *,
        admin_codes: Collection[int],
        resources: Callable[[RemotingCommand], Needed] | None = needed_resources,
    ) -> None:
        self.rules = rules
        self._global_white = tuple(pattern.matches for pattern in rules.global_white)
        self._accounts = rules.accounts
        self._admin_codes = frozenset(admin_codes)
        self._resources = resources or _no_resources

    def check(self, peer: IPAddress | None, request: RemotingCommand) -> None:
        """Return when ``request`` from ``peer`` may be served; raise AclDenied if not."""
        for matches in self._global_white:
            if matches(peer):
                return
        access_key = request.ext_fields.get(ACCESS_KEY)
        if access_key is None:
            raise AclDenied("No accessKey is configured")
        account = self._accounts.get(access_key)
        if account is None:
            raise AclDenied(f"No acl config for {access_key}")
        if account.white.matches(peer):
            return  # the account's own white list skips the signature and the perms
        if not signature_matches(request, account.secret_key):
            raise AclDenied(f"Check signature failed for accessKey={access_key}")
        grants = account.grants
        if request.code in self._admin_codes and not grants.admin:
            raise AclDenied(
                f"Need admin permission for request code={request.code},"
                f" but accessKey={access_key} is not"
            )
        try:
            needed = self._resources(request)
        except ProtocolError as exc:  # a header or body the resources cannot be read from
            raise AclDenied(str(exc)) from None
        if not needed or needed.get(TRACE_TOPIC) == PUB:
            return  # traces may always be written once signed
        refused = grants.refused(needed)
        if refused is not None:
            raise AclDenied(f"No default permission for {describe_resource(refused)}")
