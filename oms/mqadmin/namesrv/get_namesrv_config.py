"""``getNamesrvConfig``: every name server's configuration (secrets masked)."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.namesrv.views import print_configs


class GetNamesrvConfigSubCommand(SubCommand[dict[str, dict[str, str]]]):
    name = "getNamesrvConfig"
    help = "Print the configuration of every name server."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        pass  # -n (shared) names the name servers

    def execute(self, args: argparse.Namespace, admin: Admin) -> dict[str, dict[str, str]]:
        return admin.resources.namesrv_config()

    def render(self, result: dict[str, dict[str, str]], args: argparse.Namespace, out: TextIO) -> None:
        print_configs(result, out)
