"""No server: option checks, dictConfig construction, the JSON body, packing, decoding and the disk spool."""

from __future__ import annotations

import gc
import json
import logging
import logging.config
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import cast

import pytest

import plugins.logappender.record as record_module
from plugins.logappender import AppenderConfig, AppenderConfigError, OverflowPolicy, RocketMQHandler, iter_records
from plugins.logappender.handler import compact, prepare
from plugins.logappender.record import (
    Encoded,
    Entry,
    OutMessage,
    RecordEncodeError,
    RecordEncoder,
    batch_of,
    pack,
    queued_message,
)
from plugins.logappender.shipper import LogShipper
from plugins.logappender.spool import DiskSpool
from plugins.logappender.transport import Ordering

ADDR = "127.0.0.1:1"  # nothing listens: the handler connects lazily, so configuring it must still work


@pytest.mark.parametrize(
    ("options", "option", "text"),
    [
        ({"overflow": "drop_everything"}, "overflow", "drop_new, drop_oldest, block"),
        ({"queue_size": -1}, "queue_size", "> 0"),
        ({"queue_size": 0}, "queue_size", "> 0"),
        ({"spool_max_bytes": -5}, "spool_max_bytes", "> 0"),
        ({"block_timeout": -0.1}, "block_timeout", ">= 0"),
        ({"records_per_message": 5000}, "records_per_message", "at most 1024"),
        ({"retry_backoff": 2.0, "retry_backoff_max": 1.0}, "retry_backoff_max", ">= retry_backoff"),
        ({"tag": "a|b"}, "tag", "'|'"),
        ({"access_key": "ak"}, "access_key", "both"),
        ({"queue_sise": 10}, "queue_sise", "unknown option"),
        ({"queue_size": "10"}, "queue_size", "must be a number"),
    ],
)
def test_bad_options_raise_at_configuration_time(options: dict[str, object], option: str, text: str) -> None:
    with pytest.raises(AppenderConfigError) as info:
        RocketMQHandler("AppLogs", namesrv_addr=ADDR, **options)
    assert info.value.option == option
    assert text in str(info.value)


@pytest.mark.parametrize("topic", ["", "bad topic", "x" * 200, "a/b", "RMQ_SYS_TRANS_HALF_TOPIC"])
def test_bad_topic_names_are_refused(topic: str) -> None:
    with pytest.raises(AppenderConfigError, match="'topic'"):
        AppenderConfig.build(topic, namesrv_addr=ADDR)


def test_access_point_defaults_to_namesrv_addr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    with pytest.raises(AppenderConfigError, match="NAMESRV_ADDR is not set"):
        AppenderConfig.build("AppLogs")
    monkeypatch.setenv("NAMESRV_ADDR", "10.0.0.1:9876;10.0.0.2:9876")
    assert AppenderConfig.build("AppLogs").url == "oms:rocketmq://10.0.0.1:9876;10.0.0.2:9876/"


def test_dictconfig_builds_the_handler_with_its_options(tmp_path: Path) -> None:
    logging.config.dictConfig(
        {
            "version": 1,
            "disable_existing_loggers": False,
            "handlers": {
                "rmq": {
                    "class": "plugins.logappender.RocketMQHandler",
                    "level": "INFO",
                    "topic": "AppLogs",
                    "namesrv_addr": ADDR,
                    "overflow": "drop_oldest",
                    "queue_size": 500,
                    "key_fields": ["request_id", "order_id"],
                    "spool_dir": str(tmp_path / "spool"),
                    "service": "checkout",
                }
            },
            "loggers": {"dictconfig.test": {"handlers": ["rmq"], "level": "INFO", "propagate": False}},
        }
    )
    handler = logging.getLogger("dictconfig.test").handlers[0]
    try:
        assert isinstance(handler, RocketMQHandler)
        cfg = handler.config
        assert (cfg.topic, cfg.overflow, cfg.queue_size) == ("AppLogs", OverflowPolicy.DROP_OLDEST, 500)
        assert cfg.service == "checkout"
        assert cfg.key_fields == ("request_id", "order_id")
        assert cfg.spool_dir == tmp_path / "spool" and cfg.spool_dir.is_dir()
        assert handler.level == logging.INFO
    finally:
        handler.close(0.5)
        logging.getLogger("dictconfig.test").handlers.clear()


