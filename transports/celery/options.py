"""Transport options (``broker_transport_options``) and how kombu queue names become RocketMQ topics and groups.

Bad options are refused when the connection is made, naming the option and its limit.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

from orbitmq.limits import MAX_GROUP_LENGTH

# Options kombu itself reads from transport_options, and options meant for the Redis/SQS transports that a
# project switching its broker_url may still carry: accepted and ignored (our broker owns visibility and fanout).
KOMBU_OPTIONS: Final = frozenset(
    {
        "polling_interval",
        "body_encoding",
        "deadletter_queue",
        "max_retries",
        "interval_start",
        "interval_step",
        "interval_max",
        "client_properties",
        "confirm_publish",
        "visibility_timeout",
        "fanout_prefix",
        "fanout_patterns",
        "queue_order_strategy",
        "global_keyprefix",
    }
)
# Priority buckets: a message of priority p goes to the highest step <= p; higher steps are received first.
DEFAULT_PRIORITY_STEPS: Final = (0, 3, 6, 9)
MAX_PRIORITY: Final = 9
TOPIC_NAME_BUDGET: Final = 100  # leaves room for the group prefix and a priority-bucket suffix
_ALLOWED = re.compile(r"[^a-zA-Z0-9_-]")


@dataclass(frozen=True)
class TransportOptions:
    """``broker_transport_options`` understood by the rocketmq transport (times in seconds)."""

    invisible_time: float = 30.0  # a delivered message stays invisible this long; renewed while held
    polling_timeout: float = 5.0  # server-side long poll of one receive (the broker caps it at 20 s)
    operation_timeout: float = 5.0  # one RPC (send, ack, admin call)
    group_prefix: str = "kombu"  # consumer group of queue Q is "<prefix>_<topic of Q>"
    queue_nums: int = 4  # read/write queues of the topics created for kombu queues
    priority_steps: tuple[int, ...] = DEFAULT_PRIORITY_STEPS
    binding_cache: float = 1.0  # how long a read of the broker-side binding table is reused
    expiry_check_interval: float = 30.0  # how often queues declared with x-expires are checked for expiry
    publish_window: int = 256  # sends in flight before a publish waits for the broker; 0 = wait for every send
    publish_retry_timeout: float = 30.0  # a queued send the broker could not take is sent again this long
    access_key: str = ""
    secret_key: str = ""

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> TransportOptions:
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in raw.items():
            if key in KOMBU_OPTIONS:
                continue
            if key not in known:
                raise ValueError(
                    f"broker_transport_options: unknown option {key!r} for the rocketmq transport "
                    f"(known: {', '.join(sorted(known))})"
                )
            values[key] = _coerce(key, value, known[key].type)
        options = cls(**values)
        options.check()
        return options

    def check(self) -> None:
        # The broker refuses receive invisible times under its minInvisibleTimeMillsForRecv (10 s by default), and the
        # pull consumer does not hand out a message within 2 s of its invisibility ending.
        _in_range("invisible_time", self.invisible_time, 3.0, 12 * 3600)
        _in_range("polling_timeout", self.polling_timeout, 0.0, 20.0)
        _in_range("operation_timeout", self.operation_timeout, 0.1, 300.0)
        _in_range("queue_nums", self.queue_nums, 1, 64)
        _in_range("binding_cache", self.binding_cache, 0.0, 60.0)
        _in_range("publish_window", self.publish_window, 0, 4096)
        _in_range("publish_retry_timeout", self.publish_retry_timeout, 0.0, 3600.0)
        _in_range("expiry_check_interval", self.expiry_check_interval, 0.1, 3600.0)
        steps = self.priority_steps
        if not steps or steps[0] != 0 or list(steps) != sorted(set(steps)) or steps[-1] > MAX_PRIORITY:
            raise ValueError(
                f"broker_transport_options: priority_steps must rise strictly from 0 to at most {MAX_PRIORITY}, "
                f"got {list(steps)}"
            )
        if len(self.group_prefix) > 10 or _ALLOWED.search(self.group_prefix):
            raise ValueError(
                f"broker_transport_options: group_prefix must be at most 10 characters of [a-zA-Z0-9_-], "
                f"got {self.group_prefix!r}"
            )
        if bool(self.access_key) != bool(self.secret_key):
            raise ValueError("broker_transport_options: give both access_key and secret_key, or neither")


def _coerce(key: str, value: Any, annotation: Any) -> Any:
    kind = str(annotation)
    try:
        if kind == "float":
            return float(value)
        if kind == "int":
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        if kind == "str":
            return str(value)
        return tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"broker_transport_options: {key}={value!r} is not a valid {kind}") from None


def _in_range(name: str, value: float, low: float, high: float) -> None:
    if not low <= value <= high:
        raise ValueError(f"broker_transport_options: {name}={value} is outside [{low}, {high}]")


def topic_for_queue(queue: str) -> str:
    """The topic holding kombu queue ``queue``: its name if RocketMQ allows it, else a readable form plus a hash.

    Kombu names such as ``celery@host.celery.pidbox`` hold characters topics may not (``@``, ``.``); the hash keeps
    two such names apart.
    """
    if not queue:
        raise ValueError("queue name is empty")
    clean = _ALLOWED.sub("_", queue)
    if clean == queue and len(queue) <= TOPIC_NAME_BUDGET:
        return queue
    digest = hashlib.sha1(queue.encode("utf-8")).hexdigest()[:10]
    return f"{clean[: TOPIC_NAME_BUDGET - 11]}-{digest}"


def bucket_topic(topic: str, step: int) -> str:
    """The topic of priority bucket ``step`` (step 0 is the queue's own topic)."""
    return topic if step == 0 else f"{topic}%P{step}"


def group_for_topic(prefix: str, topic: str) -> str:
    group = f"{prefix}_{topic}"
    assert len(group) <= MAX_GROUP_LENGTH  # topic_for_queue's budget keeps it in
    return group


def bucket_of(priority: int, steps: tuple[int, ...]) -> int:
    """The highest step at or below ``priority`` (clamped to 0..9)."""
    p = max(0, min(MAX_PRIORITY, priority))
    return max(s for s in steps if s <= p)
