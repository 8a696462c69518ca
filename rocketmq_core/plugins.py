"""Finding, loading, blocking and describing plugins.

Plugins come from two places: the built-ins (in ``rocketmq_core/builtin/``, and in
``rocketmq_core/cli/`` for the command line's own) and the entry points of group
``rocketmq``. ``ROCKETMQ_DISABLE_PLUGINS=a,b`` blocks plugins by name (or by
distribution name). A plugin that fails to import or to register is kept in the list
with the reason; it never stops the others from loading.
"""

from __future__ import annotations

import importlib
import os
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from types import ModuleType
from typing import Any

import pluggy

from . import __version__, hookspecs
from .errors import PluginError
from .registry import Registry

ENTRY_POINT_GROUP = "rocketmq"
DISABLE_ENV = "ROCKETMQ_DISABLE_PLUGINS"

# Built-in plugins: registered through the same hooks as any installed plugin.
BUILTIN_PLUGINS = (
    "rocketmq_core.cli.plugins_command",
    "rocketmq_core.builtin.namesrv",
    "rocketmq_core.builtin.store",
    "rocketmq_core.builtin.broker",
    "rocketmq_core.builtin.allocation",
    "rocketmq_core.cli.admin_commands",
)

# The CLI commands each built-in registers, known before it loads: when one fails, the
# CLI can name it as the reason its commands are missing (a test keeps this in step).
BUILTIN_COMMANDS = {
    "rocketmq_core.cli.plugins_command": ("plugins",),
    "rocketmq_core.builtin.namesrv": ("namesrv",),
    "rocketmq_core.builtin.broker": ("broker", "standalone"),
    "rocketmq_core.cli.admin_commands": (
        "acl",
        "broker-config",
        "cluster",
        "consume",
        "group",
        "kv",
        "message",
        "offset",
        "send",
        "topic",
    ),
}


@dataclass
class PluginInfo:
    """What ``rocketmq plugins list`` shows about one plugin."""

    name: str
    module: str
    distribution: str | None
    version: str | None
    source: str  # "builtin" or "entry point"
    status: str = "loaded"  # "loaded", "blocked", "failed"
    error: str | None = None
    hooks: list[str] = field(default_factory=list)
    registered: dict[str, list[str]] = field(default_factory=dict)
    # the CLI commands it provides whether or not it loaded; None: unknown until it registers
    commands: tuple[str, ...] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "module": self.module,
            "distribution": self.distribution,
            "version": self.version,
            "source": self.source,
            "status": self.status,
            "error": self.error,
            "hooks": self.hooks,
            "registered": self.registered,
        }


class PluginHost:
    """The loaded plugins, their pluggy manager, and what they registered."""

    def __init__(self) -> None:
        self.manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.manager.add_hookspecs(hookspecs)
        self.plugins: list[PluginInfo] = []
        self.registry = Registry()
        # CLI commands whose deferred module failed to load, by name: their plugin
        self._unmade_commands: dict[str, PluginInfo] = {}

    @property
    def hook(self) -> Any:
        return self.manager.hook

    @property
    def problems(self) -> list[str]:
        """One line per plugin that failed to load or to register."""
        return [f"plugin {p.name!r}: {p.error}" for p in self.plugins if p.status == "failed"]

    def require_healthy(self) -> None:
        """Servers refuse to start while a plugin is broken: PluginError saying which."""
        if self.problems:
            raise PluginError(
                "refusing to start with broken plugins:\n  "
                + "\n  ".join(self.problems)
                + "\nreinstall them, or block them with ROCKETMQ_DISABLE_PLUGINS=<name>"
            )

    def processor_table(self, server: str, app: Any) -> Any:
        """Every processor registered for ``server``, bound to the running ``app``."""
        from .remoting.processor import ProcessorTable

        table = ProcessorTable()
        for entry in self.registry.processors.for_server(server):
            processor = entry.factory(app)
            if entry.code is None:
                table.set_default(processor, limit=entry.limit, backlog=entry.backlog)
            else:
                table.register(entry.code, processor, limit=entry.limit, backlog=entry.backlog)
        return table

    def info(self, name: str) -> PluginInfo:
        for plugin in self.plugins:
            if plugin.name == name:
                return plugin
        raise KeyError(name)

    def add(self, info: PluginInfo, load: Any, blocked: set[str]) -> None:
        """Import and register one plugin; record rather than raise on failure."""
        self.plugins.append(info)
        if info.name in blocked or (info.distribution or "") in blocked:
            info.status = "blocked"
            self.manager.set_blocked(info.name)
            return
        try:
            module = load()
            self.manager.register(module, name=info.name)
            self.manager.check_pending()
        except Exception as exc:
            info.status = "failed"
            info.error = _describe(exc, info.distribution)
            if self.manager.get_plugin(info.name) is not None:
                self.manager.unregister(name=info.name)
            return
        info.hooks = sorted(impl.name for impl in self.manager.get_hookcallers(module) or ())

    def register_all(self, kinds: Iterable[str] | None = None) -> None:
        """Call every ``rocketmq_register_*`` hook, one plugin at a time; ``kinds`` (Registry
        collection names, like ``transports``) limits the hooks to those."""
        wanted = None if kinds is None else set(kinds)
        unknown = sorted((wanted or set()) - set(hookspecs.REGISTRATION_HOOKS.values()))
        if unknown:
            raise ValueError(
                f"no registry collection {unknown[0]!r}; the collections are "
                + ", ".join(hookspecs.REGISTRATION_HOOKS.values())
            )
        for hook_name, collection_name in hookspecs.REGISTRATION_HOOKS.items():
            if wanted is not None and collection_name not in wanted:
                continue
            collection = getattr(self.registry, collection_name)
            # One pluggy call per plugin, not one for all: a single call would run the last
            # registered first, stop at the first exception (the plugins after it never
            # register) and give every plugin one ``register``, so entries could not be
            # filed under the plugin that made them. A subset caller holding one plugin's
            # implementation keeps pluggy's call loop (tracing, hook-call monitoring,
            # that plugin's wrappers); get_hookimpls() lists them in load order.
            everyone = self.manager.get_plugins()
            for impl in getattr(self.manager.hook, hook_name).get_hookimpls():
                info = self.info(impl.plugin_name)
                if info.status != "loaded" or impl.wrapper or impl.hookwrapper:
                    continue  # a wrapper runs around its own plugin's call
                only_this_plugin = self.manager.subset_hook_caller(
                    hook_name, remove_plugins=everyone - {impl.plugin}
                )
                try:
                    only_this_plugin(register=_bound_register(collection, info))
                except Exception as exc:
                    info.status = "failed"
                    info.error = _describe(exc, info.distribution)

    def load_commands(self, names: Iterable[str] | None = None) -> None:
        """Make the CLI commands ``names`` (every one when None): plugins register them
        deferred, so that a run loads one command's module, not all. A command whose module
        fails to load fails its plugin, as a failure to register would."""
        commands = self.registry.cli_commands
        wanted = commands.names() if names is None else [n for n in names if n in commands]
        for name in wanted:
            info = self.command_plugin(name)
            if info is None or info.status != "loaded":
                continue
            try:
                commands.get(name)
            except Exception as exc:
                # the registry wraps an ImportError in a PluginError: describe the cause
                cause = exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
                info.status = "failed"
                info.error = _describe(cause, info.distribution)
                # listed as if its commands had failed to register (none of them is offered)
                for unmade in info.registered.pop(commands.kind):
                    self._unmade_commands[unmade] = info

    def command_plugin(self, name: str) -> PluginInfo | None:
        """The plugin that registered the CLI command ``name``."""
        kind = self.registry.cli_commands.kind
        found = (p for p in self.plugins if name in p.registered.get(kind, ()))
        return next(found, None) or self._unmade_commands.get(name)


