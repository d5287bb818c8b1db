"""One ``mqadmin`` command as RocketMQ's tools shape it (``SubCommand``): its name, help, flags and what it does.

Each command lives in a module of its own under a topic folder; ``registry.COMMANDS`` lists them.
"""

from __future__ import annotations

import argparse
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Generic, TextIO, TypeVar

if TYPE_CHECKING:
    from oms.access_point import MessagingAccessPoint
    from oms.admin.manager import ResourceManager

R = TypeVar("R")

EXIT_OK = 0
EXIT_ERROR = 1  # the command reached the servers (or tried to) and failed
EXIT_USAGE = 2  # argparse's code for bad command lines


class UsageError(Exception):
    """A command line that cannot run (reported like argparse's errors, exit code 2)."""


@dataclass(frozen=True)
class Admin:
    """What a command runs against: the resource manager, and the access point for the commands that produce or
    consume with a client of their own."""

    resources: ResourceManager
    access_point: MessagingAccessPoint


class SubCommand(ABC, Generic[R]):
    """A command: ``execute`` returns its result (what ``--json`` prints), ``render`` prints it for people."""

    name: ClassVar[str]  # RocketMQ's subcommand name, e.g. updateTopic
    help: ClassVar[str]
    # RocketMQ gives -b another meaning (brokerName, beginTimestamp) in some commands: there only --brokerAddr
    # names the broker address; elsewhere -b is its short form
    short_broker_addr: ClassVar[bool] = True

    @abstractmethod
    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The command's own flags (the shared ones are added by ``options.add_shared_arguments``)."""

    @abstractmethod
    def execute(self, args: argparse.Namespace, admin: Admin) -> R: ...

    @abstractmethod
    def render(self, result: R, args: argparse.Namespace, out: TextIO) -> None: ...
