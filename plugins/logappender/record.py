"""What a log record becomes on the wire: a JSON body, tag, keys and properties; packing of backlogs; decoding.

A message holds one record, or, when a backlog built up, up to ``records_per_message`` consecutive records of
one level and one logger as JSON lines, so tag and properties stay exact for every record in it.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import operator
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

from plugins.logappender.baked import BakedForms
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
Columns = tuple[list[str], Sequence[str], list[tuple[str, ...]], list[bytes], range]  # Encoded.extend's arguments


@dataclass(slots=True)
class Encoded:
    """A batch's rows, in order, as columns (the sender's hot path builds whole columns in C, never a tuple per
    record), and the records that could not be serialized (dropped, counted)."""

    tags: list[str] = field(default_factory=list)
    loggers: list[str] = field(default_factory=list)
    keys: list[tuple[str, ...]] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    failed: int = 0
    error: Exception | None = None
    # every body is one line (the compact path's JSON: its template and quoted values hold no line break), so
    # packing need not count line breaks; rows appended one at a time (custom formatters) may span lines
    single_line: bool = True

    @classmethod
    def of_rows(cls, rows: Iterable[Row]) -> Encoded:
        out = cls()
        for row in rows:
            out.append(row)
        return out

    def append(self, row: Row) -> None:
        tag, logger, keys, body, seq = row
        self.single_line = False
        self.tags.append(tag)
        self.loggers.append(logger)
        self.keys.append(keys)
        self.bodies.append(body)
        self.seqs.append(seq)

    def extend(
        self,
        tags: Iterable[str],
        loggers: Iterable[str],
        keys: Iterable[tuple[str, ...]],
        bodies: Iterable[bytes],
        seqs: Iterable[int],
    ) -> None:
        self.tags.extend(tags)
        self.loggers.extend(loggers)
        self.keys.extend(keys)
        self.bodies.extend(bodies)
        self.seqs.extend(seqs)

    def fail(self, exc: Exception) -> None:
        self.failed += 1
        self.error = exc

    def slice(self, start: int, stop: int) -> Encoded:
        return Encoded(
            self.tags[start:stop],
            self.loggers[start:stop],
            self.keys[start:stop],
            self.bodies[start:stop],
            self.seqs[start:stop],
            single_line=self.single_line,
        )

    @property
    def rows(self) -> list[Row]:
        return list(zip(self.tags, self.loggers, self.keys, self.bodies, self.seqs, strict=True))

    def __len__(self) -> int:
        return len(self.bodies)


class Formatted(NamedTuple):
    """A record queued with its formatter's output, which becomes the body (a type of its own: plain tuples in the
    queue are compact records)."""

    record: logging.LogRecord
    text: str


# What the handler queues for the usual record (a str message with immutable arguments, no traceback, stack or
# extra fields): these fields of ``record.__dict__`` followed by the call's arguments, in one plain tuple
# (``compact_record``). The LogRecord itself then dies on the logging thread, as with NullHandler. A queued
# LogRecord (an object and its dict, tracked by the cyclic garbage collector) made the collector walk thousands of
# live records again and again: about 1.2 us per record of GC time in the bench, more than the encoding. A tuple of
# strings and numbers is untracked by the first collection that sees it; one holding the arguments' own tuple is not
# (the collector looks at it before it has untracked the inner tuple) and lived on to the oldest generation, where
# every full collection walked it again: hence the arguments are spliced in, not nested.
COMPACT_FIELDS = (
    "created",
    "levelname",
    "name",
    "threadName",
    "process",
    "module",
    "funcName",
    "lineno",
    "msg",
    "pathname",
)
compact_fields = operator.itemgetter(*COMPACT_FIELDS)  # of a record's __dict__
_C_LINE, _C_MSG, _C_PATH = (COMPACT_FIELDS.index(f) for f in ("lineno", "msg", "pathname"))
_C_ARGS = len(COMPACT_FIELDS)  # where the arguments start
_COLUMN_GETTERS = tuple(operator.itemgetter(i) for i in range(_C_PATH))  # the columns a body needs, in order
_ARGS_OF = operator.itemgetter(slice(_C_ARGS, None))
_ONE_ARG = operator.itemgetter(_C_ARGS)
_CREATED, _LEVEL, _NAME = (operator.itemgetter(COMPACT_FIELDS.index(f)) for f in ("created", "levelname", "name"))
_LINE = operator.itemgetter(_C_LINE)
# A call site (baked.py): the form key (level, logger, thread, process, module, function), line and msg, which sit
# side by side in a compact record, so one slice (a C memcpy) is the key
_SITE_FIELDS = ("levelname", "name", "threadName", "process", "module", "funcName", "lineno", "msg")
_SITE_START = COMPACT_FIELDS.index(_SITE_FIELDS[0])
assert COMPACT_FIELDS[_SITE_START : _SITE_START + len(_SITE_FIELDS)] == _SITE_FIELDS
CALL_KEY = operator.itemgetter(slice(_SITE_START, _SITE_START + len(_SITE_FIELDS)))
_THOUSAND = 1000.0  # created * 1000, the same float either way round


def _messages(items: Sequence[tuple[Any, ...]], msgs: list[str]) -> Iterable[str]:
    """The messages of compact records: ``msg % args`` where there are arguments (``getMessage`` for a str msg)."""
    arity = set(map(len, items))
    if arity == {_C_ARGS + 1}:
        # one argument each (the usual call): ``msg % arg`` is ``msg % (arg,)`` for an argument that is neither a
        # tuple nor a mapping (bytes count as one for %), so no tuple is made per record to hold it
        single = list(map(_ONE_ARG, items))
        if bytes not in set(map(type, single)):
            return map(operator.mod, msgs, single)
    args = list(map(_ARGS_OF, items))
    if min(arity) > _C_ARGS:
        return map(operator.mod, msgs, args)
    return [m % a if a else m for m, a in zip(msgs, args, strict=True)]


def _one_call_site(items: Sequence[tuple[Any, ...]], site: tuple[Any, ...]) -> bool:
    """True when every compact record has the call site (``CALL_KEY``) ``site``: one comparison per record in C,
    each key dying at once (no list of them for the collector to walk)."""
    return operator.countOf(map(CALL_KEY, items), site) == len(items)


def compact_record(attrs: Mapping[str, Any], args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A record's compact tuple from its ``__dict__`` and its (immutable) arguments."""
    return compact_fields(attrs) + args


