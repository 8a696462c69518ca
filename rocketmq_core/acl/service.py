"""A server's ACL: the rules loaded at start, watched for changes, and the guard that
checks requests with whatever rules are current (docs/spec/ACL.md §2.5).

The files are polled (every 5 s by default, like Java 4.9.3+): a change of any file's
modification time, or of the set of files, reloads all of them. A reload that fails
keeps the rules in force and logs one line naming the file and the problem (once per
bad state, not once per poll). A failure at start is a ConfigError: the server does
not start.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from pathlib import Path

import anyio

from ..protocol.codes import RequestCode
from .guard import AclGuard
from .permissions import BROKER_ADMIN_CODES
from .resources import BROKER_RESOURCES, ResourceRules
from .rules import AclConfigError, AclRules, files_state, load_rules
from .validator import AclValidator

log = logging.getLogger("rocketmq.acl")

DEFAULT_WATCH_INTERVAL = 5.0

# name-server requests that change what everyone sees: an admin account only
NAMESRV_ADMIN_CODES = frozenset(
    {
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        RequestCode.PUT_KV_CONFIG,
        RequestCode.DELETE_KV_CONFIG,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
        RequestCode.UPDATE_NAMESRV_CONFIG,
    }
)
# a broker joining or leaving the routes: any valid account
NAMESRV_SIGNED_CODES = frozenset({RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER})


class AclService:
    """The rules of one server and their watcher; ``guard`` is its RPC hook.

    ``load`` (blocking) or ``open`` reads the rules; ``watch`` polls the files until
    cancelled; ``reload`` re-reads them at once (after an admin request wrote a file).
    """

    def __init__(
        self,
        home: Path,
        *,
        admin_codes: Collection[int],
        resources: ResourceRules | None,
        guarded: Collection[int] | None = None,
        interval: float = DEFAULT_WATCH_INTERVAL,
    ) -> None:
        self.home = home
        self.interval = interval
        self._admin_codes = frozenset(admin_codes)
        self._resources = resources
        self._validator: AclValidator | None = None
        self._state: dict[Path, tuple[int, int]] = {}
        self._failed_state: dict[Path, tuple[int, int]] | None = (
            None  # the bad state already logged
        )
        self.guard = AclGuard(self.validator, guarded=guarded)

    @classmethod
    def for_broker(cls, home: Path, interval: float = DEFAULT_WATCH_INTERVAL) -> AclService:
        """Every request checked: signature, admin codes, topics and groups."""
        return cls(
            home, admin_codes=BROKER_ADMIN_CODES, resources=BROKER_RESOURCES, interval=interval
        )

    @classmethod
    def for_namesrv(cls, home: Path, interval: float = DEFAULT_WATCH_INTERVAL) -> AclService:
        """Only the requests that change routes or settings are checked; reads are free."""
        return cls(
            home,
            admin_codes=NAMESRV_ADMIN_CODES,
            resources=None,
            guarded=NAMESRV_ADMIN_CODES | NAMESRV_SIGNED_CODES,
            interval=interval,
        )

    @property
    def rules(self) -> AclRules:
        """The rules in force (its ``files`` say what each file holds)."""
        return self.validator().rules

    def validator(self) -> AclValidator:
        if self._validator is None:
            raise RuntimeError("the ACL rules are not loaded yet: call load or open first")
        return self._validator

    def load(self) -> None:
        """Read the rules; AclConfigError when they cannot be used. Blocking."""
        state = files_state(self.home)
        self._install(load_rules(self.home), state)

    async def open(self) -> None:
        await anyio.to_thread.run_sync(self.load)
        log.info(
            "ACL on: %d accounts from %s",
            len(self.rules.accounts),
            ", ".join(str(acl_file.path) for acl_file in self.rules.files) or "no file",
        )

    async def reload(self) -> bool:
        """Re-read the files now; False (and one log line) when they cannot be used."""
        state = await anyio.to_thread.run_sync(files_state, self.home)
        try:
            rules = await anyio.to_thread.run_sync(load_rules, self.home)
        except AclConfigError as exc:
            if state != self._failed_state:
                log.error("ACL files not reloaded, the rules in force stay: %s", exc)
                self._failed_state = state
            self._state = state  # polled again only when a file changes once more
            return False
        self._install(rules, state)
        log.info("ACL rules reloaded: %d accounts", len(rules.accounts))
        return True

    async def watch(self) -> None:
        """Poll the files every ``interval`` seconds; reload when they change."""
        while True:
            await anyio.sleep(self.interval)
            try:
                state = await anyio.to_thread.run_sync(files_state, self.home)
            except OSError as exc:  # conf/acl unreadable for a moment: try again next time
                log.warning("cannot list the ACL files under %s: %s", self.home, exc)
                continue
            if state != self._state:
                await self.reload()

    def _install(self, rules: AclRules, state: dict[Path, tuple[int, int]]) -> None:
        validator = AclValidator(rules, admin_codes=self._admin_codes, resources=self._resources)
        self.guard.use(validator)
        self._validator = validator
        self._state = state
        self._failed_state = None
