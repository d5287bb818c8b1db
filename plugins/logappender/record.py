"""What a log record becomes on the wire: a JSON body, tag, keys and properties; packing of backlogs; decoding.

A message holds one record, or, when a backlog built up, up to ``records_per_message`` consecutive records of
one level and one logger as JSON lines, so tag and properties stay exact for every record in it.
"""

from __future__ import annotations

import functools
import json
import logging
import operator
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from plugins.logappender.config import MAX_KEYS_PER_MESSAGE, AppenderConfig

# message properties (user properties; RocketMQ's Java appenders set APPENDER_TYPE the same way)
PROP_APPENDER = "APPENDER_TYPE"
PROP_LOGGER = "logger"
PROP_HOST = "host"
PROP_SERVICE = "service"
PROP_PID = "pid"
PROP_RECORDS = "records"  # how many records the body holds (JSON lines)
PROP_SEQ = "seq"  # the process-local sequence number of the first record: order and duplicates downstream

_PLAIN_RECORD = logging.makeLogRecord({}).__dict__
STD_ATTRIBUTES = frozenset(_PLAIN_RECORD) | {"message", "asctime", "taskName"}
N_PLAIN_ATTRIBUTES = len(_PLAIN_RECORD)  # what LogRecord.__init__ sets; formatters may add message and asctime
# fields of the default body: an ``extra`` of the same name is left out rather than written twice
BODY_FIELDS = frozenset({"timestamp", "level", "logger", "message", "thread", "process", "module", "func", "line"}) | {
    "seq",
    "exception",
    "stack",
}
MAX_KEY_BYTES = 128

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)
encode_json = _ENCODER.encode
_quote = json.encoder.encode_basestring  # the C string escaper json itself uses
QUOTED_CACHE_SIZE = 4096  # distinct names quoted once; a process with more quotes the rest per record


def _value(v: object) -> str:
    t = type(v)
    if t is str:
        return _quote(v)  # type: ignore[arg-type]
    if t is int:
        return str(v)
    return encode_json(v)


class Entry(NamedTuple):
    """One serialized record: the sender packs entries into messages. A tuple, not a dataclass: the sender makes
    one per record, and a plain tuple of these fields (a ``Row``) is built at C speed."""

    tag: str
    logger: str
    keys: tuple[str, ...]
    body: bytes
    seq: int = 0


Row = tuple[str, str, tuple[str, ...], bytes, int]  # an Entry's fields: what the sender's hot loop builds


@dataclass(slots=True)
class Encoded:
    """A batch's rows, in order, and the records that could not be serialized (dropped, counted)."""

    rows: list[Row]
    failed: int = 0
    error: Exception | None = None


StdlibItem = logging.LogRecord | tuple[logging.LogRecord, str]  # a record, or one with its formatter's output
BatchEncoder = Callable[[Sequence[Any], int], Encoded]  # (queued items, seq of the first) -> rows; sender thread


def batch_of(encode: Callable[[Any, int], Entry]) -> BatchEncoder:
    """A batch encoder from a per-item one (the loguru and structlog adapters): item ``i`` gets ``first + i``."""

    def encode_batch(items: Sequence[Any], first_seq: int) -> Encoded:
        out = Encoded([])
        for seq, item in enumerate(items, first_seq):
            try:
                out.rows.append(encode(item, seq))
            except Exception as exc:  # one record that cannot be serialized must not stop the others
                out.failed += 1
                out.error = exc
        return out

    return encode_batch


