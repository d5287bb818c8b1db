"""How ``mqadmin`` prints: ``--json`` as one JSON document for scripts, else the command's own text built from
``table`` (columns padded, headers ``#``-prefixed as RocketMQ's mqadmin prints them)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TextIO, TypeVar

from oms.admin import models as m
from oms.mqadmin.command import SubCommand

R = TypeVar("R")


def emit(command: SubCommand[R], result: R, args: argparse.Namespace, out: TextIO) -> None:
    """The one place that chooses between JSON and the command's text."""
    if args.json:
        out.write(json.dumps(m.to_jsonable(result), indent=2, sort_keys=True) + "\n")
    else:
        command.render(result, args, out)
    out.flush()


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO) -> None:
    """Columns padded to their widest cell, headers prefixed with ``#`` as mqadmin prints them."""
    cells = [[f"#{h}" for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for row in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")


def human_time(ms: int) -> str:
    if ms <= 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def body_text(body: bytes, limit: int = 1024) -> str:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return f"<{len(body)} bytes, not UTF-8; use --json for base64>"
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"
