"""RocketMQ's delay levels: the ``messageDelayLevel`` ladder (``1s 5s 10s 30s 1m ... 2h``) parsed into ms.

Level N (1-based) waits ``levels[N-1]``; a level above the last uses the last. Retries use level 3 + reconsumeTimes.
"""

from __future__ import annotations

import re

from orbitmq.errors import Code, MQError
from orbitmq.message_const import PROPERTY_CLIENT_DELAY_LEVEL

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
RETRY_BASE_LEVEL = 3  # the first retry waits level 3 (10 s with the default ladder)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_ITEM = re.compile(r"^(\d+)(ms|s|m|h|d)$")


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """The ladder in ms; ValueError naming ``messageDelayLevel`` and the bad item otherwise."""
    levels: list[int] = []
    for item in text.split():
        m = _ITEM.match(item.strip().lower())
        if m is None:
            raise ValueError(f"messageDelayLevel item {item!r} is not <number><ms|s|m|h|d>")
        levels.append(int(m.group(1)) * _UNIT_MS[m.group(2)])
    if not levels:
        raise ValueError("messageDelayLevel is empty: it needs at least one delay such as 1s")
    return tuple(levels)


DEFAULT_DELAY_LEVELS_MS: tuple[int, ...] = parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL)


def clamp_level(level: int, levels: tuple[int, ...]) -> int:
    """A level in 1..len(levels): above the maximum means the maximum (RocketMQ)."""
    return max(1, min(level, len(levels)))


def delay_ms(level: int, levels: tuple[int, ...] | None = None) -> int:
    """How long delay ``level`` waits on ``levels`` (RocketMQ's default ladder when None), clamped to the ladder."""
    ladder = DEFAULT_DELAY_LEVELS_MS if levels is None else levels
    return ladder[clamp_level(level, ladder) - 1]


def retry_level(reconsume_times: int, levels: tuple[int, ...]) -> int:
    return clamp_level(RETRY_BASE_LEVEL + reconsume_times, levels)


def client_delay_level(raw: str, max_level: int) -> int:
    """A producer's delay level property: an integer; 0 or less means no delay, above ``max_level`` the maximum."""
    try:
        level = int(raw)
    except ValueError:
        raise MQError(
            Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
            f"property {PROPERTY_CLIENT_DELAY_LEVEL}={raw!r} is not an integer delay level (1..{max_level})",
        ) from None
    return max(0, level)
