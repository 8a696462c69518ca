"""``rocketmq kv``: the name servers' KV config (namespace, key, value)."""

from __future__ import annotations

import argparse

from ..client.admin import Admin
from ..client.admin_types import AdminError
from ..protocol.codes import ResponseCode
from .base import AdminCommand, Output
from .render import table


class KvCommand(AdminCommand):
    help = "read, put and delete the name servers' KV config (ORDER_TOPIC_CONFIG, ...)"
    actions = {
        "update": "put a key's value in a namespace on every name server",
        "delete": "delete a key from a namespace on every name server",
        "get": "a key's value, or every key and value of a namespace",
    }

    def add_action_arguments(self, action: str, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-s", "--namespace", required=True, help="the namespace")
        parser.add_argument(
            "-k",
            "--key",
            required=action != "get",
            help="the key" + (" (default: all)" if action == "get" else ""),
        )
        if action == "update":
            parser.add_argument("-v", "--value", required=True, help="the value")

    async def do_update(self, admin: Admin, args: argparse.Namespace) -> Output:
        await admin.put_kv(args.namespace, args.key, args.value)
        document = {"namespace": args.namespace, "key": args.key, "value": args.value}
        return Output(document, f"put {args.namespace} {args.key} = {args.value}")

    async def do_delete(self, admin: Admin, args: argparse.Namespace) -> Output:
        await admin.delete_kv(args.namespace, args.key)
        document = {"namespace": args.namespace, "key": args.key}
        return Output(document, f"deleted {args.namespace} {args.key}")

    async def do_get(self, admin: Admin, args: argparse.Namespace) -> Output:
        if args.key is None:
            items = await admin.kv_list(args.namespace)
            if not items:
                return Output(items, f"namespace {args.namespace} has no keys")
            return Output(items, table(["KEY", "VALUE"], list(items.items())))
        value = await admin.get_kv(args.namespace, args.key)
        if value is None:
            raise AdminError(
                f"the name server has no key {args.key!r} in namespace {args.namespace!r}",
                code=ResponseCode.QUERY_NOT_FOUND,
            )
        return Output({args.key: value}, value)
