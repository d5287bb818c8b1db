"""``updateKvConfig``: set a KV config entry (namespace, key, value) on every name server."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.mqadmin.command import Admin, SubCommand


class UpdateKvConfigSubCommand(SubCommand[list[str]]):
    name = "updateKvConfig"
    help = "Create or update a KV config entry on every name server."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-s", "--namespace", required=True)
        parser.add_argument("-k", "--key", required=True)
        parser.add_argument("-v", "--value", required=True)

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[str]:
        return admin.resources.put_kv_config(args.namespace, args.key, args.value)

    def render(self, result: list[str], args: argparse.Namespace, out: TextIO) -> None:
        out.write(f"update kv config in namespace success ({', '.join(result)}).\n")
