"""What printMsg and printMsgByQueue share: RocketMQ's tag subscription expression as a filter, and one message
printed the way those commands do (the body decoded with ``-c charsetName``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TextIO

DEFAULT_CHARSET = "UTF-8"


def tag_filter(expression: str | None) -> Callable[[dict[str, Any]], bool]:
    """``*`` (or nothing) keeps every row; ``a || b`` keeps rows tagged a or b."""
    if expression is None or expression.strip() in ("", "*"):
        return lambda _row: True
    tags = {t.strip() for t in expression.split("||") if t.strip()}
    return lambda row: row.get("tags") in tags


def check_charset(name: str) -> str:
    try:
        "".encode(name)
    except LookupError:
        raise argparse.ArgumentTypeError(f"unknown charset {name!r}") from None
    return name


def print_row(row: dict[str, Any], charset: str, print_body: bool, out: TextIO) -> None:
    body = row["body"].decode(charset, errors="replace") if print_body else "-"
    out.write(
        f"MSGID: {row['msg_id']} QUEUE: {row['broker_name']}:{row['queue_id']} OFFSET: {row['queue_offset']} "
        f"TAGS: {row['tags'] or '-'} KEYS: {','.join(row['keys']) or '-'} BODY: {body}\n"
    )


def add_charset_and_filter(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--charsetName", type=check_charset, default=DEFAULT_CHARSET, help="body charset")
    parser.add_argument("-s", "--subExpression", default="*", help="tags: * or tagA || tagB")
