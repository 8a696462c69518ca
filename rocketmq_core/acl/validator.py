"""The check of one request against the rules, in Java's order (docs/spec/ACL.md §4).

``AclValidator.check`` raises AclDenied with the message the Java broker gives, so a
client that shows or matches the text sees the same. Resources are worked out only
once the signature has passed: a white-listed peer costs no header or body decoding.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection

from ..errors import ProtocolError, RocketMQError
from ..protocol.command import RemotingCommand
from ..protocol.constants import TRACE_TOPIC
from ..remoting.processor import RequestContext
from . import signing
from .addresses import IPAddress, never
from .permissions import PUB, Grants, describe_resource
from .resources import BROKER_RESOURCES, ResourceRules
from .rules import AclRules
from .signing import ACCESS_KEY, signature_matches

# an RPC hook's before_request: None to serve the request, else the answer instead
RequestCheck = Callable[[RequestContext, RemotingCommand], RemotingCommand | None]
# AclValidator.frame_check's: (API capsule, signing keys, deciding fields, verdicts)
FrameCheck = tuple[object, dict[str, object], dict[int, tuple[str, str]], dict]

# what a refusal names as the place it was raised (Java names a stack frame)
WHERE = __name__
JAVA_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"


class AclDenied(RocketMQError):
    """A request the rules refuse; the message is the Java broker's text."""

    @property
    def remark(self) -> str:
        """The response remark, as Java writes it: exception, message, where."""
        return f"{JAVA_EXCEPTION}: {self}, {WHERE}"


# verdicts one validator keeps at most: when full it starts afresh (a client inventing
# topics by the million costs their lookups, not memory, nor the others' cached verdicts)
MOST_VERDICTS = 65_536
# peers whose frame checks one validator keeps at most (each a small tuple)
MOST_PEERS = 4096
# values longer than this are never kept (a name may be that long at most: topics 127
# characters, groups 255), so a key never holds a long string a client chose
LONGEST_KEPT_VALUE = 255