@dataclass(slots=True)
class OutMessage:
    """One message to send: ``count`` records from ``first_seq`` on, all of one tag and logger."""

    tag: str
    logger: str
    keys: tuple[str, ...]
    body: bytes
    count: int
    first_seq: int

    def to_json(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "logger": self.logger,
            "keys": list(self.keys),
            "body": self.body.decode("utf-8", "replace"),
            "count": self.count,
            "first_seq": self.first_seq,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OutMessage:
        return cls(
            str(data["tag"]),
            str(data["logger"]),
            tuple(str(k) for k in data["keys"]),
            str(data["body"]).encode("utf-8"),
            int(data["count"]),
            int(data["first_seq"]),
        )


class RecordEncodeError(ValueError):
    """A record cannot be serialized (for example its arguments do not fit its format); ``where`` is the call."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"logging call at {where}: {message}")
        self.where = where


def render_message(record: logging.LogRecord) -> str:
    """``record.getMessage()`` on the sender thread; a format that does not fit its arguments names the call (the
    stdlib would report it from the logging thread)."""
    try:
        return record.getMessage()
    except Exception as exc:
        raise RecordEncodeError(f"{record.pathname}:{record.lineno}", repr(exc)) from exc


class UtcStamp:
    """ISO 8601 UTC timestamps with milliseconds; the second's text is cached (records come in bursts)."""

    __slots__ = ("_prefix", "_second")

    def __init__(self) -> None:
        self._second = -1
        self._prefix = ""

    def __call__(self, created: float) -> str:
        second = int(created)
        return f"{self.prefix(second)}.{int((created - second) * 1000):03d}Z"

    def prefix(self, second: int) -> str:
        """The text of a whole second, up to the milliseconds."""
        if second != self._second:
            self._second = second
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return self._prefix


@functools.lru_cache(maxsize=256)
def clean_tag(tag: str) -> str:
    """A level name as a valid tag ('|' separates tags in expressions; blanks are refused)."""
    tag = tag.replace("|", "_").strip()
    return "".join(ch for ch in tag if ord(ch) >= 0x20 and ord(ch) != 0x7F) or "LOG"


def clean_keys(values: Iterable[object]) -> tuple[str, ...]:
    keys = []
    for value in values:
        if value is None:
            continue
        text = str(value).strip()
        if text and len(text.encode("utf-8")) <= MAX_KEY_BYTES and all(ord(c) >= 0x20 and ord(c) != 0x7F for c in text):
            keys.append(text)
    return tuple(keys)


def keys_of(fields: Sequence[str], *sources: Mapping[str, Any]) -> tuple[str, ...]:
    if not fields:
        return ()
    found = []
    for name in fields:
        for source in sources:
            value = source.get(name)
            if value is not None:
                found.append(value)
                break
    return clean_keys(found) if found else ()


class RecordEncoder:
    """Builds the default JSON body of stdlib records (the loguru and structlog adapters reuse ``document``)."""

    def __init__(self, config: AppenderConfig) -> None:
        self.config = config
        self.stamp = UtcStamp()
        static: dict[str, Any] = {"host": config.host}
        if config.service:
            static["service"] = config.service
        static.update(config.static_fields)
        self.static = static
        self.static_json = "".join(f",{_quote(k)}:{_value(v)}" for k, v in static.items())
        self._skip = STD_ATTRIBUTES | BODY_FIELDS | static.keys()
        # key fields that are standard attributes (unusual) must be looked up in records without extras too
        self._std_key_fields = any(f in STD_ATTRIBUTES for f in config.key_fields)
        # The body a process repeats, quoted once per (level, logger, thread, process, module, function): the tag,
        # and a %-template of the JSON object with the timestamp, message, line and seq left open
        self._forms: dict[tuple[Any, ...], tuple[str, str]] = {}

    def stdlib(self, record: logging.LogRecord, formatted: str | None, seq: int) -> Entry:
        """One record's entry (``formatted``: the body a user formatter produced); raises if it cannot be made."""
        out = self.encode_batch([record if formatted is None else (record, formatted)], seq)
        if out.error is not None:
            raise out.error
        return Entry(*out.rows[0])

    def encode_batch(self, items: Sequence[StdlibItem], first_seq: int) -> Encoded:
        """Rows for queued items: a record (default JSON body), or (record, formatter output) whose body is that
        output. One loop over the batch with everything it repeats hoisted out of it: the sender's CPU per record
        is what the application pays for shipping (the GIL is shared)."""
        rows: list[Row] = []
        append = rows.append
        out = Encoded(rows)
        fixed_tag = self.config.tag
        std_keys = self._std_key_fields
        forms = self._forms
        quote, value = _quote, _value
        n_plain = N_PLAIN_ATTRIBUTES
        last_ms, stamp = -1, ""
        for seq, item in enumerate(items, first_seq):
            try:
                if isinstance(item, tuple):
                    record, formatted = item
                    append(self._formatted(record, formatted, seq))
                    continue
                record = item
                attrs = record.__dict__
                name = record.name
                key = (record.levelname, name, record.threadName, record.process, record.module, record.funcName)
                form = forms.get(key) or self._form(key)
                ms = int(record.created * 1000)
                if ms != last_ms:  # records come in bursts: many share a millisecond
                    last_ms = ms
                    stamp = f"{self.stamp.prefix(ms // 1000)}.{ms % 1000:03d}Z"
                message = attrs.get("message")
                if message is None:  # left to the sender (immutable arguments, a str msg): see handler.prepare
                    msg, args = record.msg, record.args
                    if type(msg) is not str:
                        message = render_message(record)
                    elif not args:
                        message = msg
                    else:
                        try:
                            message = msg % args  # getMessage for a str msg, without its two frames
                        except Exception:
                            message = render_message(record)  # raises the error that names the call
                body = form[1] % (stamp, quote(message) if type(message) is str else value(message), record.lineno, seq)
                keys: tuple[str, ...] = ()
                # LogRecord.__init__ sets every standard attribute, so more attributes than those (plus the
                # optional message and asctime) means extra fields: a length check instead of a walk per record
                if (
                    record.exc_text
                    or record.stack_info
                    or len(attrs) > n_plain + ("message" in attrs) + ("asctime" in attrs)
                ):
                    body, keys = self._rest(record, body)
                elif std_keys or type(record.msg) is dict:
                    keys = self._keys(attrs, record.msg)
                append((fixed_tag or form[0], name, keys, body.encode("utf-8"), seq))
            except Exception as exc:  # one record that cannot be serialized must not stop the others
                out.failed += 1
                out.error = exc
        return out

    def _rest(self, record: logging.LogRecord, body: str) -> tuple[str, tuple[str, ...]]:
        """``body`` (a closed JSON object) with the traceback, the stack and the extra fields added, and the keys:
        the unusual records, kept out of ``encode_batch``'s loop."""
        parts = [body[:-1]]
        if record.exc_text:
            parts.append(f',"exception":{_value(record.exc_text)}')
        if record.stack_info:
            parts.append(f',"stack":{_value(record.stack_info)}')
        attrs = record.__dict__
        keys: tuple[str, ...] = ()
        if len(attrs) > N_PLAIN_ATTRIBUTES + ("message" in attrs) + ("asctime" in attrs):
            skip = self._skip
            parts.extend(f",{_quote(k)}:{_value(v)}" for k, v in attrs.items() if k not in skip)
            keys = self._keys(attrs, record.msg)
        elif self._std_key_fields or type(record.msg) is dict:
            keys = self._keys(attrs, record.msg)
        parts.append("}")
        return "".join(parts), keys

    def _formatted(self, record: logging.LogRecord, formatted: str, seq: int) -> Row:
        tag = self.config.tag or clean_tag(record.levelname)
        return (tag, record.name, self._keys(record.__dict__, record.msg), formatted.encode("utf-8"), seq)

    def _keys(self, attrs: Mapping[str, Any], msg: object) -> tuple[str, ...]:
        if type(msg) is dict:  # structlog's ProcessorFormatter carries the event dict: its ids are keys too
            return keys_of(self.config.key_fields, attrs, msg)
        return keys_of(self.config.key_fields, attrs)

    def _form(self, key: tuple[Any, ...]) -> tuple[str, str]:
        level, logger, thread, process, module, func = key

        def text(v: object) -> str:  # a JSON value in the template: a '%' in it is text, not a conversion
            return _value(v).replace("%", "%%")

        form = (
            clean_tag(level),
            f'{{"timestamp":"%s","level":{text(level)},"logger":{text(logger)},"message":%s,"thread":{text(thread)},'
            f'"process":{text(process)},"module":{text(module)},"func":{text(func)},"line":%d,"seq":%d'
            f"{self.static_json.replace('%', '%%')}}}",
        )
        if len(self._forms) < QUOTED_CACHE_SIZE:
            self._forms[key] = form
        return form

    def document(self, doc: dict[str, Any], level: str, logger: str, seq: int, keys: tuple[str, ...]) -> Entry:
        """A body built by an adapter (loguru, structlog): static fields and ``seq`` added, then JSON."""
        for name, value in self.static.items():
            doc.setdefault(name, value)
        doc["seq"] = seq
        tag = self.config.tag or clean_tag(level)
        return Entry(tag, logger, keys, encode_json(doc).encode("utf-8"), seq)


def pack(
    rows: Sequence[Row], records_per_message: int, max_bytes: int, pack_over: int | None = None
) -> list[OutMessage]:
    """Rows as messages, in order. A batch of at most ``pack_over`` records (default ``records_per_message``) goes
    as one record per message; a bigger one (a backlog: the application logs faster than one message per record
    can carry) packs runs of one tag and logger, up to ``records_per_message`` records, so a message never mixes
    levels or loggers. A run stops before its keys would pass ``MAX_KEYS_PER_MESSAGE``: every record's keys are
    kept."""
    n = len(rows)
    if n <= (records_per_message if pack_over is None else pack_over) or records_per_message <= 1:
        return [OutMessage(tag, logger, keys, body, 1, seq) for tag, logger, keys, body, seq in rows]
    out: list[OutMessage] = []
    i = 0
    while i < n:
        packed = _whole_chunk(rows[i : i + records_per_message], max_bytes)
        if packed is not None:
            out.append(packed)
            i += packed.count
            continue
        tag, logger, _, body, _ = first = rows[i]
        j = i + 1
        if b"\n" not in body:  # a multi-line body (custom formatter) travels alone: JSON lines could not split it
            limit = min(n, i + records_per_message)
            size = len(body)
            n_keys = len(first[2])
            while j < limit:
                row = rows[j]
                size += len(row[3]) + 1
                n_keys += len(row[2])
                if (
                    row[0] != tag
                    or row[1] != logger
                    or size > max_bytes
                    or b"\n" in row[3]
                    or n_keys > MAX_KEYS_PER_MESSAGE
                ):
                    break
                j += 1
        if j == i + 1:
            out.append(OutMessage(tag, logger, first[2], body, 1, first[4]))
        else:
            run = rows[i:j]
            out.append(OutMessage(tag, logger, _merged_keys(run), b"\n".join([r[3] for r in run]), j - i, first[4]))
        i = j
    return out


def _whole_chunk(chunk: Sequence[Row], max_bytes: int) -> OutMessage | None:
    """``chunk`` as one message when the record-by-record walk below would take all of it (one tag and logger,
    single-line bodies, no keys, within ``max_bytes``), else None. Every test runs over the whole chunk in C (a
    backlog is mostly such chunks): the walk costs about 0.8 us per record on the sender thread, this a tenth."""
    n = len(chunk)
    if n < 2 or any(map(_KEYS, chunk)):
        return None
    tags = set(map(_TAG, chunk))
    if len(tags) != 1 or len(set(map(_LOGGER, chunk))) != 1:
        return None
    body = b"\n".join(map(_BODY, chunk))
    if len(body) > max_bytes or body.count(b"\n") != n - 1:  # a body of its own holds a line break
        return None
    first = chunk[0]
    return OutMessage(first[0], first[1], (), body, n, first[4])


_TAG, _LOGGER, _KEYS, _BODY = (operator.itemgetter(i) for i in range(4))


def _merged_keys(run: Sequence[Row]) -> tuple[str, ...]:
    if not any([r[2] for r in run]):
        return ()
    keys: list[str] = []
    for r in run:
        for k in r[2]:
            if k not in keys and len(keys) < MAX_KEYS_PER_MESSAGE:
                keys.append(k)
    return tuple(keys)


def iter_records(body: bytes | str, records: int | str | None = None) -> Iterator[dict[str, Any]]:
    """The records of one message body (one JSON object, or several as JSON lines) as dicts.

    ``records`` is the message's ``records`` property: with 1 the whole body is one record even if it spans
    lines. Bodies written by a custom formatter that are not JSON come back as ``{"message": <text>}``.
    """
    text = body.decode("utf-8") if isinstance(body, bytes | bytearray) else body
    lines = [text] if records is not None and int(records) == 1 else text.split("\n")
    for line in lines:
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            yield {"message": line}
            continue
        yield doc if isinstance(doc, dict) else {"message": doc}