def queued_message(item: object) -> str:
    """The message of a queued item (a compact record, a LogRecord or a ``Formatted`` one), as the body will say."""
    if type(item) is tuple:
        msg, args = item[_C_MSG], item[_C_ARGS:]
        return str(msg % args if args else msg)
    record = item.record if isinstance(item, Formatted) else item
    assert isinstance(record, logging.LogRecord)
    return str(record.__dict__.get("message") or record.getMessage())


StdlibItem = logging.LogRecord | Formatted | tuple[Any, ...]  # a record, one with its formatter's output, a compact one
BatchEncoder = Callable[[Sequence[Any], int], Encoded]  # (queued items, seq of the first) -> rows; sender thread


def batch_of(encode: Callable[[Any, int], Entry]) -> BatchEncoder:
    """A batch encoder from a per-item one (the loguru and structlog adapters): item ``i`` gets ``first + i``."""

    def encode_batch(items: Sequence[Any], first_seq: int) -> Encoded:
        out = Encoded()
        for seq, item in enumerate(items, first_seq):
            try:
                out.append(encode(item, seq))
            except Exception as exc:  # one record that cannot be serialized must not stop the others
                out.fail(exc)
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
        # The body a process repeats, quoted once per (level, logger, thread, process, module, function): a
        # %-template of the JSON object with the timestamp, message, line and seq left open; and the tag per level
        self._forms: dict[tuple[Any, ...], str] = {}
        self._tags: dict[str, str] = {}
        # the same with the call's message baked in, per call site: the fast path of compact records (baked.py)
        self._baked = BakedForms(self._form_parts, QUOTED_CACHE_SIZE)

    @property
    def takes_compact(self) -> bool:
        """True when a compact record (``COMPACT_FIELDS``) holds all its body and keys need: the key fields are not
        standard attributes (a compact record has none of its own)."""
        return not self._std_key_fields

    def stdlib(self, record: logging.LogRecord, formatted: str | None, seq: int) -> Entry:
        """One record's entry (``formatted``: the body a user formatter produced); raises if it cannot be made."""
        out = self.encode_batch([record if formatted is None else Formatted(record, formatted)], seq)
        if out.error is not None:
            raise out.error
        return Entry(*out.rows[0])

    def encode_batch(self, items: Sequence[StdlibItem], first_seq: int) -> Encoded:
        """Rows for queued items, in order: a compact record (the usual case: a whole run of them is encoded column
        by column in C, see ``_compact_columns``), a LogRecord (default JSON body, with what a compact record lacks:
        traceback, stack, extra fields), or a ``Formatted`` record whose body is its formatter's output. The
        sender's CPU per record is what the application pays for shipping (the GIL is shared)."""
        out = Encoded()
        if set(map(type, items)) == {tuple}:
            self._compact_run(cast(Sequence[tuple[Any, ...]], items), first_seq, out)
            return out
        seq = first_seq
        for kind, group in itertools.groupby(items, type):
            run: list[Any] = list(group)
            if kind is tuple:
                self._compact_run(run, seq, out)
            else:
                self._records(run, seq, out)
            seq += len(run)
        return out

    def _compact_run(self, items: Sequence[tuple[Any, ...]], first_seq: int, out: Encoded, baked: bool = True) -> None:
        """Compact records into ``out``; a run with a record that cannot be serialized is done again one by one, so
        only that record is dropped (and named, by the generic path's error)."""
        try:
            columns = self._baked_columns(items, first_seq) if baked else None
            out.extend(*(columns or self._compact_columns(items, first_seq)))
        except Exception as exc:
            if len(items) == 1:
                item = items[0]
                out.fail(RecordEncodeError(f"{item[_C_PATH]}:{item[_C_LINE]}", repr(exc)))
                return
            for seq, item in enumerate(items, first_seq):
                self._compact_run([item], seq, out, baked=False)

    def _baked_columns(self, items: Sequence[tuple[Any, ...]], first_seq: int) -> Columns | None:
        """The columns of compact records whose calls all have no argument, or all one int, with the message baked
        into each call site's template (``baked.py``): no message string and no quoting per record. None when the
        run does not qualify (the generic ``_compact_columns`` does it then)."""
        arity = set(map(len, items))
        args: list[Any] | None = None
        if arity == {_C_ARGS + 1}:
            args = list(map(_ONE_ARG, items))
            if set(map(type, args)) != {int}:  # exactly int: bool and int subclasses may print otherwise
                return None
            table = self._baked.ints
        elif arity == {_C_ARGS}:
            table = self._baked.bare
        else:
            return None
        n = len(items)
        site = CALL_KEY(items[0])
        if _one_call_site(items, site):  # the usual heavy load: one hot call site; no key per record
            template = table.get(site) or self._baked.bake(site, args is not None)
            if template is None:
                return None
            found = [template] * n
            level, name = site[0], site[1]
            names: list[str] = [name] * n
            tags = [self.config.tag or self._tag(level)] * n
        else:
            templates = self._call_templates(items, table, args is not None)
            if templates is None:
                return None
            found = templates
            names = list(map(_NAME, items))
            levels = list(map(_LEVEL, items))
            fixed_tag = self.config.tag
            tags = [fixed_tag] * n if fixed_tag else list(map(self._tag_map(levels).__getitem__, levels))
        stamps = self._stamps(list(map(_CREATED, items)))
        seqs = range(first_seq, first_seq + n)
        fields = zip(stamps, args, seqs, strict=True) if args is not None else zip(stamps, seqs, strict=True)
        bodies = list(map(str.encode, map(str.__mod__, found, fields)))
        return tags, names, [()] * n, bodies, seqs

    def _call_templates(
        self, items: Sequence[tuple[Any, ...]], table: dict[Any, str], with_int: bool
    ) -> list[str] | None:
        """The baked template of each record (several call sites), or None if one cannot be baked."""
        # each key tuple dies as soon as it was looked up: a list of them would be thousands of young objects the
        # collector walks (it set off collections on the sender thread)
        found = list(map(table.get, map(CALL_KEY, items)))
        if None in found:  # a call site not seen before (or refused, or past the cache's size)
            bake = self._baked.bake
            for i, template in enumerate(found):
                if template is None:
                    key = CALL_KEY(items[i])
                    template = table.get(key) or bake(key, with_int)
                    if template is None:
                        return None
                    found[i] = template
        return cast(list[str], found)

    def _stamps(self, created: list[float]) -> list[str]:
        """The timestamp text of each ``created``, formatted once per millisecond: records come in order and in
        bursts, so a run of one millisecond is one text repeated."""
        out: list[str] = []
        stamp = self._stamp
        for ms, run in itertools.groupby(map(int, map(_THOUSAND.__mul__, created))):
            out += itertools.repeat(stamp(ms), len(list(run)))
        return out

    def _compact_columns(self, items: Sequence[tuple[Any, ...]], first_seq: int) -> Columns:
        """The columns of compact records. Every step maps a C function over a whole column: no Python frame and no
        new object tracked by the garbage collector per record (``zip`` reuses its tuple when the consumer let go
        of it), where a loop over the records cost about twice as much."""
        n = len(items)
        # column by column: zip(*items) would hold an iterator (a tracked object) per record at once, which set
        # off collections that walked them all
        created, levels, names, threads, procs, modules, funcs, lines, msgs = (
            list(map(getter, items)) for getter in _COLUMN_GETTERS
        )
        messages = _messages(items, msgs)
        forms = self._forms
        found = list(map(forms.get, zip(levels, names, threads, procs, modules, funcs, strict=True)))
        if None in found:  # a form not seen before (or past the cache's size)
            keys = zip(levels, names, threads, procs, modules, funcs, strict=True)
            found = [t if t is not None else self._form(k) for t, k in zip(found, keys, strict=True)]
        templates = cast(list[str], found)
        seqs = range(first_seq, first_seq + n)
        fields = zip(self._stamps(created), map(_quote, messages), lines, seqs, strict=True)
        bodies = list(map(str.encode, map(str.__mod__, templates, fields)))
        fixed_tag = self.config.tag
        tags = [fixed_tag] * n if fixed_tag else list(map(self._tag_map(levels).__getitem__, levels))
        return tags, names, [()] * n, bodies, seqs

    def _stamp(self, ms: int) -> str:
        return f"{self.stamp.prefix(ms // 1000)}.{ms % 1000:03d}Z"

    def _tag_map(self, levels: Iterable[str]) -> dict[str, str]:
        """The tag of each level, with every level of ``levels`` in it."""
        for level in set(levels):
            self._tag(level)
        return self._tags

    def _tag(self, level: str) -> str:
        tag = self._tags.get(level)
        if tag is None:
            tag = self._tags[level] = clean_tag(level)
        return tag

    def _records(self, items: Sequence[logging.LogRecord | Formatted], first_seq: int, out: Encoded) -> None:
        """LogRecords and ``Formatted`` ones into ``out``, one at a time (the unusual records)."""
        append = out.append
        forms = self._forms
        std_keys = self._std_key_fields
        fixed_tag = self.config.tag
        n_plain = N_PLAIN_ATTRIBUTES
        for seq, item in enumerate(items, first_seq):
            try:
                if isinstance(item, Formatted):
                    append(self._formatted(item.record, item.text, seq))
                    continue
                record = item
                attrs = record.__dict__
                name = record.name
                key = (record.levelname, name, record.threadName, record.process, record.module, record.funcName)
                template = forms.get(key) or self._form(key)
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
                stamp = self._stamp(int(record.created * 1000))
                text = _quote(message) if type(message) is str else _value(message)
                body = template % (stamp, text, record.lineno, seq)
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
                append((fixed_tag or self._tag(record.levelname), name, keys, body.encode(), seq))
            except Exception as exc:  # one record that cannot be serialized must not stop the others
                out.fail(exc)

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

    def _form(self, key: tuple[Any, ...]) -> str:
        head, middle, end = self._form_parts(key)
        form = f"{head}%s{middle}%d{end}"
        if len(self._forms) < QUOTED_CACHE_SIZE:
            self._forms[key] = form
        return form

    def _form_parts(self, key: tuple[Any, ...]) -> tuple[str, str, str]:
        """The body's %-template in three parts, around the message's slot and the line's: the head takes the
        timestamp, the end the seq."""
        level, logger, thread, process, module, func = key

        def text(v: object) -> str:  # a JSON value in the template: a '%' in it is text, not a conversion
            return _value(v).replace("%", "%%")

        head = f'{{"timestamp":"%s","level":{text(level)},"logger":{text(logger)},"message":'
        middle = (
            f',"thread":{text(thread)},"process":{text(process)},"module":{text(module)},"func":{text(func)},"line":'
        )
        end = f',"seq":%d{self.static_json.replace("%", "%%")}}}'
        return head, middle, end

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
    """``pack_encoded`` of rows."""
    return pack_encoded(Encoded.of_rows(rows), records_per_message, max_bytes, pack_over)


