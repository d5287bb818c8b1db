"""Options of ``format("rocketmq")``: names, defaults and parsing into frozen dataclasses (driver side).

Everything is checked when the query is planned, so a typo fails at ``load()``/``start()`` naming the option, not in
a task on an executor. Spark hands options as a case-insensitive map of strings.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from spark_connector.errors import ConnectorErrorCode, RocketMQConnectorError, option_error
from spark_connector.offsets import EARLIEST, LATEST, QueueKey, parse_queue_key

# Spark itself puts these into a source's or sink's options; they are not ours to refuse.
SPARK_OWNED = frozenset({"path", "checkpointlocation", "queryname"})

CONNECTION_OPTIONS = ("nameServer", "endpoints", "namespace", "operationTimeoutMs")
READ_OPTIONS = (
    *CONNECTION_OPTIONS,
    "subscribe",
    "subscribePattern",
    "assign",
    "subExpression",
    "sql92",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "minPartitions",
    "maxOffsetsPerPartition",
    "failOnDataLoss",
    "includeProperties",
    "group",
    "pullBatchSize",
    "pullTimeoutMs",
    "pullsInFlight",
    "recordBatchSize",
    "pullDecoding",
)
WRITE_OPTIONS = (
    *CONNECTION_OPTIONS,
    "topic",
    "producerGroup",
    "sendTimeoutMs",
    "batchSize",
    "maxInFlight",
    "idempotenceKeys",
)

DEFAULT_GROUP = "spark-rocketmq-reader"
DEFAULT_MAX_OFFSETS_PER_PARTITION = 200_000
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000  # Kafka's 15m
DEFAULT_PULL_BATCH_SIZE = 1024  # the broker's most per PullBatch (orbitmq.limits.MAX_PULL_BATCH_SIZE)
DEFAULT_PULL_TIMEOUT_MS = 3000
# A task keeps this many pulls of its range outstanding, so the broker's work and the network overlap the Arrow
# conversion. 2 (one ahead) measured as fast as 4 and faster than 1 (bench_spark A/B, docs/spark.md): every process
# is CPU-bound on a small machine, and more threads only add GIL hand-offs.
DEFAULT_PULLS_IN_FLIGHT = 2
MAX_PULLS_IN_FLIGHT = 16  # one thread each in the task
# Rows per Arrow record batch handed to Spark: several pulls in one batch, because Spark's Arrow hand-over (IPC
# write, JVM batch conversion) costs per batch too (bench_spark A/B: 1024 -> 8192 rows 1.22x, 32768 no better).
DEFAULT_RECORD_BATCH_SIZE = 8192
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$")
_DURATION_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


class Decoding(Enum):
    """How a task turns pulled records into Arrow: from the payload's bytes (``arrow``: ``PullConsumer.pull_frames``
    and ``oms.consumer.arrow_columns``, no Python object per value) or through ``pull_columns``' Python lists
    (``columns``, the reader before issue 16's second round; kept for comparison)."""

    ARROW = "arrow"
    COLUMNS = "columns"


class TopicMode(Enum):
    SUBSCRIBE = "subscribe"
    PATTERN = "subscribePattern"
    ASSIGN = "assign"


# A start or end position: EARLIEST/LATEST, or per topic and queue an offset (EARLIEST/LATEST allowed as values),
# or a timestamp in ms.
SpecificOffsets = dict[str, dict[QueueKey, int]]


@dataclass(frozen=True)
class Position:
    """``startingOffsets``/``endingOffsets`` (+ ``*Timestamp``) resolved: exactly one of the three is set."""

    default: int | None = None  # EARLIEST or LATEST for every queue
    specific: SpecificOffsets | None = None
    timestamp_ms: int | None = None


@dataclass(frozen=True)
class Connection:
    """Where the brokers are: an ``oms`` access-point URL, resolved on the driver (executors may lack the env)."""

    url: str
    operation_timeout_ms: int = 10_000


@dataclass(frozen=True)
class ReadOptions:
    connection: Connection
    mode: TopicMode
    topics: tuple[str, ...] = ()  # subscribe
    pattern: str | None = None  # subscribePattern
    assigned: dict[str, tuple[QueueKey, ...]] = field(default_factory=dict)  # assign
    expression: str | None = None  # the broker-side filter: a tag expression or SQL92
    expression_type: str | None = None  # None (tag) or "SQL92"
    starting: Position = Position(default=LATEST)
    ending: Position = Position(default=LATEST)
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    min_partitions: int | None = None
    max_offsets_per_partition: int = DEFAULT_MAX_OFFSETS_PER_PARTITION
    fail_on_data_loss: bool = True
    include_properties: bool = False
    group: str | None = None
    pull_batch_size: int = DEFAULT_PULL_BATCH_SIZE
    pull_timeout_ms: int = DEFAULT_PULL_TIMEOUT_MS
    pulls_in_flight: int = DEFAULT_PULLS_IN_FLIGHT
    record_batch_size: int = DEFAULT_RECORD_BATCH_SIZE
    decoding: Decoding = Decoding.ARROW

    @property
    def consumer_group(self) -> str:
        return self.group or DEFAULT_GROUP


@dataclass(frozen=True)
class WriteOptions:
    connection: Connection
    topic: str | None = None
    producer_group: str | None = None
    send_timeout_ms: int = 30_000
    batch_size: int = 512
    max_in_flight: int = 4
    idempotence_keys: bool = True


class _Opts:
    """The user's options by lower-cased name, each read at most once; what is left over is unknown."""

    def __init__(self, options: Mapping[str, str], known: tuple[str, ...], what: str) -> None:
        self._canonical = {name.lower(): name for name in known}
        self._values: dict[str, str] = {}
        for key, value in options.items():
            low = key.lower()
            if low in SPARK_OWNED:
                continue
            if low not in self._canonical:
                raise option_error(
                    key,
                    f"unknown {what} option; the {what} options are: {', '.join(sorted(known, key=str.lower))}",
                    ConnectorErrorCode.UNKNOWN_OPTION,
                )
            self._values[low] = str(value)

    def has(self, name: str) -> bool:
        return name.lower() in self._values

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self._values.get(name.lower())
        if value is None:
            return default
        if not value.strip():
            raise option_error(name, "must not be empty")
        return value.strip()

    def number(self, name: str, default: int | None = None, *, minimum: int = 1) -> int | None:
        raw = self.text(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise option_error(name, f"{raw!r} is not an integer") from None
        if value < minimum:
            raise option_error(name, f"{value} is below the minimum {minimum}")
        return value

    def flag(self, name: str, default: bool) -> bool:
        raw = self.text(name)
        if raw is None:
            return default
        if raw.lower() not in ("true", "false"):
            raise option_error(name, f"{raw!r} is not true or false")
        return raw.lower() == "true"


def _connection(opts: _Opts) -> Connection:
    name_server, endpoints = opts.text("nameServer"), opts.text("endpoints")
    if name_server and endpoints:
        raise option_error("endpoints", "give nameServer or endpoints, not both")
    hosts = name_server or endpoints or os.environ.get("NAMESRV_ADDR", "").strip()
    if not hosts:
        raise option_error("nameServer", "required (or endpoints, or the NAMESRV_ADDR environment variable)")
    for host in re.split(r"[;,]", hosts):
        if not re.fullmatch(r"[^\s:/;,]+:\d{1,5}", host.strip()):
            raise option_error("endpoints" if endpoints else "nameServer", f"{host!r} is not host:port")
    namespace = opts.text("namespace", "") or ""
    timeout = opts.number("operationTimeoutMs", 10_000)
    assert timeout is not None
    return Connection(f"oms:rocketmq://{hosts.replace(',', ';')}/{namespace}", timeout)


def parse_duration_ms(option: str, raw: str) -> int:
    """``500ms``, ``30s``, ``15m``, ``1h`` or a number of milliseconds."""
    match = _DURATION.match(raw)
    if not match:
        raise option_error(option, f"{raw!r} is not a duration such as 500ms, 30s, 15m or 1h")
    return int(match.group(1)) * _DURATION_MS[match.group(2) or "ms"]


def _json_object(option: str, raw: str) -> dict[str, object]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise option_error(option, f"malformed JSON ({exc.msg} at character {exc.pos}): {raw!r}") from None
    if not isinstance(value, dict):
        raise option_error(option, f"must be a JSON object, got {raw!r}")
    return value


def _specific_offsets(option: str, raw: str, *, allow_earliest: bool) -> SpecificOffsets:
    """``{"topic": {"broker-a:0": 23, "broker-a:1": -2}}``: -2 earliest, -1 latest (Kafka's conventions)."""
    out: SpecificOffsets = {}
    for topic, queues in _json_object(option, raw).items():
        if not isinstance(queues, dict) or not queues:
            raise option_error(option, f'topic {topic!r} needs an object of queues, e.g. {{"broker-a:0": 23}}')
        per_queue: dict[QueueKey, int] = {}
        for key, offset in queues.items():
            queue = parse_queue_key(option, key)
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise option_error(option, f"offset of {topic}/{key} must be an integer >= -2, got {offset!r}")
            if offset == EARLIEST and not allow_earliest:
                raise option_error(option, f"{topic}/{key}: -2 (earliest) is not an end offset")
            per_queue[queue] = offset
        out[topic] = per_queue
    return out


def _position(opts: _Opts, offsets_name: str, timestamp_name: str, default: int, *, starting: bool) -> Position:
    raw_ts = opts.text(timestamp_name)
    raw = opts.text(offsets_name)
    if raw_ts is not None:
        if raw is not None:
            raise option_error(timestamp_name, f"give {offsets_name} or {timestamp_name}, not both")
        timestamp = opts.number(timestamp_name, minimum=0)
        return Position(timestamp_ms=timestamp)
    if raw is None:
        return Position(default=default)
    if raw.lower() == "earliest":
        if not starting:
            raise option_error(offsets_name, "'earliest' is not an end position; use 'latest' or JSON")
        return Position(default=EARLIEST)
    if raw.lower() == "latest":
        return Position(default=LATEST)
    if not raw.startswith("{"):
        raise option_error(offsets_name, f"{raw!r} is neither 'earliest', 'latest' nor a JSON object")
    return Position(specific=_specific_offsets(offsets_name, raw, allow_earliest=starting))


def _assign(raw: str) -> dict[str, tuple[QueueKey, ...]]:
    """``{"topic": ["broker-a:0", "broker-a:1"]}``."""
    out: dict[str, tuple[QueueKey, ...]] = {}
    for topic, queues in _json_object("assign", raw).items():
        if not isinstance(queues, list) or not queues or not all(isinstance(q, str) for q in queues):
            raise option_error("assign", f'topic {topic!r} needs a list of queues, e.g. ["broker-a:0"]')
        out[topic] = tuple(sorted({parse_queue_key("assign", q) for q in queues}))
    return out


def _topic_names(raw: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
    if not names:
        raise option_error("subscribe", "names no topic")
    return names


def parse_read_options(options: Mapping[str, str], *, streaming: bool | None) -> ReadOptions:
    """The source's options, checked; ``streaming`` picks the defaults (start latest vs earliest) and the rules
    (None: at ``load()``, where Spark has not said yet whether the query is batch or streaming)."""
    opts = _Opts(options, READ_OPTIONS, "read")
    connection = _connection(opts)
    given = [m for m in TopicMode if opts.has(m.value)]
    if len(given) != 1:
        names = ", ".join(m.value for m in TopicMode)
        if given:
            raise option_error(given[1].value, f"exactly one of {names} may be given, got {given[0].value} too")
        raise option_error("subscribe", f"one of {names} is required: which topics to read")
    mode = given[0]
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: dict[str, tuple[QueueKey, ...]] = {}
    if mode is TopicMode.SUBSCRIBE:
        topics = _topic_names(opts.text("subscribe") or "")
    elif mode is TopicMode.PATTERN:
        pattern = opts.text("subscribePattern")
        try:
            re.compile(pattern or "")
        except re.error as exc:
            raise option_error("subscribePattern", f"{pattern!r} is not a regular expression: {exc}") from None
    else:
        assigned = _assign(opts.text("assign") or "")

    tag, sql = opts.text("subExpression"), opts.text("sql92")
    if tag and sql:
        raise option_error("sql92", "give subExpression (tags) or sql92, not both")
    expression, expression_type = (sql, "SQL92") if sql else ((tag, None) if tag and tag != "*" else (None, None))

    starting = _position(opts, "startingOffsets", "startingTimestamp", LATEST if streaming else EARLIEST, starting=True)
    ending = _position(opts, "endingOffsets", "endingTimestamp", LATEST, starting=False)
    if streaming is True and (opts.has("endingOffsets") or opts.has("endingTimestamp")):
        name = "endingOffsets" if opts.has("endingOffsets") else "endingTimestamp"
        raise option_error(name, "is for batch queries; a stream has no end")
    for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
        if streaming is False and opts.has(name):
            raise option_error(name, "is for streaming queries (readStream)")
    max_delay_raw = opts.text("maxTriggerDelay")
    max_delay = parse_duration_ms("maxTriggerDelay", max_delay_raw) if max_delay_raw else DEFAULT_MAX_TRIGGER_DELAY_MS
    max_per_trigger = opts.number("maxOffsetsPerTrigger")
    min_per_trigger = opts.number("minOffsetsPerTrigger")
    if max_per_trigger is not None and min_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise option_error("minOffsetsPerTrigger", f"{min_per_trigger} exceeds maxOffsetsPerTrigger {max_per_trigger}")
    pulls_in_flight = opts.number("pullsInFlight", DEFAULT_PULLS_IN_FLIGHT) or 1
    if pulls_in_flight > MAX_PULLS_IN_FLIGHT:
        raise option_error("pullsInFlight", f"{pulls_in_flight} exceeds {MAX_PULLS_IN_FLIGHT}")
    decoding_raw = (opts.text("pullDecoding") or Decoding.ARROW.value).strip().lower()
    decodings = {d.value: d for d in Decoding}
    if decoding_raw not in decodings:
        raise option_error("pullDecoding", f"{decoding_raw!r} is not one of {', '.join(decodings)}")
    group = opts.text("group")
    if group is not None and not re.fullmatch(r"[%|a-zA-Z0-9_-]{1,255}", group):
        raise option_error("group", f"{group!r} is not a consumer group name (letters, digits, _ - % |, at most 255)")

    result = ReadOptions(
        connection=connection,
        mode=mode,
        topics=topics,
        pattern=pattern,
        assigned=assigned,
        expression=expression,
        expression_type=expression_type,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=max_delay,
        min_partitions=opts.number("minPartitions"),
        max_offsets_per_partition=opts.number("maxOffsetsPerPartition", DEFAULT_MAX_OFFSETS_PER_PARTITION) or 1,
        fail_on_data_loss=opts.flag("failOnDataLoss", True),
        include_properties=opts.flag("includeProperties", False),
        group=group,
        pull_batch_size=opts.number("pullBatchSize", DEFAULT_PULL_BATCH_SIZE) or 1,
        pull_timeout_ms=opts.number("pullTimeoutMs", DEFAULT_PULL_TIMEOUT_MS, minimum=0) or 0,
        pulls_in_flight=pulls_in_flight,
        record_batch_size=opts.number("recordBatchSize", DEFAULT_RECORD_BATCH_SIZE) or 1,
        decoding=decodings[decoding_raw],
    )
    _check_named_topics(result)
    return result


def _check_named_topics(options: ReadOptions) -> None:
    """Topics named in offsets JSON must be read by the query (a typo there would silently do nothing)."""
    read = set(options.topics) | set(options.assigned)
    if options.mode is TopicMode.PATTERN:
        return
    for name, position in (("startingOffsets", options.starting), ("endingOffsets", options.ending)):
        for topic in (position.specific or {}).keys() - read:
            raise option_error(name, f"names topic {topic!r}, which the query does not read ({sorted(read)})")


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    opts = _Opts(options, WRITE_OPTIONS, "write")
    send_timeout = opts.number("sendTimeoutMs", 30_000)
    batch_size = opts.number("batchSize", 512)
    in_flight = opts.number("maxInFlight", 4)
    if batch_size is not None and batch_size > 1024:
        raise RocketMQConnectorError(
            ConnectorErrorCode.INVALID_OPTION, f"option 'batchSize': {batch_size} exceeds 1024 messages", "batchSize"
        )
    assert send_timeout is not None and batch_size is not None and in_flight is not None
    return WriteOptions(
        connection=_connection(opts),
        topic=opts.text("topic"),
        producer_group=opts.text("producerGroup"),
        send_timeout_ms=send_timeout,
        batch_size=batch_size,
        max_in_flight=in_flight,
        idempotence_keys=opts.flag("idempotenceKeys", True),
    )
