"""``mqadmin``: RocketMQ's admin command line (subcommand names and flags) over the ``oms`` resource manager.

One command per module, grouped by what it administers (``cluster/``, ``topic/``, ``group/``, ``offset/``,
``message/``), listed in ``registry``; ``startup.main`` is the console script. Tables for people by default,
``--json`` for scripts; errors go to stderr with the status code, exit code 1 (2 for a bad command line).
"""

from oms.mqadmin.command import EXIT_ERROR, EXIT_OK, EXIT_USAGE, Admin, SubCommand, UsageError
from oms.mqadmin.options import parse_attributes, parse_bool, parse_options, parse_timestamp
from oms.mqadmin.output import table
from oms.mqadmin.startup import access_point_url, build_parser, main, run

__all__ = [
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_USAGE",
    "Admin",
    "SubCommand",
    "UsageError",
    "access_point_url",
    "build_parser",
    "main",
    "parse_attributes",
    "parse_bool",
    "parse_options",
    "parse_timestamp",
    "run",
    "table",
]
