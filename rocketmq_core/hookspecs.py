"""Every hook a rocketmq-py plugin can implement. These docstrings are the reference.

Hooks are called once, while a process wires itself up, never per message (pluggy
has no async hooks, and a call per message would be slow). The ``register_*`` hooks
hand over objects that are later chosen by name (``--transport tcp``,
``--store mmap``); those objects do the async work.

A plugin is a module with functions marked ``@hookimpl``::

    from rocketmq_core.hookspecs import hookimpl

    @hookimpl
    def rocketmq_register_transports(register):
        register("tcp", TcpTransport())

and is installed through an entry point in the group ``rocketmq``
(``[project.entry-points.rocketmq] my_plugin = "my_package.plugin"``). Hooks are
grouped below by when they are called. Names given to ``register`` are lower snake
case (``[a-z][a-z0-9_]*``); a name registered twice is an error that names both
plugins.

All hooks exist since rocketmq-core 0.1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import argparse

    from .registry import NamedRegister, ProcessorRegister

PROJECT_NAME = "rocketmq"
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# --- registration: called once per process, when plugins are loaded ---------------


@hookspec
def rocketmq_register_transports(register: NamedRegister) -> None:
    """Register transports: ``register(name, transport)``.

    ``transport`` implements ``rocketmq_core.remoting.transport.Transport``: a
    ``listen`` that serves byte streams and reports its bound address through
    ``task_status.started``, and a ``connect`` that returns a byte stream.
    Chosen by ``--transport NAME``; the core ships none, ``transport_tcp``
    registers ``tcp``.
    """


@hookspec
def rocketmq_register_processors(register: ProcessorRegister) -> None:
    """Register request processors by request code.

    ``register(code, factory, *, server="broker", limit=None, backlog=None)``:
    ``server`` is ``"broker"`` or ``"namesrv"``; ``factory(app)`` builds the
    processor for a running server app (it gets the app's stores, tables and
    config); ``limit`` caps how many requests of that processor run at once and
    ``backlog`` how many more may wait, after which requests are answered
    SYSTEM_BUSY (Java's per-processor thread pools and queues). Use
    ``code=None`` for the server's default processor, which takes every code
    without one of its own.

    A processor is ``rocketmq_core.remoting.processor.Processor``: a callable
    ``(ctx, request)`` returning a response, None (no response), or an awaitable of
    either. A plain function answers inline, in the read loop; one that must wait
    (long polling, group commit) returns an awaitable, or is an ``async def``, and
    then runs as its own task.
    """


@hookspec
def rocketmq_register_stores(register: NamedRegister) -> None:
    """Register message stores: ``register(name, factory)``.

    ``factory(config, flush_policy)`` returns an object implementing
    ``rocketmq_core.store.api.MessageStore`` (``config`` is a ``StoreConfig``,
    ``flush_policy`` the chosen FlushPolicy); ``rocketmq_core.store.loader.create_store``
    builds one and attaches the dispatchers. Chosen by ``--store NAME``; the core
    ships ``memory``.
    """


@hookspec
def rocketmq_register_dispatchers(register: NamedRegister) -> None:
    """Register CommitLog dispatchers: ``register(name, factory)``.

    ``factory(store)`` returns a callable taking a ``DispatchRequest``, or None when it
    has nothing to do for that store. It is told of every appended record, in log
    order, once (and, during recovery, of every record after the last consistent
    point) and builds a derived structure: the consume queue, the key index, a timer
    wheel. Every registered dispatcher runs, built-ins (``consume_queue``, ``index``,
    which write through the store's ``put_position`` / ``put_index``) first.
    """


@hookspec
def rocketmq_register_allocation_strategies(register: NamedRegister) -> None:
    """Register queue-allocation strategies for rebalance: ``register(name, strategy)``.

    ``strategy(group, current_client_id, queues, client_ids)`` returns the queues
    this client owns. Built-ins: ``averagely``, ``averagely_by_circle``, ...
    """


@hookspec
def rocketmq_register_flush_policies(register: NamedRegister) -> None:
    """Register flush policies: ``register(name, factory)``.

    ``factory(store_config)`` returns a ``rocketmq_core.store.flush.FlushPolicy``: pure
    decisions of when appended bytes are made durable (``async``: in the background
    by interval and dirty pages; ``sync``: group commit before the producer is
    answered). Chosen by ``flushDiskType`` / ``--flush NAME``.
    """


@hookspec
def rocketmq_register_put_hooks(register: NamedRegister) -> None:
    """Register put hooks: ``register(name, factory)``.

    ``factory(broker)`` returns a hook, or None when it has nothing to do for that
    broker. A hook is a plain callable ``hook(message) -> message`` on a
    ``rocketmq_core.store.api.MessageToStore``: it sees every message a client sends
    (a send, a batch's records, a consumer's send-back, a committed transaction)
    before it is appended, and returns it as it should be stored: as it was, rewritten
    (a delayed message moved to SCHEDULE_TOPIC_XXXX, a transaction half message to
    RMQ_SYS_TRANS_HALF_TOPIC), or it raises ``rocketmq_core.errors.RequestRefused`` to
    refuse it with a ResponseCode and a remark. Every registered hook runs, in
    registration order; a hook must leave alone what it does not own, and cost next
    to nothing for a message it does not touch (it runs per message).
    """


@hookspec
def rocketmq_register_broker_services(register: NamedRegister) -> None:
    """Register broker services: ``register(name, factory)``.

    ``factory(broker)`` returns an object with ``async run(*, task_status)`` (or None
    when it has nothing to do for that broker), started after the store is open and
    the put hooks are built, and cancelled once the broker has stopped serving, before
    the store closes; it saves its state in a shielded ``finally`` within 5 s. The
    broker keeps the running services in ``broker.services`` by name: delay delivery,
    transaction check-back, HA.
    """


@hookspec
def rocketmq_register_cli_commands(register: NamedRegister) -> None:
    """Register ``rocketmq`` sub-commands: ``register(name, command)``; a command
    name may also hold dashes (``broker-config``).

    ``command`` has ``help`` (one line), ``add_arguments(parser)`` and
    ``run(args, host) -> int`` (the exit status); ``host`` is the loaded
    ``PluginHost``. The built-in ``plugins`` command is registered this way.
    """


# --- configuration ----------------------------------------------------------------


@hookspec
def rocketmq_add_options(command: str, parser: argparse.ArgumentParser) -> None:
    """Add options to the ``rocketmq COMMAND`` parser, after the command's own.

    Called once for every sub-command while the CLI builds its parsers;
    ``command`` is the sub-command's name. Options must not clash with existing
    ones (argparse raises, naming the option).
    """


# --- lifecycle events -----------------------------------------------------------------


@hookspec
def rocketmq_namesrv_started(namesrv: Any, address: str) -> None:
    """A name server is serving on ``address`` (``host:port``)."""


@hookspec
def rocketmq_namesrv_stopping(namesrv: Any) -> None:
    """A name server stops accepting connections and starts to drain."""


@hookspec
def rocketmq_broker_started(broker: Any, address: str) -> None:
    """A broker is serving on ``address`` and has registered with its name servers."""


@hookspec
def rocketmq_broker_stopping(broker: Any) -> None:
    """A broker starts its graceful stop: no new connections, then drain and flush."""


# The registration hooks and the Registry collection each one fills.
REGISTRATION_HOOKS: dict[str, str] = {
    "rocketmq_register_transports": "transports",
    "rocketmq_register_processors": "processors",
    "rocketmq_register_stores": "stores",
    "rocketmq_register_dispatchers": "dispatchers",
    "rocketmq_register_allocation_strategies": "allocation_strategies",
    "rocketmq_register_flush_policies": "flush_policies",
    "rocketmq_register_put_hooks": "put_hooks",
    "rocketmq_register_broker_services": "broker_services",
    "rocketmq_register_cli_commands": "cli_commands",
}
