"""Records from the three adapters arrive with their fields, tag, keys and properties; one process's order holds."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator

import loguru
import pytest
import structlog

import oms
from plugins.logappender import RocketMQHandler, RocketMQLoggerFactory, RocketMQSink
from tests.conftest import BrokerHandle
from tests.logappender.conftest import FAST, read_topic, records_of

pytestmark = pytest.mark.integration


def _topic(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


@pytest.fixture
def app_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger(f"app.{uuid.uuid4().hex[:6]}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield logger
    for h in list(logger.handlers):
        logger.removeHandler(h)
        if isinstance(h, RocketMQHandler):
            h.close()


@pytest.mark.timeout(60)
def test_stdlib_records_arrive_with_fields_tag_keys_and_properties(
    shared_broker: BrokerHandle, app_logger: logging.Logger
) -> None:
    topic = _topic("StdLogs")
    handler = RocketMQHandler(topic, namesrv_addr=shared_broker.addr, service="checkout", **FAST)
    app_logger.addHandler(handler)
    app_logger.info("order %s paid", 17, extra={"request_id": "req-17", "amount": 9.5})
    app_logger.debug("cache miss", extra={"trace_id": "tr-1"})
    try:
        {}["missing"]
    except KeyError:
        app_logger.exception("lookup failed")
    assert handler.flush(10)
    stored = read_topic(shared_broker.addr, topic, 3)
    by_message = {r["message"]: (s.message, r) for s in stored for r in s.records}
    assert set(by_message) == {"order 17 paid", "cache miss", "lookup failed"}
    msg, rec = by_message["order 17 paid"]
    assert msg.tags == "INFO" and msg.keys == ["req-17"]
    assert rec["amount"] == 9.5 and rec["request_id"] == "req-17" and rec["logger"] == app_logger.name
    assert rec["process"] == os.getpid() and rec["thread"] == "MainThread" and rec["service"] == "checkout"
    headers = msg.user_headers()
    assert headers["logger"] == app_logger.name and headers["service"] == "checkout"
    assert headers["host"] == handler.config.host and headers["APPENDER_TYPE"] == "PYTHON_LOGGING_APPENDER"
    assert by_message["cache miss"][0].tags == "DEBUG" and by_message["cache miss"][0].keys == ["tr-1"]
    failed_msg, failed = by_message["lookup failed"]
    assert failed_msg.tags == "ERROR" and "KeyError: 'missing'" in failed["exception"]
    assert "Traceback (most recent call last)" in failed["exception"]
    c = handler.counters()
    assert (c.accepted, c.sent, c.dropped_overflow, c.dropped_error) == (3, 3, 0, 0)


@pytest.mark.timeout(60)
def test_one_process_keeps_its_order_on_a_fifo_topic(shared_broker: BrokerHandle, app_logger: logging.Logger) -> None:
    topic = _topic("FifoLogs")
    with oms.get_messaging_access_point(f"oms:rocketmq://{shared_broker.addr}/") as ap:
        ap.resource_manager().create_topic(topic, read_queue_nums=4, write_queue_nums=4, message_type="FIFO")
    handler = RocketMQHandler(topic, namesrv_addr=shared_broker.addr, batch_max_records=50, **FAST)
    app_logger.addHandler(handler)
    n = 3000
    for i in range(n):
        (app_logger.warning if i % 500 == 0 else app_logger.info)("step %d", i)
    assert handler.flush(20)
    stored = read_topic(shared_broker.addr, topic, n)
    queues = {s.message.queue_id for s in stored}
    assert len(queues) == 1, queues  # one message group: one queue
    assert [int(r["message"].split()[1]) for r in records_of(stored)] == list(range(n))
    assert [r["seq"] for r in records_of(stored)] == list(range(1, n + 1))


@pytest.mark.timeout(60)
def test_on_a_normal_topic_the_process_keeps_one_queue_in_order(
    shared_broker: BrokerHandle, app_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = _topic("PlainLogs")  # auto-created NORMAL: no message groups, so RocketMQ 4 partition order
    handler = RocketMQHandler(topic, namesrv_addr=shared_broker.addr, batch_max_records=100, **FAST)
    app_logger.addHandler(handler)
    for i in range(1000):
        app_logger.info("n=%d", i)
    assert handler.flush(20)
    stored = read_topic(shared_broker.addr, topic, 1000)
    assert len({s.message.queue_id for s in stored}) == 1, "one process, one queue"
    records = records_of(stored)  # read in queue order
    assert [r["seq"] for r in records] == list(range(1, 1001))
    assert [r["message"] for r in records] == [f"n={i}" for i in range(1000)]
    assert handler.counters().sent == 1000
    assert "unordered" not in capsys.readouterr().err  # an expected fallback: nothing to warn about


@pytest.mark.timeout(60)
def test_loguru_sink_with_enqueue_ships_fields_and_exceptions(shared_broker: BrokerHandle) -> None:
    topic = _topic("LoguruLogs")
    sink = RocketMQSink(topic, namesrv_addr=shared_broker.addr, **FAST)
    logger = loguru.logger
    sink_id = logger.add(sink, enqueue=True, level="DEBUG", format="{message}\n{exception}")
    try:
        logger.bind(request_id="lr-1", user="ann").info("hello {}", "loguru")
        try:
            1 / 0  # noqa: B018
        except ZeroDivisionError:
            logger.exception("division failed")
        logger.complete()
        assert sink.drain(10)
    finally:
        logger.remove(sink_id)  # stop(): flush and close with the deadline
    stored = read_topic(shared_broker.addr, topic, 2)
    by_message = {r["message"]: (s.message, r) for s in stored for r in s.records}
    msg, rec = by_message["hello loguru"]
    assert msg.tags == "INFO" and msg.keys == ["lr-1"] and rec["user"] == "ann" and rec["request_id"] == "lr-1"
    assert rec["logger"] == __name__ and rec["func"] == "test_loguru_sink_with_enqueue_ships_fields_and_exceptions"
    assert msg.user_headers()["APPENDER_TYPE"] == "LOGURU_APPENDER"
    err_msg, err = by_message["division failed"]
    assert err_msg.tags == "ERROR" and "ZeroDivisionError" in err["exception"]
    assert sink.counters().sent == 2


@pytest.mark.timeout(60)
def test_structlog_through_processor_formatter_and_as_logger_factory(
    shared_broker: BrokerHandle, app_logger: logging.Logger
) -> None:
    topic = _topic("StructLogs")
    handler = RocketMQHandler(topic, namesrv_addr=shared_broker.addr, **FAST)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.JSONRenderer(),
            ],
            foreign_pre_chain=[structlog.stdlib.add_log_level, structlog.stdlib.add_logger_name],
        )
    )
    app_logger.addHandler(handler)
    std = structlog.wrap_logger(
        app_logger,
        processors=[
            structlog.stdlib.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        wrapper_class=structlog.stdlib.BoundLogger,
    )
    std.bind(request_id="sl-1").warning("via formatter", cart=3)
    app_logger.info("foreign %s", "record")  # a plain stdlib record through the same formatter

    factory = RocketMQLoggerFactory(topic, namesrv_addr=shared_broker.addr, **FAST)
    native_rendered = structlog.wrap_logger(
        factory("native"), processors=[structlog.processors.add_log_level, structlog.processors.JSONRenderer()]
    )
    native_rendered.bind(trace_id="sl-2").error("rendered json", n=1)
    native_dict = structlog.wrap_logger(factory("native.dict"), processors=[structlog.processors.add_log_level])
    native_dict.bind(request_id="sl-3").info("event dict", n=2)
    assert handler.flush(10) and factory.flush(10)
    factory.close(5)

    stored = read_topic(shared_broker.addr, topic, 4)
    by_event = {(r.get("event") or r.get("message")): (s.message, r) for s in stored for r in s.records}
    msg, rec = by_event["via formatter"]
    assert msg.tags == "WARNING" and msg.keys == ["sl-1"] and rec["cart"] == 3 and rec["level"] == "warning"
    assert by_event["foreign record"][1]["logger"] == app_logger.name
    msg, rec = by_event["rendered json"]
    assert msg.tags == "ERROR" and msg.keys == ["sl-2"] and rec["n"] == 1
    assert msg.user_headers()["APPENDER_TYPE"] == "STRUCTLOG_APPENDER" and msg.user_headers()["logger"] == "native"
    msg, rec = by_event["event dict"]
    assert msg.tags == "INFO" and msg.keys == ["sl-3"] and rec["n"] == 2 and rec["logger"] == "native.dict"
    assert "timestamp" in rec and rec["seq"] >= 1


@pytest.mark.timeout(60)
def test_behind_a_queue_handler_and_listener(shared_broker: BrokerHandle, app_logger: logging.Logger) -> None:
    import logging.handlers
    import queue

    topic = _topic("QueuedLogs")
    handler = RocketMQHandler(topic, namesrv_addr=shared_broker.addr, **FAST)
    q: queue.Queue[logging.LogRecord] = queue.Queue()
    listener = logging.handlers.QueueListener(q, handler)
    app_logger.addHandler(logging.handlers.QueueHandler(q))
    listener.start()
    try:
        app_logger.info("queued %s", "record", extra={"request_id": "q-1"})
        try:
            raise RuntimeError("behind the queue")
        except RuntimeError:
            app_logger.exception("failed")
    finally:
        listener.stop()
    assert handler.flush(10)
    handler.close(5)
    stored = read_topic(shared_broker.addr, topic, 2)
    by_message = {r["message"].split("\n")[0]: (s.message, r) for s in stored for r in s.records}
    assert by_message["queued record"][0].keys == ["q-1"]
    # QueueHandler.prepare() already merged the traceback into the message (stdlib behaviour)
    failed = by_message["failed"]
    assert failed[0].tags == "ERROR" and "RuntimeError: behind the queue" in failed[1]["message"]


@pytest.mark.timeout(60)
def test_a_call_whose_arguments_do_not_fit_is_reported_and_the_others_arrive(
    shared_broker: BrokerHandle, app_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = _topic("BadFormat")
    handler = RocketMQHandler(topic, namesrv_addr=shared_broker.addr, **FAST)
    app_logger.addHandler(handler)
    app_logger.info("n=%d", 1)
    # rendered by the sender (an immutable argument): fails there; straight to the handler, as pytest's own
    # capture handler would raise on the logging thread
    bad = app_logger.makeRecord(app_logger.name, logging.INFO, __file__, 1, "n=%d", ("not a number",), None)
    handler.handle(bad)
    app_logger.info("n=%d", 3)
    assert handler.flush(10)
    stored = records_of(read_topic(shared_broker.addr, topic, 2))
    assert [r["message"] for r in stored] == ["n=1", "n=3"]
    c = handler.counters()
    assert (c.accepted, c.sent, c.dropped_error) == (3, 2, 1)
    err = capsys.readouterr().err
    assert "could not be serialized" in err and f"logging call at {__file__}:" in err