class AclValidator:
    """Checks requests against one set of rules.

    ``admin_codes``: codes that need ``admin: true``; ``resources``: what a request
    needs (None: nothing beyond the signature and the admin flag).
    """

    __slots__ = (
        "_accounts",
        "_admin_codes",
        "_deciding_fields",
        "_frame_checks",
        "_global_white",
        "_needed",
        "_verdicts",
        "rules",
    )

    def __init__(
        self,
        rules: AclRules,
        *,
        admin_codes: Collection[int],
        resources: ResourceRules | None = BROKER_RESOURCES,
    ) -> None:
        self.rules = rules
        self._global_white = tuple(pattern.matches for pattern in rules.global_white)
        self._accounts = rules.accounts
        self._admin_codes = frozenset(admin_codes)
        self._needed = resources.needed if resources is not None else None
        # each code's one or two deciding names as a pair (a lone name twice): the key of
        # a verdict is then built without a loop
        self._deciding_fields = {
            code: (names[0], names[-1])
            for code, names in (resources.deciding_fields if resources is not None else {}).items()
        }
        # (accessKey, code, deciding values) -> the refusal's message, or None: allowed
        self._verdicts: dict[tuple[object, ...], str | None] = {}
        self._frame_checks: dict[IPAddress | None, FrameCheck | None] = {}  # by peer

    def compiled_hook(self, check: RequestCheck) -> RequestCheck | None:
        """An RPC hook's ``before_request`` in one compiled call for the busy requests:
        None (serve it) when the request is signed right by an account without a white
        list of its own and a verdict is kept as allowed for its values; else what
        ``check(context, request)`` answers. None when the helper is not built or no
        account or code qualifies."""
        helper, compiled = signing.COMPILED, self._compiled_rules()
        if helper is None or compiled is None:
            return None
        signing_keys, deciding_fields = compiled
        return functools.partial(
            helper.before_request, signing_keys, deciding_fields, self._verdicts, check
        )

    def frame_check(self, peer: IPAddress | None) -> FrameCheck | None:
        """What a broker's send runs check the frames from ``peer`` with where they read
        them in place, as ``compiled_hook`` checks a request (a frame it does not certainly
        allow goes on to the guard): the compiled helper's API capsule (_signature_api.h),
        the signing keys, the deciding fields and the verdicts. The accounts decided are
        those whose own white list does not take ``peer`` (one a connection's address is
        in skips the signature: the guard's). None where nothing qualifies."""
        try:
            return self._frame_checks[peer]
        except KeyError:
            pass
        api = getattr(signing.COMPILED, "API", None)  # None: not built, or built before it
        compiled = self._compiled_rules(peer)
        check = (
            (api, *compiled, self._verdicts) if api is not None and compiled is not None else None
        )
        if len(self._frame_checks) >= MOST_PEERS:
            self._frame_checks.clear()
        self._frame_checks[peer] = check
        return check

    def _compiled_rules(
        self, peer: IPAddress | None = None
    ) -> tuple[dict[str, object], dict[int, tuple[str, str]]] | None:
        """What the compiled checks take: accessKey -> its prepared key for the accounts
        they may decide (no white list of their own; with ``peer``, none that takes it),
        and code -> the two names deciding its resources for the codes they may decide;
        None when the helper is not built or nothing qualifies."""
        if signing.COMPILED is None:
            return None
        signing_keys = {
            access_key: signing.compiled_key(account.secret_key)
            for access_key, account in self._accounts.items()
            # a peer an account's white list takes skips the signature: the guard's
            if (account.white.matches is never if peer is None else not account.white.matches(peer))
            and account.secret_key.isascii()  # any other secret: ``check`` (may not encode)
        }
        # a code that needs admin rights is left to ``check`` (none of the busy ones does)
        deciding_fields = {
            code: names
            for code, names in self._deciding_fields.items()
            if code not in self._admin_codes
        }
        if not signing_keys or not deciding_fields:
            return None
        return signing_keys, deciding_fields

    def check(self, peer: IPAddress | None, request: RemotingCommand) -> None:
        """Return when ``request`` from ``peer`` may be served; raise AclDenied if not."""
        for matches in self._global_white:
            if matches(peer):
                return
        fields = request.ext_fields
        access_key = fields.get(ACCESS_KEY)
        if access_key is None:
            raise AclDenied("No accessKey is configured")
        account = self._accounts.get(access_key)
        if account is None:
            raise AclDenied(f"No acl config for {access_key}")
        if account.white.matches(peer):
            return  # the account's own white list skips the signature and the perms
        if not signature_matches(request, account.secret_key):
            raise AclDenied(f"Check signature failed for accessKey={access_key}")
        code = request.code
        if code in self._admin_codes and not account.grants.admin:
            raise AclDenied(
                f"Need admin permission for request code={code}, but accessKey={access_key} is not"
            )
        deciding = self._deciding_fields.get(code)
        if deciding is None:
            refusal = self._refusal(account.grants, request)
        else:
            first, second = fields.get(deciding[0]), fields.get(deciding[1])
            key = (access_key, code, first, second)
            verdicts = self._verdicts
            if key in verdicts:
                refusal = verdicts[key]
            else:
                refusal = self._refusal(account.grants, request)
                if _keepable(first) and _keepable(second):
                    if len(verdicts) >= MOST_VERDICTS:
                        verdicts.clear()
                    verdicts[key] = refusal
        if refusal is not None:
            raise AclDenied(refusal)

    def _refusal(self, grants: Grants, request: RemotingCommand) -> str | None:
        """Why ``grants`` do not cover the resources ``request`` needs, or None."""
        if self._needed is None:
            return None
        try:
            needed = self._needed(request)
        except ProtocolError as exc:  # a header or body the resources cannot be read from
            raise AclDenied(str(exc)) from None
        if not needed or needed.get(TRACE_TOPIC) == PUB:
            return None  # traces may always be written once signed
        refused = grants.refused(needed)
        if refused is None:
            return None
        return f"No default permission for {describe_resource(refused)}"


def _keepable(value: str | None) -> bool:
    return value is None or len(value) <= LONGEST_KEPT_VALUE
