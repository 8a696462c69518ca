"""``rocketmq acl``: the ACL 1.0 accounts and global white lists of running brokers.

Each action goes to one broker (``-b``) or to every broker, master and slave, of a
cluster (``-c``): each keeps its own plain_acl.yml. With ACL on, sign the requests with
``--access-key``/``--secret-key`` (or ROCKETMQ_ACCESS_KEY/ROCKETMQ_SECRET_KEY) of any
account; the account being changed is named with ``-a``.
"""

from __future__ import annotations

import argparse

from ..acl.permissions import PERM_BY_TEXT, is_known_perm
from ..acl.rules import MIN_KEY_LENGTH
from ..client.admin import Admin
from .base import AdminCommand, Output
from .render import table, timestamp

PERMS = ", ".join(PERM_BY_TEXT)


class AclCommand(AdminCommand):
    help = "manage the ACL accounts and global white lists of running brokers (plain_acl.yml)"
    actions = {
        "update": "create an account, or change the one with this access key",
        "delete": "delete an account",
        "white": "replace the global white list of a broker's ACL file",
        "version": "show the version of each ACL file of the broker(s)",
        "get": "show the global white list and the accounts (secrets included)",
    }

    def add_action_arguments(self, action: str, parser: argparse.ArgumentParser) -> None:
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument("-b", "--broker", metavar="ADDR", help="the broker (host:port)")
        where.add_argument(
            "-c", "--cluster", help="every broker, master and slave, of this cluster"
        )
        if action in ("update", "delete"):
            parser.add_argument(
                "-a", "--account", required=True, type=_key, help="the account's access key"
            )
        if action == "update":
            _add_account_options(parser)
        if action == "white":
            parser.add_argument(
                "-g",
                "--addresses",
                required=True,
                help="the new global white list, comma-separated patterns (10.10.103.*,"
                "192.168.0.*); an empty string clears it",
            )
            parser.add_argument(
                "-p",
                "--acl-file",
                metavar="PATH",
                help="the ACL file to change, a full path under the broker's rocketmqHome"
                " (default: its conf/plain_acl.yml)",
            )

    async def do_update(self, admin: Admin, args: argparse.Namespace) -> Output:
        brokers = []
        for _name, address in await admin.broker_members(args.cluster, args.broker):
            await admin.update_acl_account(
                address,
                args.account,
                args.secret,
                white_remote_address=args.white_address,
                admin=args.admin,
                default_topic_perm=args.default_topic_perm,
                default_group_perm=args.default_group_perm,
                topic_perms=args.topic_perms,
                group_perms=args.group_perms,
            )
            brokers.append(address)
        document = {"accessKey": args.account, "brokers": brokers}
        return Output(document, f"updated account {args.account} on {', '.join(brokers)}")

    async def do_delete(self, admin: Admin, args: argparse.Namespace) -> Output:
        brokers = []
        for _name, address in await admin.broker_members(args.cluster, args.broker):
            await admin.delete_acl_account(address, args.account)
            brokers.append(address)
        document = {"accessKey": args.account, "brokers": brokers}
        return Output(document, f"deleted account {args.account} on {', '.join(brokers)}")

    async def do_white(self, admin: Admin, args: argparse.Namespace) -> Output:
        addresses = [part.strip() for part in args.addresses.split(",") if part.strip()]
        brokers = []
        for _name, address in await admin.broker_members(args.cluster, args.broker):
            await admin.update_global_white_addrs(address, addresses, args.acl_file)
            brokers.append(address)
        document = {"globalWhiteAddrs": addresses, "aclFile": args.acl_file, "brokers": brokers}
        shown = ",".join(addresses) or "(empty)"
        return Output(document, f"global white list {shown} set on {', '.join(brokers)}")

    async def do_version(self, admin: Admin, args: argparse.Namespace) -> Output:
        document, rows = [], []
        for _name, address in await admin.broker_members(args.cluster, args.broker):
            versions = await admin.acl_versions(address)
            for path, version in versions.files.items():
                document.append(
                    {
                        "clusterName": versions.cluster_name,
                        "brokerName": versions.broker_name,
                        "brokerAddr": address,
                        "aclFile": path,
                        "version": version.counter,
                        "updated": version.timestamp,
                    }
                )
                rows.append(
                    [
                        versions.cluster_name,
                        versions.broker_name,
                        address,
                        path,
                        version.counter,
                        timestamp(version.timestamp),
                    ]
                )
        headers = ["CLUSTER", "BROKER", "ADDRESS", "ACL FILE", "VERSION", "UPDATED"]
        return Output(document, table(headers, rows))

    async def do_get(self, admin: Admin, args: argparse.Namespace) -> Output:
        document, sections = {}, []
        for name, address in await admin.broker_members(args.cluster, args.broker):
            config = await admin.acl_config(address)
            document[address] = {
                "globalWhiteAddrs": config.global_white_addrs,
                "accounts": [account.to_json() for account in config.plain_access_configs],
            }
            rows = [
                [
                    account.access_key,
                    account.secret_key,
                    account.admin,
                    account.white_remote_address,
                    account.default_topic_perm,
                    account.default_group_perm,
                    ",".join(account.topic_perms) or None,
                    ",".join(account.group_perms) or None,
                ]
                for account in config.plain_access_configs
            ]
            headers = [
                "ACCESS KEY",
                "SECRET KEY",
                "ADMIN",
                "WHITE ADDRESS",
                "TOPIC DEFAULT",
                "GROUP DEFAULT",
                "TOPIC PERMS",
                "GROUP PERMS",
            ]
            sections.append(
                f"# {name} {address}\n"
                f"global white list: {', '.join(config.global_white_addrs) or '(none)'}\n"
                + table(headers, rows)
            )
        return Output(document, "\n\n".join(sections))