def pack_encoded(
    rows: Encoded, records_per_message: int, max_bytes: int, pack_over: int | None = None
) -> list[OutMessage]:
    """Rows as messages, in order. A batch of at most ``pack_over`` records (default ``records_per_message``) goes
    as one record per message; a bigger one (a backlog: the application logs faster than one message per record
    can carry) packs runs of one tag and logger, up to ``records_per_message`` records, so a message never mixes
    levels or loggers. A run stops before its keys would pass ``MAX_KEYS_PER_MESSAGE``: every record's keys are
    kept."""
    n = len(rows)
    tags, loggers, keys, bodies, seqs = rows.tags, rows.loggers, rows.keys, rows.bodies, rows.seqs
    if n <= (records_per_message if pack_over is None else pack_over) or records_per_message <= 1:
        return list(map(OutMessage, tags, loggers, keys, bodies, itertools.repeat(1, n), seqs))
    out: list[OutMessage] = []
    i = 0
    while i < n:
        packed = _whole_chunk(rows.slice(i, i + records_per_message), max_bytes)
        if packed is not None:
            out.append(packed)
            i += packed.count
            continue
        tag, logger, body = tags[i], loggers[i], bodies[i]
        j = i + 1
        if b"\n" not in body:  # a multi-line body (custom formatter) travels alone: JSON lines could not split it
            limit = min(n, i + records_per_message)
            size = len(body)
            n_keys = len(keys[i])
            while j < limit:
                size += len(bodies[j]) + 1
                n_keys += len(keys[j])
                if (
                    tags[j] != tag
                    or loggers[j] != logger
                    or size > max_bytes
                    or b"\n" in bodies[j]
                    or n_keys > MAX_KEYS_PER_MESSAGE
                ):
                    break
                j += 1
        if j == i + 1:
            out.append(OutMessage(tag, logger, keys[i], body, 1, seqs[i]))
        else:
            out.append(OutMessage(tag, logger, _merged_keys(keys[i:j]), b"\n".join(bodies[i:j]), j - i, seqs[i]))
        i = j
    return out


def _whole_chunk(chunk: Encoded, max_bytes: int) -> OutMessage | None:
    """``chunk`` as one message when the record-by-record walk below would take all of it (one tag and logger,
    single-line bodies, no keys, within ``max_bytes``), else None. Every test runs over the whole chunk in C (a
    backlog is mostly such chunks): the walk costs about 0.8 us per record on the sender thread, this a tenth."""
    n = len(chunk)
    if n < 2 or any(chunk.keys):
        return None
    if len(set(chunk.tags)) != 1 or len(set(chunk.loggers)) != 1:
        return None
    body = b"\n".join(chunk.bodies)
    if len(body) > max_bytes or (not chunk.single_line and body.count(b"\n") != n - 1):  # a body with a line break
        return None
    return OutMessage(chunk.tags[0], chunk.loggers[0], (), body, n, chunk.seqs[0])


def _merged_keys(run: Sequence[tuple[str, ...]]) -> tuple[str, ...]:
    if not any(run):
        return ()
    keys: list[str] = []
    for record_keys in run:
        for k in record_keys:
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