def _bound_register(collection: Any, info: PluginInfo) -> Any:
    """A ``register`` callable that files entries under ``info``'s plugin name."""

    def register(name_or_code: Any, obj: Any, /, **options: Any) -> None:
        entry = collection.add(name_or_code, obj, info.name, **options)
        info.registered.setdefault(collection.kind, []).append(entry.name)

    return register


def _describe(exc: BaseException, distribution: str | None) -> str:
    if isinstance(exc, PluginError):
        return str(exc)
    notes = []
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        # the usual cause: a dependency missing from the environment (or from the metadata)
        missing = exc.name.partition(".")[0]
        notes.append(f"pip install {missing}")
        if distribution:
            notes[-1] += f", or reinstall {distribution}"
    # Where the failure happened in the plugin's own code helps its author most.
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        notes.append(f"at {frames[-1].filename}:{frames[-1].lineno}")
    where = f" ({'; '.join(notes)})" if notes else ""
    return f"{type(exc).__name__}: {exc}{where}"


def blocked_from_env(environ: dict[str, str] | os._Environ[str] = os.environ) -> set[str]:
    raw = environ.get(DISABLE_ENV, "")
    return {name.strip() for name in raw.split(",") if name.strip()}


def load_plugins(
    *,
    blocked: Iterable[str] | None = None,
    entry_points: Iterable[metadata.EntryPoint] | None = None,
    builtins: Iterable[str] = BUILTIN_PLUGINS,
    kinds: Iterable[str] | None = None,
) -> PluginHost:
    """Load built-ins and entry points (``entry_points`` overrides discovery).

    ``kinds`` fills only those Registry collections: a client asks for ``transports``
    alone and never imports the servers, the stores or the CLI commands."""
    blocked_names = blocked_from_env() if blocked is None else set(blocked)
    host = PluginHost()
    for module_name in builtins:
        info = PluginInfo(
            name="builtin." + module_name.rsplit(".", 1)[-1],
            module=module_name,
            distribution="rocketmq-core",
            version=__version__,
            source="builtin",
            commands=BUILTIN_COMMANDS.get(module_name),
        )
        host.add(info, _importer(module_name), blocked_names)
    if entry_points is None:
        entry_points = metadata.entry_points(group=ENTRY_POINT_GROUP)
    for entry_point in sorted(entry_points, key=lambda ep: ep.name):
        dist = entry_point.dist
        info = PluginInfo(
            name=entry_point.name,
            module=entry_point.value,
            distribution=dist.name if dist is not None else None,
            version=dist.version if dist is not None else None,
            source="entry point",
        )
        if any(p.name == info.name for p in host.plugins):
            host.plugins.append(info)
            info.status = "failed"
            info.error = (
                f"another plugin is already named {info.name!r}"
                f" (distribution {host.info(info.name).distribution}); one of them must go"
            )
            continue
        host.add(info, entry_point.load, blocked_names)
    host.register_all(kinds)
    return host


def _importer(module_name: str) -> Any:
    def load() -> ModuleType:
        return importlib.import_module(module_name)

    return load
