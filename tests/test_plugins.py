"""Plugin loading, blocking, failures and duplicates; the `rocketmq` CLI."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
from functools import partial
from importlib import metadata

import pytest

from rocketmq_core.errors import ConfigError, PluginError
from rocketmq_core.hookspecs import hookimpl
from rocketmq_core.plugins import BUILTIN_COMMANDS, PluginHost, PluginInfo, load_plugins
from rocketmq_core.registry import Deferred, Registry


def entry_point(name: str, module: str) -> metadata.EntryPoint:
    return metadata.EntryPoint(name=name, value=module, group="rocketmq")


@pytest.fixture
def plugin_modules(tmp_path, monkeypatch):
    """Write plugin modules into an importable folder: {module name: source}."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(sources: dict[str, str]) -> None:
        for name, source in sources.items():
            (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
            sys.modules.pop(name, None)

    yield write


GOOD = """
    from rocketmq_core.hookspecs import hookimpl

    @hookimpl
    def rocketmq_register_allocation_strategies(register):
        register("by_zone", object())

    @hookimpl
    def rocketmq_register_processors(register):
        register(9001, lambda app: None, server="broker", limit=4)  # a code of its own
        register(None, lambda app: None, server="namesrv")
"""


def test_builtins_and_installed_entry_points_load(plugin_host):
    names = {plugin.name: plugin for plugin in plugin_host.plugins}
    assert names["builtin.plugins_command"].source == "builtin"
    assert names["builtin.plugins_command"].registered == {"CLI command": ["plugins"]}
    assert names["transport_tcp"].status == "loaded"
    assert plugin_host.registry.transports.names() == ["quic", "tcp"]
    assert plugin_host.problems == []


def test_a_plugin_registers_and_the_host_says_what_it_registered(plugin_modules):
    plugin_modules({"good_plugin": GOOD})
    host = load_plugins(blocked=(), entry_points=[entry_point("good", "good_plugin")])
    info = host.info("good")
    assert info.status == "loaded"
    assert info.hooks == ["rocketmq_register_allocation_strategies", "rocketmq_register_processors"]
    assert info.registered == {
        "allocation strategy": ["by_zone"],
        "processor": ["broker:9001", "namesrv:default"],
    }
    (broker_entry,) = [
        entry for entry in host.registry.processors.for_server("broker") if entry.plugin == "good"
    ]
    assert (broker_entry.code, broker_entry.limit, broker_entry.plugin) == (9001, 4, "good")


def test_a_plugin_that_fails_to_import_is_listed_with_the_reason(plugin_modules):
    plugin_modules({"broken_plugin": "import not_a_module_anywhere\n", "good_plugin": GOOD})
    host = load_plugins(
        blocked=(),
        entry_points=[entry_point("broken", "broken_plugin"), entry_point("good", "good_plugin")],
    )
    broken = host.info("broken")
    assert broken.status == "failed"
    assert "ModuleNotFoundError" in broken.error and "not_a_module_anywhere" in broken.error
    assert host.info("good").status == "loaded"
    assert host.problems == [f"plugin 'broken': {broken.error}"]


def test_an_unknown_hook_is_refused(plugin_modules):
    plugin_modules(
        {
            "typo_plugin": """
        from rocketmq_core.hookspecs import hookimpl

        @hookimpl
        def rocketmq_register_transport(register):
            pass
    """
        }
    )
    host = load_plugins(blocked=(), entry_points=[entry_point("typo", "typo_plugin")])
    info = host.info("typo")
    assert info.status == "failed"
    assert "rocketmq_register_transport" in info.error
    assert host.manager.get_plugin("typo") is None


def test_duplicate_names_name_both_plugins(plugin_modules):
    only_strategy = GOOD.split("    @hookimpl\n    def rocketmq_register_processors")[0]
    plugin_modules({"first_plugin": only_strategy, "second_plugin": only_strategy})
    host = load_plugins(
        blocked=(),
        entry_points=[entry_point("first", "first_plugin"), entry_point("second", "second_plugin")],
    )
    failed = [plugin for plugin in host.plugins if plugin.status == "failed"]
    assert len(failed) == 1
    assert "'first'" in failed[0].error and "'second'" in failed[0].error
    assert "the allocation strategy 'by_zone' is registered by both" in failed[0].error


def test_invalid_names_are_refused(plugin_modules):
    plugin_modules(
        {
            "caps_plugin": """
        from rocketmq_core.hookspecs import hookimpl

        @hookimpl
        def rocketmq_register_stores(register):
            register("My-Store", object())
    """
        }
    )
    host = load_plugins(blocked=(), entry_points=[entry_point("caps", "caps_plugin")])
    assert "lower snake case" in host.info("caps").error


STORE_PLUGIN = """
    from rocketmq_core.hookspecs import hookimpl

    @hookimpl
    def rocketmq_register_stores(register):
        register("{name}", object())
"""


def test_registration_goes_through_pluggy_one_plugin_at_a_time_in_load_order(plugin_modules):
    failing = STORE_PLUGIN.replace('register("{name}", object())', "raise RuntimeError('no')")
    plugin_modules(
        {
            "first_plugin": STORE_PLUGIN.format(name="first"),
            "failing_plugin": failing,
            "third_plugin": STORE_PLUGIN.format(name="third"),
        }
    )
    host = PluginHost()
    calls = []
    host.manager.add_hookcall_monitoring(
        lambda hook, impls, kwargs: calls.append((hook, [impl.plugin_name for impl in impls])),
        lambda outcome, hook, impls, kwargs: None,
    )
    for name in ("first", "failing", "third"):
        info = PluginInfo(name, f"{name}_plugin", None, None, "entry point")
        host.add(info, partial(importlib.import_module, f"{name}_plugin"), blocked=set())
    host.register_all(["stores"])
    # pluggy saw each call (a monitor, a tracer would), each with one plugin, in load order
    assert calls == [
        ("rocketmq_register_stores", ["first"]),
        ("rocketmq_register_stores", ["failing"]),
        ("rocketmq_register_stores", ["third"]),
    ]
    # the failure is that plugin's alone: the one after it still registered
    assert host.info("failing").status == "failed"
    assert "RuntimeError: no" in host.info("failing").error
    assert host.registry.stores.names() == ["first", "third"]
    assert host.info("third").registered == {"store": ["third"]}


def test_blocked_plugins_are_listed_but_not_loaded(plugin_modules, monkeypatch):
    plugin_modules({"good_plugin": GOOD})
    monkeypatch.setenv("ROCKETMQ_DISABLE_PLUGINS", " good , builtin.plugins_command")
    host = load_plugins(entry_points=[entry_point("good", "good_plugin")])
    assert host.info("good").status == "blocked"
    assert host.info("builtin.plugins_command").status == "blocked"
    assert "good_plugin" not in sys.modules
    # only the built-in strategies: the blocked plugin's "by_zone" was never registered
    assert host.registry.allocation_strategies.names() == [
        "averagely",
        "averagely_by_circle",
        "consistent_hash",
    ]


def test_registry_lookup_lists_the_choices():
    registry = Registry()
    registry.transports.add("tcp", object(), "transport_tcp")
    with pytest.raises(ConfigError, match="unknown transport 'quic'; available: tcp"):
        registry.transports.get("quic")


DEFERRING = """
    from rocketmq_core.hookspecs import hookimpl
    from rocketmq_core.registry import Deferred

    @hookimpl
    def rocketmq_register_stores(register):
        register("heavy", Deferred("heavy_store_module:HeavyStore"))
        register("missing", Deferred("no_such_store_module:Store"))
"""


def test_a_deferred_object_is_imported_when_first_asked_for(plugin_modules):
    plugin_modules(
        {
            "deferring_plugin": DEFERRING,
            "heavy_store_module": "class HeavyStore:\n    pass\n",
        }
    )
    host = load_plugins(blocked=(), entry_points=[entry_point("deferring", "deferring_plugin")])
    assert host.info("deferring").registered == {"store": ["heavy", "missing"]}
    assert "heavy_store_module" not in sys.modules
    store = host.registry.stores.get("heavy")
    assert store.__name__ == "HeavyStore"
    assert host.registry.stores.get("heavy") is store  # made once
    with pytest.raises(PluginError, match="the store 'missing' of plugin 'deferring' cannot"):
        host.registry.stores.get("missing")


def test_deferred_entries_are_made_as_they_are_listed():
    registry = Registry()
    made = []
    registry.put_hooks.add("first", Deferred(lambda: made.append("first") or "hook 1"), "p")
    registry.put_hooks.add("second", Deferred(lambda: made.append("second") or "hook 2"), "p")
    entries = registry.put_hooks.entries()
    assert made == []
    assert next(entries).obj == "hook 1"
    assert made == ["first"]
    assert [entry.obj for entry in entries] == ["hook 2"]


def test_a_client_process_loads_only_the_transports():
    """What a client pays for the plugins: the transports it may use, made on first use,
    and none of the servers, stores, pyspark or aioquic."""
    code = textwrap.dedent(
        """
        import sys
        from rocketmq_core.client.instance import default_host
        host = default_host()
        print(host.registry.transports.names(), len(host.registry.stores))
        heavy = ["aioquic", "pyspark", "rocksdict", "rocketmq_core.broker.app",
                 "rocketmq_core.namesrv.server", "rocketmq_store_mmap.store"]
        print([name for name in heavy if name in sys.modules])
        host.registry.transports.get("quic")
        print("aioquic" in sys.modules)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.splitlines() == ["['quic', 'tcp'] 0", "[]", "True"]


def test_unknown_registry_kinds_are_refused():
    with pytest.raises(ValueError, match="no registry collection 'transport'"):
        load_plugins(kinds=("transport",))


def test_hookimpl_marker_is_the_projects():
    @hookimpl
    def rocketmq_register_stores(register):
        pass

    assert hasattr(rocketmq_register_stores, "rocketmq_impl")


# --- the CLI, as a user runs it ---------------------------------------------------------


def rocketmq(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rocketmq_core.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=60,
    )


def test_cli_plugins_list_json_shows_transport_tcp_from_its_entry_point():
    result = rocketmq("plugins", "list", "--json")
    assert result.returncode == 0, result.stderr
    plugins = {plugin["name"]: plugin for plugin in json.loads(result.stdout)}
    tcp = plugins["transport_tcp"]
    assert tcp["source"] == "entry point"
    assert tcp["distribution"] == "rocketmq-transport-tcp"
    assert tcp["version"]
    assert tcp["hooks"] == ["rocketmq_register_transports"]
    assert tcp["registered"] == {"transport": ["tcp"]}


def test_cli_plugins_list_text():
    result = rocketmq("plugins", "list")
    assert result.returncode == 0, result.stderr
    assert "transport_tcp  [loaded]  rocketmq-transport-tcp" in result.stdout
    assert "    transport: tcp" in result.stdout


def test_cli_version_lists_plugin_versions():
    result = rocketmq("--version")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("rocketmq-core ")
    assert any(line.startswith("  plugin transport_tcp: rocketmq-transport-tcp ") for line in lines)


def with_path(folder) -> dict[str, str]:
    """An environment whose Python finds modules (and dist-infos) in ``folder`` first."""
    return {"PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture
def broken_plugin_env(tmp_path) -> dict[str, str]:
    """A real entry point (a dist-info on the path) whose module cannot import."""
    dist_info = tmp_path / "rocketmq_broken_demo-1.2.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: rocketmq-broken-demo\nVersion: 1.2\n"
    )
    (dist_info / "entry_points.txt").write_text("[rocketmq]\nbroken_demo = broken_demo_plugin\n")
    (tmp_path / "broken_demo_plugin.py").write_text("raise RuntimeError('boom at import')\n")
    return with_path(tmp_path)


@pytest.fixture
def without_sniffio_env(tmp_path) -> dict[str, str]:
    """An environment in which ``import sniffio`` fails as it does where sniffio is not
    installed: the built-ins that need it (broker, name server, admin commands) fail."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "sniffio.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'sniffio'\", name='sniffio')\n"
    )
    return with_path(shadow)


def test_cli_survives_a_broken_installed_plugin(broken_plugin_env):
    env = broken_plugin_env
    result = rocketmq("plugins", "list", env=env)
    assert result.returncode == 1, result.stderr
    assert result.stderr == "rocketmq plugins: 1 plugin(s) failed to load: broken_demo\n"
    assert "broken_demo  [failed]  rocketmq-broken-demo 1.2" in result.stdout
    assert "error: RuntimeError: boom at import" in result.stdout
    assert "transport_tcp  [loaded]" in result.stdout
    version = rocketmq("--version", env=env)
    assert "plugin broken_demo: rocketmq-broken-demo 1.2 [failed]" in version.stdout
    blocked = rocketmq(
        "plugins", "list", "--json", env={**env, "ROCKETMQ_DISABLE_PLUGINS": "broken_demo"}
    )
    assert blocked.returncode == 0, blocked.stderr
    statuses = {plugin["name"]: plugin["status"] for plugin in json.loads(blocked.stdout)}
    assert statuses["broken_demo"] == "blocked"


def test_cli_plugins_list_json_exits_1_and_lists_everything_when_a_builtin_failed(
    without_sniffio_env,
):
    result = rocketmq("plugins", "list", "--json", env=without_sniffio_env)
    assert result.returncode == 1, result.stderr
    plugins = {plugin["name"]: plugin for plugin in json.loads(result.stdout)}
    assert plugins["builtin.broker"]["status"] == "failed"
    assert plugins["builtin.broker"]["error"].startswith(
        "ModuleNotFoundError: No module named 'sniffio' (pip install sniffio, or reinstall"
        " rocketmq-core; at "
    )
    assert plugins["transport_tcp"]["status"] == "loaded"
    assert "builtin.broker" in result.stderr and "Traceback" not in result.stderr


def test_a_command_of_a_failed_builtin_names_the_plugin_and_its_error(without_sniffio_env):
    result = rocketmq("standalone", "--namesrv-listen", "127.0.0.1:0", env=without_sniffio_env)
    assert result.returncode == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        "rocketmq: command 'standalone' is unavailable: plugin builtin.broker failed to load:"
        " ModuleNotFoundError: No module named 'sniffio' (pip install sniffio"
    )
    namesrv = rocketmq("namesrv", env=without_sniffio_env)
    assert namesrv.returncode == 2
    assert namesrv.stderr.startswith(
        "rocketmq: command 'namesrv' is unavailable: plugin builtin.namesrv failed to load:"
    )
    # the commands of the plugins that loaded still work
    assert rocketmq("spark", "--help", env=without_sniffio_env).returncode == 0