def test_dictconfig_with_a_bad_option_fails_naming_it() -> None:
    config = {
        "version": 1,
        "handlers": {"rmq": {"class": "plugins.logappender.RocketMQHandler", "topic": "AppLogs", "overflow": "nope"}},
    }
    with pytest.raises(ValueError, match="rmq") as info:
        logging.config.dictConfig({**config, "disable_existing_loggers": False})
    cause = info.value.__cause__
    assert isinstance(cause, AppenderConfigError) and cause.option == "overflow", cause


def _record(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord("app.web", logging.WARNING, __file__, 42, "user %s failed", ("ann",), None, "handle")
    record.__dict__.update(extra)
    record.message = record.getMessage()
    return record


def test_the_json_body_carries_fields_extras_and_keys() -> None:
    cfg = AppenderConfig.build("AppLogs", namesrv_addr=ADDR, service="shop", static_fields={"env": "prod"})
    entry = RecordEncoder(cfg).stdlib(_record(request_id="req-7", cart={"items": 3}), None, 9)
    doc = json.loads(entry.body)
    assert entry.tag == "WARNING" and entry.logger == "app.web" and entry.keys == ("req-7",)
    assert doc["message"] == "user ann failed" and doc["level"] == "WARNING" and doc["logger"] == "app.web"
    assert doc["line"] == 42 and doc["func"] == "handle" and doc["seq"] == 9
    assert doc["service"] == "shop" and doc["env"] == "prod" and doc["host"] == cfg.host
    assert doc["request_id"] == "req-7" and doc["cart"] == {"items": 3}
    assert doc["timestamp"].endswith("Z") and "T" in doc["timestamp"]
    assert "args" not in doc and "msg" not in doc


def test_percent_signs_in_names_and_static_fields_are_text() -> None:
    """The body is a %-template per logger and call site: a '%' in what it holds must stay text."""
    cfg = AppenderConfig.build("AppLogs", namesrv_addr=ADDR, static_fields={"quota": "50%s %d %%"})
    record = logging.LogRecord("app.%s%d", logging.INFO, __file__, 7, "rate %s%%", ("99",), None, "f%s")
    record.threadName = "pool-%d"
    doc = json.loads(RecordEncoder(cfg).encode_batch([record], 3).rows[0][3])
    assert doc["logger"] == "app.%s%d" and doc["func"] == "f%s" and doc["thread"] == "pool-%d"
    assert doc["quota"] == "50%s %d %%" and doc["message"] == "rate 99%" and doc["line"] == 7 and doc["seq"] == 3


def test_a_fixed_tag_replaces_the_level() -> None:
    cfg = AppenderConfig.build("AppLogs", namesrv_addr=ADDR, tag="web")
    assert RecordEncoder(cfg).stdlib(_record(), None, 1).tag == "web"


def _entries(spec: list[tuple[str, str]], body: bytes = b'{"m":1}', keyed: bool = True) -> list[Entry]:
    return [Entry(tag, logger, (f"k{i}",) if keyed else (), body, i) for i, (tag, logger) in enumerate(spec)]


def test_small_batches_are_one_record_per_message() -> None:
    out = pack(_entries([("INFO", "a")] * 64), 64, 1 << 20)
    assert len(out) == 64 and all(m.count == 1 for m in out)
    assert [m.first_seq for m in out] == list(range(64)) and out[5].keys == ("k5",)
    never = pack(_entries([("INFO", "a")] * 1000), 1, 1 << 20)  # records_per_message=1: never packed
    assert len(never) == 1000 and all(m.count == 1 for m in never)


def test_a_batch_bigger_than_one_message_packs_and_respects_max_bytes() -> None:
    out = pack(_entries([("INFO", "a")] * 65, keyed=False), 64, 1 << 20)
    assert [(m.count, m.first_seq) for m in out] == [(64, 0), (1, 64)]
    keyed = pack(_entries([("INFO", "a")] * 65), 64, 1 << 20)  # a key each: a message stops at 32 keys
    assert [(m.count, m.first_seq) for m in keyed] == [(32, 0), (32, 32), (1, 64)]
    body = b'{"m":1}'
    small = pack(_entries([("INFO", "a")] * 100, body), 64, 3 * len(body) + 2)  # three lines fit, not four
    assert [m.count for m in small] == [3] * 33 + [1]
    assert all(len(m.body) <= 3 * len(body) + 2 for m in small)


def test_a_backlog_packs_runs_of_one_level_and_logger_in_order() -> None:
    spec = [("INFO", "a")] * 1500 + [("ERROR", "a")] * 3 + [("INFO", "b")] * 100
    out = pack(_entries(spec), 64, 1 << 20)
    assert sum(m.count for m in out) == len(spec)
    assert [m.first_seq for m in out] == sorted(m.first_seq for m in out)
    assert all(m.count <= 64 for m in out)
    error = [m for m in out if m.tag == "ERROR"]
    assert len(error) == 1 and error[0].count == 3 and error[0].keys == ("k1500", "k1501", "k1502")
    assert {(m.tag, m.logger) for m in out} == {("INFO", "a"), ("ERROR", "a"), ("INFO", "b")}
    first = out[0]
    assert [r["m"] for r in iter_records(first.body, first.count)] == [1] * first.count
    assert len(first.keys) == 32 and first.count == 32  # a run stops at the keys cap (the properties budget)
    assert sorted(k for m in out for k in m.keys) == sorted(f"k{i}" for i in range(len(spec)))  # none lost


def test_packing_starts_over_pack_over_and_fills_messages_up_to_records_per_message() -> None:
    rows = [Entry("INFO", "a", (), b'{"m":1}', i) for i in range(600)]
    assert [m.count for m in pack(rows[:64], 256, 1 << 20, 64)] == [1] * 64  # a small batch: one per message
    assert [m.count for m in pack(rows[:65], 256, 1 << 20, 64)] == [65]
    assert [m.count for m in pack(rows, 256, 1 << 20, 64)] == [256, 256, 88]
    cfg = AppenderConfig.build("AppLogs", namesrv_addr=ADDR)
    assert (cfg.records_per_message, cfg.pack_over) == (256, 64)
    assert AppenderConfig.build("AppLogs", namesrv_addr=ADDR, records_per_message=8).pack_over == 8


def test_multi_line_bodies_travel_alone_and_decode_whole() -> None:
    entries = _entries([("INFO", "a")] * 1100)
    entries[5] = Entry("INFO", "a", (), b"line one\nline two", 5)
    out = pack(entries, 64, 1 << 20)
    alone = [m for m in out if m.first_seq == 5]
    assert alone[0].count == 1
    assert list(iter_records(alone[0].body, 1)) == [{"message": "line one\nline two"}]


@pytest.mark.parametrize("seed", range(6))
def test_keyless_chunks_pack_as_the_record_by_record_walk_does(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks without keys take a whole-chunk path; without it every chunk takes the record-by-record walk.
    Both must cut the same messages: same runs, sizes, line breaks and order."""
    rng = random.Random(seed)
    rows: list[Entry] = []
    for i in range(3000):
        tag = "INFO" if rng.random() < 0.97 else "WARNING"
        logger = "a" if rng.random() < 0.98 else "b"
        body = b'{"m":"%s"}' % (b"x" * rng.randrange(0, 60))
        if rng.random() < 0.005:
            body = b"two\nlines"
        rows.append(Entry(tag, logger, (), body, i))
    if seed == 0:
        rows[:64] = [Entry("INFO", "a", (), b'{"m":1}', i) for i in range(64)]  # one whole chunk
    max_bytes = 1 << 20 if seed == 0 else rng.choice([1 << 20, 600, 2000])
    fast = pack(rows, 64, max_bytes)
    monkeypatch.setattr(record_module, "_whole_chunk", lambda chunk, max_bytes: None)
    walk = pack(rows, 64, max_bytes)
    assert [(m.tag, m.logger, m.count, m.first_seq, m.body) for m in fast] == [
        (m.tag, m.logger, m.count, m.first_seq, m.body) for m in walk
    ]
    assert all(m.keys == () for m in fast) and sum(m.count for m in fast) == len(rows)
    assert all(len(m.body) <= max_bytes or m.count == 1 for m in fast)
    if seed == 0:
        assert fast[0].count == 64 and fast[0].body == b"\n".join([b'{"m":1}'] * 64)


def _batch(n: int, start: int = 0) -> list[OutMessage]:
    return [OutMessage("INFO", "a", (), b'{"i":%d}' % i, 1, i) for i in range(start, start + n)]


def test_spool_replays_oldest_first_and_claims_exclusively(tmp_path: Path) -> None:
    spool = DiskSpool(tmp_path, 1 << 20, 3600)
    assert spool.write(_batch(3)) == (3, 0)
    assert spool.write(_batch(2, 3)) == (2, 0)
    assert spool.pending_records() == 5
    claimed = spool.claim_oldest()
    assert claimed is not None
    path, messages, records = claimed
    assert records == 3 and [m.first_seq for m in messages] == [0, 1, 2]
    assert spool.pending_records() == 2  # claimed: another process would not see it
    spool.release(path)
    again = spool.claim_oldest()
    assert again is not None and again[2] == 3  # released: first in line again
    spool.done(again[0])
    assert spool.pending_records() == 2


def test_spool_evicts_the_oldest_beyond_max_bytes_and_expires_by_age(tmp_path: Path) -> None:
    one = len(json.dumps(_batch(1)[0].to_json())) + 1
    spool = DiskSpool(tmp_path, one * 4, 3600)
    assert spool.write(_batch(3)) == (3, 0)
    assert spool.write(_batch(3, 3)) == (3, 3)  # the first batch gave way
    assert [m.first_seq for m in spool.claim_oldest()[1]] == [3, 4, 5]  # type: ignore[index]
    aged = DiskSpool(tmp_path / "aged", 1 << 20, 0.05)
    aged.write(_batch(2))
    time.sleep(0.1)
    assert aged.expire() == 2 and aged.pending_records() == 0


def test_claims_of_dead_processes_are_released(tmp_path: Path) -> None:
    spool = DiskSpool(tmp_path, 1 << 20, 3600)
    spool.write(_batch(2))
    path = spool.files()[0].path
    dead_pid = 2**22 + 12345  # above pid_max on common systems
    os.replace(path, path.with_name(f"{path.name}.{dead_pid}.claim"))
    assert spool.pending_records() == 0
    DiskSpool(tmp_path, 1 << 20, 3600)
    assert spool.pending_records() == 2


def test_a_corrupt_spool_file_is_set_aside(tmp_path: Path) -> None:
    spool = DiskSpool(tmp_path, 1 << 20, 3600)
    spool.write(_batch(1))
    spool.files()[0].path.write_text("not json\n")
    with pytest.raises(Exception, match="unreadable"):
        spool.claim_oldest()
    assert spool.pending_records() == 0 and list(tmp_path.glob("*.corrupt"))


def _call(msg: str, *args: object, **extra: object) -> logging.LogRecord:
    return logging.getLogger("app.calls").makeRecord(
        "app.calls", logging.INFO, "/srv/app/shop.py", 7, msg, args, None, "checkout", extra or None
    )


def _bodies(encoded: Encoded) -> list[dict[str, object]]:
    return [json.loads(row[3]) for row in encoded.rows]


def test_immutable_arguments_are_rendered_by_the_sender_mutable_ones_at_the_call() -> None:
    encoder = RecordEncoder(AppenderConfig.build("AppLogs", namesrv_addr=ADDR))
    deferred = prepare(_call("order %s paid %s", 17, "EUR"))
    assert "message" not in deferred.__dict__  # nothing in it can change: left to the sender
    cart = ["apple"]
    rendered = prepare(_call("cart %s", cart))
    not_str = prepare(_call(cast(str, {"event": "e"})))
    cart.append("pear")  # after the call: the record must still say what the call said
    bodies = _bodies(encoder.encode_batch([deferred, rendered, not_str], 1))
    assert [b["message"] for b in bodies] == ["order 17 paid EUR", "cart ['apple']", "{'event': 'e'}"]


def test_a_record_whose_arguments_do_not_fit_is_dropped_alone_and_named() -> None:
    encoder = RecordEncoder(AppenderConfig.build("AppLogs", namesrv_addr=ADDR))
    items = [prepare(_call("n=%d", 1)), prepare(_call("n=%d", "x")), prepare(_call("n=%d", 3))]
    out = encoder.encode_batch(items, 10)
    assert out.failed == 1 and isinstance(out.error, RecordEncodeError)
    assert out.error.where == "/srv/app/shop.py:7" and "TypeError" in str(out.error)
    assert [(b["message"], b["seq"]) for b in _bodies(out)] == [("n=1", 10), ("n=3", 12)]  # seq: the item's place


def test_extra_fields_are_found_whatever_other_handlers_set_on_the_record() -> None:
    encoder = RecordEncoder(AppenderConfig.build("AppLogs", namesrv_addr=ADDR))
    formatted = _call("plain")
    logging.Formatter("%(asctime)s %(message)s").format(formatted)  # another handler: message and asctime set
    formatted_extra = _call("with extra", request_id="r-1")
    logging.Formatter("%(asctime)s %(message)s").format(formatted_extra)
    one_extra = _call("one extra", amount=5)
    out = encoder.encode_batch([formatted, formatted_extra, one_extra], 1)
    plain, with_extra, single = _bodies(out)
    assert "asctime" not in plain and set(plain) == set(_bodies(encoder.encode_batch([_call("x")], 1))[0])
    assert with_extra["request_id"] == "r-1" and out.rows[1][2] == ("r-1",) and "asctime" not in with_extra
    assert single["amount"] == 5 and out.rows[2][2] == ()


class _BraceRecord(logging.LogRecord):
    """A record factory's class with its own message rendering (str.format style)."""

    def getMessage(self) -> str:
        return str(self.msg).format(*self.args)


def _emitted(handler: RocketMQHandler, record: logging.LogRecord) -> object:
    """What ``handler.emit`` queues for ``record``."""
    queued: list[object] = []
    handler._offer = queued.append  # type: ignore[method-assign]
    handler.emit(record)
    assert len(queued) == 1
    return queued[0]


def test_the_usual_record_is_queued_as_a_compact_tuple_the_collector_lets_go_of() -> None:
    handler = RocketMQHandler("AppLogs", namesrv_addr=ADDR)
    try:
        plain = _call("order %s paid %s", 17, "EUR")
        item = _emitted(handler, plain)
        assert type(item) is tuple and item == handler.queue_item(plain)
        assert queued_message(item) == "order 17 paid EUR"
        for usual in (_call("no arguments, 100%"), _call("one %s", 1.5)):
            assert type(_emitted(handler, usual)) is tuple and _emitted(handler, usual) == handler.queue_item(usual)
        # nothing in a compact record is tracked once the collector has seen it (a nested arguments tuple was, and
        # lived on to the oldest generation): queued records cost no full collections
        gc.collect()
        assert not gc.is_tracked(item)
        # what a compact record cannot hold travels as the record: extras, a traceback, a stack, mutable arguments
        try:
            raise ValueError("boom")
        except ValueError:
            failed = logging.getLogger("app.calls").makeRecord(
                "app.calls", logging.ERROR, "/srv/app/shop.py", 7, "failed %s", (1,), sys.exc_info(), "checkout"
            )
        unusual = [_call("with %s", 1, request_id="r-1"), failed, _call("cart %s", ["apple"])]
        unusual.append(logging.LogRecord("app.calls", logging.INFO, "/x.py", 1, "s", (), None, "f", sinfo="Stack"))
        unusual.append(_call(cast(str, {"event": "e"})))
        unusual.append(_BraceRecord("app.calls", logging.INFO, "/x.py", 1, "{} done", (5,), None, "f"))
        for record in unusual:
            assert isinstance(_emitted(handler, record), logging.LogRecord), record
    finally:
        handler.close(0.5)


def test_compact_records_encode_as_the_records_do() -> None:
    """The column encoder of compact records writes what the record-by-record one writes, in order, and drops a
    record whose arguments do not fit alone (named, its seq skipped), in runs mixed with LogRecords too."""
    cfg = AppenderConfig.build("AppLogs", namesrv_addr=ADDR, service="svc%s", static_fields={"env": "50%"})
    encoder = RecordEncoder(cfg)
    calls = [
        _call("order %s paid %s", 17, "EUR"),
        _call("plain 100%"),
        _call('quote " and \n newline %s', "ü"),
        _call("n=%d", "x"),
        _call("n=%d", 3),
        logging.LogRecord("other.logger", logging.ERROR, "/y.py", 9, "e %s", (None,), None, "g"),
    ]
    compact_items = [compact(record) for record in calls]
    assert all(type(item) is tuple for item in compact_items)
    by_record = encoder.encode_batch([prepare(record) for record in calls], 20)
    by_column = encoder.encode_batch(compact_items, 20)
    assert by_column.rows == by_record.rows and len(by_column) == 5
    assert by_column.failed == by_record.failed == 1 and isinstance(by_column.error, RecordEncodeError)
    assert str(by_column.error) == str(by_record.error) and by_column.error.where == "/srv/app/shop.py:7"
    assert [json.loads(body)["seq"] for body in by_column.bodies] == [20, 21, 22, 24, 25]
    mixed = [compact_items[0], prepare(calls[1]), compact_items[2], compact_items[3], prepare(calls[4])]
    assert encoder.encode_batch(mixed, 20).rows == encoder.encode_batch([prepare(r) for r in calls[:5]], 20).rows
    # one argument each (no tuple per record on the sender), with a failing one; bytes and mappings keep theirs
    singles = [_call("a %s", 1), _call("b %r", "x"), _call("%(key)s", "x"), _call("c %s", None), _call("d %s", 2.5)]
    for batch in (singles, [*singles, _call("raw %s", b"\x00")], [_call("%s %s", 1, 2), _call("x")]):
        by_column = encoder.encode_batch([compact(record) for record in batch], 1)
        by_record = encoder.encode_batch([prepare(record) for record in batch], 1)
        assert by_column.rows == by_record.rows and str(by_column.error) == str(by_record.error)
    brace = _BraceRecord("app.calls", logging.INFO, "/x.py", 1, "{} done", (5,), None, "f")
    handler = RocketMQHandler("AppLogs", namesrv_addr=ADDR)
    try:  # a record class of its own keeps its own getMessage
        assert json.loads(encoder.encode_batch([handler.queue_item(brace)], 1).bodies[0])["message"] == "5 done"
    finally:
        handler.close(0.5)
    tagged = RecordEncoder(AppenderConfig.build("AppLogs", namesrv_addr=ADDR, tag="web"))
    assert tagged.encode_batch(compact_items[:1], 1).tags == ["web"]


_INT_FORMATS = [
    "request %s done",
    "n=%d",
    "[%5d]",
    "[%-8d]",
    "x %x %%",
    "%#x",
    "%#o",
    "%X",
    "%+d",
    "100% done",  # '% d' here is a conversion: what the stdlib writes, the baked template writes
    "%e",
    "%.2f",
    "%g",
    "%r",
    "%a",
    "%i",
    "%u",
    'quote " backslash \\ tab \t newline \n ü %s',
    "%c",  # any character: a NUL would be escaped in JSON, so never baked
    "%s %s",  # two conversions for one argument: the generic path names the call
    "no conversion",
    "%(key)s",
    "%*d",
    "%s",
]


@pytest.mark.parametrize("msg", _INT_FORMATS)
def test_calls_with_one_int_encode_through_baked_templates_as_the_records_do(msg: str) -> None:
    """A run of calls with one int argument (or none) is written with the message baked into the call site's
    template: bodies byte for byte what the record-by-record path writes, errors named the same, and formats
    the baked template cannot write exactly (%c, another number of arguments) left to the generic path."""
    cfg = AppenderConfig.build("AppLogs", namesrv_addr=ADDR, service="svc%s", static_fields={"env": "50%"})
    encoder = RecordEncoder(cfg)
    values = [0, 1, -7, 42, 10**25, 65, 255, -(10**30), 7]
    calls = [_call(msg, v) for v in values]
    by_column = encoder.encode_batch([compact(record) for record in calls], 100)
    by_record = encoder.encode_batch([prepare(record) for record in calls], 100)
    assert by_column.rows == by_record.rows
    assert (by_column.failed, str(by_column.error)) == (by_record.failed, str(by_record.error))
    baked = msg not in ("%c", "%s %s", "no conversion", "%(key)s", "%*d")
    assert bool(encoder._baked.ints) is baked
    if msg != "%c":  # %c fails for the values past a character's range, on both paths alike
        assert by_column.failed == (0 if baked else len(values))
    again = encoder.encode_batch([compact(record) for record in calls], 100)  # from the table this time
    assert again.rows == by_record.rows


def test_baked_templates_cover_calls_without_arguments_and_leave_other_types_alone() -> None:
    cfg = AppenderConfig.build("AppLogs", namesrv_addr=ADDR, static_fields={"pct": "%d%%"})
    encoder = RecordEncoder(cfg)
    bare = [_call(m) for m in ("plain", "100% sure %s %d %%", 'a "quote"\n', "ü ✓", "")]
    other_line = logging.getLogger("app.calls").makeRecord(
        "app.calls", logging.WARNING, "/srv/app/shop.py", 99, "plain", (), None, "checkout"
    )
    for batch in (bare, [*bare, other_line, bare[0]]):
        by_column = encoder.encode_batch([compact(record) for record in batch], 1)
        assert by_column.rows == encoder.encode_batch([prepare(record) for record in batch], 1).rows
    assert len(encoder._baked.bare) == 6  # one per call site: message, line, level
    # several call sites with one int each, one of them refused (%c): the whole run takes the generic path
    for batch in ([_call("a %d", 1), _call("b %x", 255)], [_call("a %d", 1), _call("%c", 0), _call("a %d", 2)]):
        by_column = encoder.encode_batch([compact(record) for record in batch], 1)
        assert by_column.rows == encoder.encode_batch([prepare(record) for record in batch], 1).rows
    # a bool prints otherwise than an int ('True'): a run holding one takes the generic path
    calls = [_call("value %s", True), _call("value %s", 3)]
    items = [cast(tuple[object, ...], compact(record)) for record in calls]
    assert encoder._baked_columns(items, 1) is None
    assert encoder.encode_batch(items, 1).rows == encoder.encode_batch([prepare(r) for r in calls], 1).rows


def test_packed_bodies_of_baked_runs_are_the_walk_s_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compact runs are known single-line, so whole chunks pack without counting line breaks: the same messages
    as the record-by-record walk."""
    encoder = RecordEncoder(AppenderConfig.build("AppLogs", namesrv_addr=ADDR))
    calls = [_call("request %s done", i) for i in range(700)] + [_call("multi\nline %s", 1)] * 3
    encoded = encoder.encode_batch([compact(record) for record in calls], 1)
    assert encoded.single_line and not Encoded.of_rows(encoded.rows).single_line
    fast = record_module.pack_encoded(encoded, 256, 40_000, 64)
    monkeypatch.setattr(record_module, "_whole_chunk", lambda chunk, max_bytes: None)
    walk = record_module.pack_encoded(encoded, 256, 40_000, 64)
    assert [(m.count, m.first_seq, m.body) for m in fast] == [(m.count, m.first_seq, m.body) for m in walk]
    assert sum(m.count for m in fast) == len(calls) and max(len(m.body) for m in fast) <= 40_000


class _GatedTransport:
    """Records the size of every batch; holds the first send until released."""

    def __init__(self) -> None:
        self.batches: list[int] = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def send(self, messages: list[OutMessage], timeout: float, ordering: Ordering) -> None:
        self.entered.set()
        assert self.release.wait(10), "the test never released the send"
        self.batches.append(sum(m.count for m in messages))

    def close(self) -> None:
        pass


def _gated_shipper() -> tuple[LogShipper, _GatedTransport]:
    cfg = AppenderConfig.build("AppLogs", namesrv_addr=ADDR, linger=1.0, records_per_message=64)
    shipper = LogShipper(cfg, batch_of(lambda item, seq: Entry("INFO", "a", (), b"{}", seq)), "TEST")
    transport = _GatedTransport()
    shipper._transport = transport
    return shipper, transport


@pytest.mark.parametrize("first", [100, 1], ids=["heavy", "modest"])
def test_under_a_heavy_load_a_sender_waits_for_a_packable_batch_instead_of_sending_a_handful(first: int) -> None:
    shipper, transport = _gated_shipper()
    try:
        for i in range(first):
            shipper.offer(i)
        assert transport.entered.wait(10)  # the first batch went after its linger; its send is held
        for i in range(5):
            shipper.offer(i)
        transport.release.set()  # the sender finds 5 records: fewer than a packed message holds
        time.sleep(0.2)  # (a sender taking whatever is there has sent the 5 by now)
        for i in range(100):
            shipper.offer(i)
        assert shipper.flush(10)
    finally:
        shipper.close(5)
    if first > 64:  # the first batch packed: the load is heavy, so the 5 waited for company
        assert transport.batches == [first, 105]
    else:  # a modest rate: no wait beyond the send before (latency first)
        assert transport.batches == [first, 5, 100]
