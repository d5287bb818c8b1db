"""``deleteKvConfig``: remove a KV config entry from every name server that has it."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.mqadmin.command import Admin, SubCommand


class DeleteKvConfigSubCommand(SubCommand[list[str]]):
    name = "deleteKvConfig"
    help = "Delete a KV config entry from every name server."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-s", "--namespace", required=True)
        parser.add_argument("-k", "--key", required=True)

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[str]:
        return admin.resources.delete_kv_config(args.namespace, args.key)

    def render(self, result: list[str], args: argparse.Namespace, out: TextIO) -> None:
        out.write(f"delete kv config from namespace success ({', '.join(result)}).\n")
