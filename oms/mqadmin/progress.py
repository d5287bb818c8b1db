"""Progress lines of long-running commands: on stderr when a person watches (a terminal) or ``--progress`` asks,
so scripts reading stdout or ``--json`` get only the result."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO


def progress_stream(args: argparse.Namespace) -> TextIO | None:
    if getattr(args, "progress", False) or sys.stderr.isatty():
        return sys.stderr
    return None


def add_progress_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--progress", action="store_true", help="print progress on stderr (default: on a terminal)")