def _add_account_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-s", "--secret", required=True, type=_key, help="the account's secret key")
    parser.add_argument(
        "-w",
        "--white-address",
        metavar="PATTERN",
        help="addresses that need no signature for this account (192.168.1.*)",
    )
    parser.add_argument(
        "-i", "--default-topic-perm", type=_perm, metavar="PERM", help=f"one of {PERMS}"
    )
    parser.add_argument(
        "-u", "--default-group-perm", type=_perm, metavar="PERM", help=f"one of {PERMS}"
    )
    parser.add_argument(
        "-t",
        "--topic-perms",
        type=_perm_list,
        metavar="LIST",
        help="topic=PERM entries, comma-separated (TopicA=PUB,TopicB=SUB); replaces the"
        " account's list, an empty string clears it",
    )
    parser.add_argument(
        "-g",
        "--group-perms",
        type=_perm_list,
        metavar="LIST",
        help="group=PERM entries, comma-separated (GroupA=SUB); replaces the account's"
        " list, an empty string clears it",
    )
    parser.add_argument(
        "-m",
        "--admin",
        type=_true_or_false,
        default=False,
        metavar="true|false",
        help="whether the account may send admin requests (default: false, as mqadmin)",
    )


def _key(text: str) -> str:
    key = text.strip()
    if len(key) < MIN_KEY_LENGTH:
        raise argparse.ArgumentTypeError(
            f"{text!r} is too short: a key needs at least 7 characters"
        )
    return key


def _perm(text: str) -> str:
    if not is_known_perm(text):
        raise argparse.ArgumentTypeError(f"{text!r} is no permission: use one of {PERMS}")
    return text.strip()


def _perm_list(text: str) -> list[str]:
    entries = [entry.strip() for entry in text.split(",") if entry.strip()]
    for entry in entries:
        name, equals, perm = entry.partition("=")
        if not equals or not name.strip() or not is_known_perm(perm):
            raise argparse.ArgumentTypeError(
                f"{entry!r}: write name=PERM, PERM one of {PERMS} (TopicA=SUB)"
            )
    return entries


def _true_or_false(text: str) -> bool:
    word = text.strip().lower()
    if word not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"{text!r}: give true or false")
    return word == "true"
