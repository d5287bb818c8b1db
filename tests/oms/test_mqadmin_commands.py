"""``mqadmin``'s shape (RocketMQ's SubCommand layout): one command per module under its topic's folder, flags next
to the command's code, every command registered and listed by ``mqadmin --help``. No servers needed."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import io
import pkgutil
import re

import pytest

import oms.mqadmin
from oms import mqadmin
from oms.mqadmin.command import SubCommand
from oms.mqadmin.registry import COMMANDS

GROUPS = ("cluster", "broker", "namesrv", "ha", "topic", "group", "offset", "message")
SHARED_FLAGS = ("--namesrvAddr", "--json", "--timeout", "--accessKey", "--secretKey", "--brokerAddr")


def snake(name: str) -> str:
    """RocketMQ's command name as a module name: queryMsgById -> query_msg_by_id, allocateMQ -> allocate_mq."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def command_modules() -> dict[str, list[type[SubCommand[object]]]]:
    """Every module under the command folders, with the SubCommand classes it defines."""
    found: dict[str, list[type[SubCommand[object]]]] = {}
    for group in GROUPS:
        package = importlib.import_module(f"oms.mqadmin.{group}")
        for info in pkgutil.iter_modules(package.__path__, f"{package.__name__}."):
            module = importlib.import_module(info.name)
            found[info.name] = [
                cls
                for _, cls in inspect.getmembers(module, inspect.isclass)
                if issubclass(cls, SubCommand) and cls.__module__ == info.name and not inspect.isabstract(cls)
            ]
    return found


def test_each_command_has_a_module_of_its_own() -> None:
    names = [c.name for c in COMMANDS]
    assert len(names) == len(set(names)), "command names are unique"
    modules = [type(c).__module__ for c in COMMANDS]
    assert len(modules) == len(set(modules)), "no two commands share a module"
    for command in COMMANDS:
        module = type(command).__module__
        _, _, group, leaf = module.split(".")
        assert group in GROUPS, f"{command.name} lives in {module}, outside the command folders {GROUPS}"
        assert leaf == snake(command.name), f"{command.name} lives in {module}, expected a module {snake(command.name)}"
        # its flags are its own code, not inherited
        assert "add_arguments" in type(command).__dict__, f"{command.name} declares no flags of its own"


def test_every_command_module_is_registered() -> None:
    registered = {type(c) for c in COMMANDS}
    for module, classes in command_modules().items():
        assert len(classes) <= 1, f"{module} holds several commands: {[c.__name__ for c in classes]}"
        for cls in classes:
            assert cls in registered, f"{cls.__name__} ({module}) is not in oms.mqadmin.registry.COMMANDS"
    in_modules = {cls for classes in command_modules().values() for cls in classes}
    assert registered == in_modules


def test_help_lists_every_command() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert mqadmin.run(["--help"], out, err) == mqadmin.EXIT_OK
    listed = out.getvalue()
    for command in COMMANDS:
        assert re.search(rf"^\s+{command.name}\s+{re.escape(command.help[:20])}", listed, re.M), (
            f"{command.name} missing from mqadmin --help"
        )


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_every_command_takes_the_shared_flags(command: SubCommand[object]) -> None:
    sub = next(a for a in mqadmin.build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices[
        command.name
    ]
    flags = {s for action in sub._actions for s in action.option_strings}
    assert set(SHARED_FLAGS) <= flags
    broker_addr = next(a for a in sub._actions if "--brokerAddr" in a.option_strings)
    assert broker_addr.option_strings == (["-b", "--brokerAddr"] if command.short_broker_addr else ["--brokerAddr"])


def test_value_errors_name_the_item() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"attribute '\+novalue': expected \+key=value or -key"):
        mqadmin.parse_attributes("+a=1,+novalue")
    with pytest.raises(argparse.ArgumentTypeError, match=r"option 'x': expected key=value"):
        mqadmin.parse_options("a=1,x")
    with pytest.raises(argparse.ArgumentTypeError, match="expected true or false, got 'maybe'"):
        mqadmin.parse_bool("maybe")


def test_package_exposes_the_console_script() -> None:
    assert oms.mqadmin.main is oms.mqadmin.startup.main
    assert importlib.util.find_spec("oms.mqadmin.__main__") is not None
