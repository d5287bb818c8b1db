"""``mqadmin``'s entry point (RocketMQ's ``MQAdminStartup``): parse the command line, connect, run one command, print
its result, and turn failures into stderr lines and exit codes."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import oms
from oms.errors import OMSException
from oms.mqadmin.command import EXIT_ERROR, EXIT_OK, EXIT_USAGE, Admin, SubCommand, UsageError
from oms.mqadmin.options import add_shared_arguments
from oms.mqadmin.output import emit
from oms.mqadmin.registry import COMMANDS
from oms.url import NAMESRV_ENV


def build_parser(commands: Sequence[SubCommand[Any]] = COMMANDS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mqadmin",
        description="OrbitMQ admin tool (RocketMQ mqadmin subcommands and flags).",
        epilog=f"Name servers come from -n or {NAMESRV_ENV}; --brokerAddr talks to brokers without a name server.",
    )
    sub = parser.add_subparsers(dest="command", metavar="command")
    sub.required = True
    for command in commands:
        p = sub.add_parser(command.name, help=command.help, description=command.help)
        p.set_defaults(subcommand=command)
        add_shared_arguments(p, short_broker_addr=command.short_broker_addr)
        command.add_arguments(p)
    return parser


def access_point_url(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    """Name servers from -n, else brokers from --brokerAddr (or -b), else NAMESRV_ADDR."""
    hosts = args.namesrvAddr or args.brokerAddr or environ.get(NAMESRV_ENV, "").strip()
    if not hosts:
        raise UsageError(f"no name server: give -n host:port, set {NAMESRV_ENV}, or give --brokerAddr host:port")
    return f"oms:rocketmq://{hosts}/"


def run(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run one command; returns the exit code (0 ok, 1 failed, 2 bad command line)."""
    out, err = out or sys.stdout, err or sys.stderr
    parser = build_parser()
    try:
        # argparse prints usage errors and --help itself: to the streams this run was given
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed its message (or the help) already
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    command: SubCommand[Any] = args.subcommand
    try:
        url = access_point_url(args, os.environ)
        with (
            oms.get_messaging_access_point(
                url, operation_timeout=args.timeout, access_key=args.accessKey, secret_key=args.secretKey
            ) as ap,
            ap.resource_manager() as rm,
        ):
            result = command.execute(args, Admin(rm, ap))
    except UsageError as exc:
        parser.print_usage(err)
        err.write(f"mqadmin {args.command}: error: {exc}\n")
        return EXIT_USAGE
    except OMSException as exc:
        err.write(f"mqadmin {args.command}: {exc}\n")
        return EXIT_ERROR
    except ValueError as exc:  # e.g. only one of accessKey/secretKey
        err.write(f"mqadmin {args.command}: {exc}\n")
        return EXIT_ERROR
    emit(command, result, args, out)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(argv))
