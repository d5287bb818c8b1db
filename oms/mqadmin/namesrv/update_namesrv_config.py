"""``updateNamesrvConfig``: change a key of every running name server (keys read at start only are refused)."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.mqadmin.command import Admin, SubCommand


class UpdateNamesrvConfigSubCommand(SubCommand[dict[str, dict[str, str]]]):
    name = "updateNamesrvConfig"
    help = "Change a configuration key of every running name server."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-k", "--key", required=True)
        parser.add_argument("-v", "--value", required=True)

    def execute(self, args: argparse.Namespace, admin: Admin) -> dict[str, dict[str, str]]:
        return admin.resources.update_namesrv_config({args.key: args.value})

    def render(self, result: dict[str, dict[str, str]], args: argparse.Namespace, out: TextIO) -> None:
        for addr in result:
            out.write(f"update name server config success! {addr} {args.key} = {args.value}\n")
