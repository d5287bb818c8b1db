"""What a log record becomes on the wire: a JSON body, tag, keys and properties; packing of backlogs; decoding.

A message holds one record, or, when a backlog built up, up to ``records_per_message`` consecutive records of
one level and one logger as JSON lines, so tag and properties stay exact for every record in it.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orbitmq.limits import MAX_SEND_BATCH_MESSAGES
from plugins.logappender.config import MAX_KEYS_PER_MESSAGE, AppenderConfig

# message properties (user properties; RocketMQ's Java appenders set APPENDER_TYPE the same way)
PROP_APPENDER = "APPENDER_TYPE"
PROP_LOGGER = "logger"
PROP_HOST = "host"
PROP_SERVICE = "service"
PROP_PID = "pid"
PROP_RECORDS = "records"  # how many records the body holds (JSON lines)
PROP_SEQ = "seq"  # the process-local sequence number of the first record: order and duplicates downstream

STD_ATTRIBUTES = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}
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


@dataclass(slots=True)
class Entry:
    """One serialized record: the sender packs entries into messages."""

    tag: str
    logger: str
    keys: tuple[str, ...]
    body: bytes
    seq: int = 0


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


class UtcStamp:
    """ISO 8601 UTC timestamps with milliseconds; the second's text is cached (records come in bursts)."""

    __slots__ = ("_prefix", "_second")

    def __init__(self) -> None:
        self._second = -1
        self._prefix = ""

    def __call__(self, created: float) -> str:
        second = int(created)
        if second != self._second:
            self._second = second
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._prefix}.{int((created - second) * 1000):03d}Z"


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
    """Builds the default JSON body of stdlib records (the loguru and structlog adapters reuse ``finish``)."""

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
        self._quoted: dict[str | None, str] = {}  # JSON text of level, logger, thread, module and function names
        self._tags: dict[str, str] = {}  # level name -> tag

    def stdlib(self, record: logging.LogRecord, formatted: str | None, seq: int) -> Entry:
        """``formatted`` is the body a user formatter produced on the logging thread, else the default JSON."""
        cfg = self.config
        attrs = record.__dict__
        msg = record.msg
        if type(msg) is dict:  # structlog's ProcessorFormatter carries the event dict: its ids are keys too
            keys = keys_of(cfg.key_fields, attrs, msg)
        else:  # most records carry no key field: two dict lookups, not a walk over the record's attributes
            keys = keys_of(cfg.key_fields, attrs) if any(f in attrs for f in cfg.key_fields) else ()
        tag = cfg.tag or self._tags.get(record.levelname) or self._tag_of(record.levelname)
        if formatted is not None:
            return Entry(tag, record.name, keys, formatted.encode("utf-8"), seq)
        # The body is assembled from escaped pieces rather than a dict through json, the names a process repeats
        # (level, logger, thread, module, function) quoted once: the sender's CPU per record is what the
        # application pays for shipping (the GIL is shared).
        q = self._quoted
        level = q.get(record.levelname) or self._quote_name(record.levelname)
        name = q.get(record.name) or self._quote_name(record.name)
        thread = q.get(record.threadName) or self._quote_name(record.threadName)
        module = q.get(record.module) or self._quote_name(record.module)
        func = q.get(record.funcName) or self._quote_name(record.funcName)
        message = attrs.get("message", msg)
        body = (
            f'{{"timestamp":"{self.stamp(record.created)}","level":{level},"logger":{name},"message":'
            f'{_quote(message) if type(message) is str else _value(message)},"thread":{thread},'
            f'"process":{_value(record.process)},"module":{module},"func":{func},"line":{record.lineno:d},'
            f'"seq":{seq:d}{self.static_json}'
        )
        if record.exc_text:
            body += f',"exception":{_value(record.exc_text)}'
        if record.stack_info:
            body += f',"stack":{_value(record.stack_info)}'
        if not attrs.keys() <= STD_ATTRIBUTES:  # a C-level subset check: extra fields are rare
            body += "".join(
                f",{_quote(name_)}:{_value(value)}" for name_, value in attrs.items() if name_ not in self._skip
            )
        return Entry(tag, record.name, keys, (body + "}").encode("utf-8"), seq)

    def _tag_of(self, level: str) -> str:
        tag = self._tags[level] = clean_tag(level)
        return tag

    def _quote_name(self, text: str | None) -> str:
        quoted = _value(text)
        if type(text) is str and len(self._quoted) < QUOTED_CACHE_SIZE:
            self._quoted[text] = quoted
        return quoted

    def document(self, doc: dict[str, Any], level: str, logger: str, seq: int, keys: tuple[str, ...]) -> Entry:
        """A body built by an adapter (loguru, structlog): static fields and ``seq`` added, then JSON."""
        for name, value in self.static.items():
            doc.setdefault(name, value)
        doc["seq"] = seq
        tag = self.config.tag or clean_tag(level)
        return Entry(tag, logger, keys, encode_json(doc).encode("utf-8"), seq)


def pack(entries: Sequence[Entry], records_per_message: int, max_bytes: int) -> list[OutMessage]:
    """Entries as messages, in order. A batch that fits one request as one record per message is sent that way;
    a bigger backlog packs runs of one tag and logger, so a message never mixes levels or loggers."""
    if len(entries) <= MAX_SEND_BATCH_MESSAGES or records_per_message <= 1:
        return [OutMessage(e.tag, e.logger, e.keys, e.body, 1, e.seq) for e in entries]
    out: list[OutMessage] = []
    run: list[Entry] = []
    size = 0

    def close() -> None:
        keys: list[str] = []
        for e in run:
            for k in e.keys:
                if k not in keys and len(keys) < MAX_KEYS_PER_MESSAGE:
                    keys.append(k)
        first = run[0]
        body = first.body if len(run) == 1 else b"\n".join(e.body for e in run)
        out.append(OutMessage(first.tag, first.logger, tuple(keys), body, len(run), first.seq))

    for e in entries:
        if b"\n" in e.body:  # a multi-line body (custom formatter) travels alone: JSON lines could not split it
            if run:
                close()
                run, size = [], 0
            out.append(OutMessage(e.tag, e.logger, e.keys, e.body, 1, e.seq))
            continue
        if run and (
            e.tag != run[0].tag
            or e.logger != run[0].logger
            or len(run) >= records_per_message
            or size + len(e.body) > max_bytes
        ):
            close()
            run, size = [], 0
        run.append(e)
        size += len(e.body) + 1
    if run:
        close()
    return out


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
