"""The collections that the ``rocketmq_register_*`` hooks fill in.

Each entry remembers which plugin registered it, so a duplicate is reported by
naming both plugins and ``rocketmq plugins list`` can say who provides what.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from .errors import ConfigError, PluginError
from .protocol.codes import RequestCode

if TYPE_CHECKING:
    import argparse

    from anyio.abc import TaskStatus

    from .broker.app import Broker
    from .broker.put_hooks import PutHook
    from .client.allocation import AllocationStrategy
    from .plugins import PluginHost
    from .remoting.processor import Processor
    from .remoting.transport import Transport
    from .store.api import Dispatcher, MessageStore, StoreConfig
    from .store.flush import FlushPolicy

T = TypeVar("T")

_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
_COMMAND_NAME = re.compile(r"[a-z][a-z0-9_-]*\Z")  # CLI commands are shell words: broker-config
SERVERS = ("broker", "namesrv")


class NamedRegister(Protocol):
    def __call__(self, name: str, obj: Any, /) -> None: ...


class ProcessorRegister(Protocol):
    def __call__(
        self,
        code: int | None,
        factory: ProcessorFactory,
        /,
        *,
        server: str = "broker",
        limit: int | None = None,
        backlog: int | None = None,
    ) -> None: ...


class BrokerService(Protocol):
    """What a broker service factory builds (see rocketmq_register_broker_services)."""

    async def run(self, *, task_status: TaskStatus[None]) -> None: ...


class CliCommand(Protocol):
    """A ``rocketmq`` sub-command (see rocketmq_register_cli_commands)."""

    help: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace, host: PluginHost) -> int: ...


# what the factories of each registry take and return (None: "nothing to do here")
ProcessorFactory = Callable[[Any], "Processor"]  # the app: a Broker or a NameServer
StoreFactory = Callable[["StoreConfig", "FlushPolicy"], "MessageStore"]
DispatcherFactory = Callable[["MessageStore"], "Dispatcher | None"]
FlushPolicyFactory = Callable[["StoreConfig"], "FlushPolicy"]
PutHookFactory = Callable[["Broker"], "PutHook | None"]
BrokerServiceFactory = Callable[["Broker"], "BrokerService | None"]


@dataclass(frozen=True)
class Entry(Generic[T]):
    name: str
    obj: T
    plugin: str


class Deferred:
    """What a plugin registers without importing it yet, made the first time the registry
    hands it out: ``"package.module:attribute"`` (imported then), or a function that
    returns the object. A process that never uses it (a client and the QUIC transport, a
    broker and the other stores) never pays for its imports."""

    __slots__ = ("target",)

    def __init__(self, target: str | Callable[[], Any]) -> None:
        self.target = target

    @classmethod
    def instance_of(cls, target: str) -> Deferred:
        """An instance of the class ``"package.module:Class"``, made (the module imported)
        the first time it is handed out: a CLI command, say."""

        def make() -> Any:
            return cls(target).make()()

        make.__qualname__ = f"{target}()"  # what the repr (and a failure) names
        return cls(make)

    def make(self) -> Any:
        if callable(self.target):
            return self.target()
        module_name, _, attribute = self.target.partition(":")
        # the import statement's machinery, not importlib.import_module: `python -X
        # importtime` (how startup costs are found) sees only what goes through it
        module = __import__(module_name, fromlist=[attribute])
        return getattr(module, attribute)

    def __repr__(self) -> str:
        return f"Deferred({getattr(self.target, '__qualname__', self.target)!r})"


class NamedRegistry(Generic[T]):
    """Objects of one kind (transports, stores, ...) by name; an entry may hold a Deferred
    in place of its object until the object is first handed out."""

    def __init__(self, kind: str, *, pattern: re.Pattern[str] = _NAME) -> None:
        self.kind = kind
        self.pattern = pattern
        self._entries: dict[str, Entry[T]] = {}

    def add(self, name: str, obj: T, plugin: str) -> Entry[T]:
        if not isinstance(name, str) or not self.pattern.match(name):
            raise PluginError(
                f"plugin {plugin!r} registered the {self.kind} name {name!r}:"
                " names are lower snake case, like 'tcp' or 'averagely_by_circle'"
            )
        existing = self._entries.get(name)
        if existing is not None:
            raise PluginError(
                f"the {self.kind} {name!r} is registered by both plugin {existing.plugin!r}"
                f" and plugin {plugin!r}; uninstall one, or block one with"
                f" ROCKETMQ_DISABLE_PLUGINS={plugin}"
            )
        entry = self._entries[name] = Entry(name, obj, plugin)
        return entry

    def get(self, name: str) -> T:
        """The object registered as ``name``; ConfigError listing the choices if none."""
        entry = self._entries.get(name)
        if entry is None:
            choices = ", ".join(sorted(self._entries)) or "none installed"
            raise ConfigError(f"unknown {self.kind} {name!r}; available: {choices}")
        return self._made(entry).obj

    def names(self) -> list[str]:
        return sorted(self._entries)

    def entries(self) -> Iterator[Entry[T]]:
        """Every entry, each deferred object made as the iteration reaches it."""
        for entry in list(self._entries.values()):
            yield self._made(entry)

    def _made(self, entry: Entry[T]) -> Entry[T]:
        if not isinstance(entry.obj, Deferred):
            return entry
        try:
            obj = entry.obj.make()
        except ImportError as exc:
            raise PluginError(
                f"the {self.kind} {entry.name!r} of plugin {entry.plugin!r} cannot be loaded:"
                f" {exc}; reinstall the plugin, or block it with"
                f" ROCKETMQ_DISABLE_PLUGINS={entry.plugin}"
            ) from exc
        made = self._entries[entry.name] = Entry(entry.name, obj, entry.plugin)
        return made

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)


def bound_to_app(function: Callable[..., Any]) -> ProcessorFactory:
    """A processor factory for a function of ``(app, ctx, request)``."""

    def factory(app: Any) -> Processor:
        return partial(function, app)

    return factory


@dataclass(frozen=True)
class ProcessorEntry:
    server: str
    code: int | None  # None: the server's default processor
    factory: ProcessorFactory
    plugin: str
    limit: int | None = None
    backlog: int | None = None

    @property
    def name(self) -> str:
        if self.code is None:
            return f"{self.server}:default"
        try:
            return f"{self.server}:{RequestCode(self.code).name}"
        except ValueError:
            return f"{self.server}:{self.code}"


class ProcessorRegistry:
    """Processor factories keyed by (server, request code)."""

    kind = "processor"

    def __init__(self) -> None:
        self._entries: dict[tuple[str, int | None], ProcessorEntry] = {}

    def add(
        self,
        code: int | None,
        factory: ProcessorFactory,
        plugin: str,
        *,
        server: str = "broker",
        limit: int | None = None,
        backlog: int | None = None,
    ) -> ProcessorEntry:
        if server not in SERVERS:
            raise PluginError(
                f"plugin {plugin!r} registered a processor for server {server!r};"
                f" servers are {', '.join(SERVERS)}"
            )
        if code is not None and (isinstance(code, bool) or not isinstance(code, int)):
            raise PluginError(f"plugin {plugin!r} registered a processor for code {code!r}")
        entry = ProcessorEntry(
            server, None if code is None else int(code), factory, plugin, limit, backlog
        )
        existing = self._entries.get((server, entry.code))
        if existing is not None:
            raise PluginError(
                f"the processor {entry.name} is registered by both plugin"
                f" {existing.plugin!r} and plugin {plugin!r}"
            )
        self._entries[(server, entry.code)] = entry
        return entry

    def for_server(self, server: str) -> list[ProcessorEntry]:
        return [entry for (name, _code), entry in self._entries.items() if name == server]

    def entries(self) -> Iterator[ProcessorEntry]:
        return iter(self._entries.values())

    def names(self) -> list[str]:
        return sorted(entry.name for entry in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)


@dataclass
class Registry:
    """Everything the loaded plugins registered."""

    transports: NamedRegistry[Transport] = field(default_factory=lambda: NamedRegistry("transport"))
    processors: ProcessorRegistry = field(default_factory=ProcessorRegistry)
    stores: NamedRegistry[StoreFactory] = field(default_factory=lambda: NamedRegistry("store"))
    dispatchers: NamedRegistry[DispatcherFactory] = field(
        default_factory=lambda: NamedRegistry("dispatcher")
    )
    allocation_strategies: NamedRegistry[AllocationStrategy] = field(
        default_factory=lambda: NamedRegistry("allocation strategy")
    )
    flush_policies: NamedRegistry[FlushPolicyFactory] = field(
        default_factory=lambda: NamedRegistry("flush policy")
    )
    put_hooks: NamedRegistry[PutHookFactory] = field(
        default_factory=lambda: NamedRegistry("put hook")
    )
    broker_services: NamedRegistry[BrokerServiceFactory] = field(
        default_factory=lambda: NamedRegistry("broker service")
    )
    cli_commands: NamedRegistry[CliCommand] = field(
        default_factory=lambda: NamedRegistry("CLI command", pattern=_COMMAND_NAME)
    )