def test_a_command_of_a_blocked_builtin_says_it_is_blocked():
    result = rocketmq("topic", "list", env={"ROCKETMQ_DISABLE_PLUGINS": "builtin.admin_commands"})
    assert result.returncode == 2
    assert result.stderr == (
        "rocketmq: command 'topic' is unavailable:"
        " plugin builtin.admin_commands is blocked by ROCKETMQ_DISABLE_PLUGINS\n"
    )


def test_an_unknown_command_names_the_failed_third_party_plugins(broken_plugin_env):
    result = rocketmq("frobnicate", "--fast", env=broken_plugin_env)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        "rocketmq: unknown command 'frobnicate'; it may belong to a plugin that failed to load:"
        " plugin broken_demo: RuntimeError: boom at import (at "
    )
    # a command a built-in provides is not blamed on the broken plugin
    assert rocketmq("plugins", "--help", env=broken_plugin_env).returncode == 0


def test_an_unknown_command_without_failed_plugins_is_argparses_usage_error():
    result = rocketmq("frobnicate")
    assert result.returncode == 2
    assert "invalid choice: 'frobnicate'" in result.stderr


def test_the_builtin_commands_known_in_advance_are_the_ones_they_register(plugin_host):
    registered = {
        plugin.module: tuple(sorted(plugin.registered.get("CLI command", [])))
        for plugin in plugin_host.plugins
        if plugin.source == "builtin" and plugin.registered.get("CLI command")
    }
    assert registered == {
        module: tuple(sorted(names)) for module, names in BUILTIN_COMMANDS.items()
    }


def test_cli_without_a_command_prints_help():
    result = rocketmq()
    assert result.returncode == 2
    assert "plugins" in result.stderr
