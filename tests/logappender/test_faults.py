"""Broker down at start, killed and restarted, a hung broker, a full queue under each policy: every record is sent
or counted; the spool replays (also after the application restarts)."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from plugins.logappender import RocketMQHandler
from plugins.logappender.record import queued_message
from tests.conftest import BrokerFactory, BrokerHandle
from tests.logappender.conftest import FAST, read_topic, records_of

pytestmark = pytest.mark.integration


@pytest.fixture
def app_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger(f"faults.{uuid.uuid4().hex[:6]}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield logger
    for h in list(logger.handlers):
        logger.removeHandler(h)
        if isinstance(h, RocketMQHandler):
            h.close(1.0)


@pytest.mark.timeout(90)
def test_broker_down_at_start_then_up_delivers_everything(
    broker_factory: BrokerFactory, app_logger: logging.Logger
) -> None:
    broker = broker_factory.broker()
    broker.stop()
    handler = RocketMQHandler("DownAtStart", namesrv_addr=broker.addr, **FAST)
    app_logger.addHandler(handler)  # the application starts although the broker is down
    t0 = time.monotonic()
    for i in range(200):
        app_logger.info("early %d", i)
    assert time.monotonic() - t0 < 1.0  # logging never waited for the broker
    assert not handler.flush(0.5)
    assert handler.counters().sent == 0
    broker.start()
    assert handler.flush(30)
    c = handler.counters()
    assert (c.accepted, c.sent, c.dropped_overflow, c.dropped_error) == (200, 200, 0, 0)
    records = records_of(read_topic(broker.addr, "DownAtStart", 200))
    assert sorted(r["message"] for r in records) == sorted(f"early {i}" for i in range(200))


def _log_steadily(logger: logging.Logger, stop: threading.Event, sent: list[int]) -> None:
    i = 0
    while not stop.is_set():
        logger.info("tick %d", i)
        i += 1
        sent.append(i)
        time.sleep(0.002)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("with_spool", [False, True], ids=["memory", "spool"])
def test_broker_killed_mid_run_and_restarted(
    broker_factory: BrokerFactory, app_logger: logging.Logger, tmp_path: Path, with_spool: bool
) -> None:
    broker = broker_factory.broker()
    topic = f"Killed{'Spool' if with_spool else 'Mem'}"
    options = dict(FAST, queue_size=300, overflow="drop_new")
    if with_spool:
        options["spool_dir"] = str(tmp_path / "spool")
    handler = RocketMQHandler(topic, namesrv_addr=broker.addr, **options)
    app_logger.addHandler(handler)
    stop, sent = threading.Event(), []
    writer = threading.Thread(target=_log_steadily, args=(app_logger, stop, sent))
    writer.start()
    try:
        time.sleep(0.5)
        broker.kill()
        time.sleep(2.0)  # about 1000 records while the broker is gone: more than the queue holds
        broker.start()
        time.sleep(0.5)
    finally:
        stop.set()
        writer.join()
    assert handler.flush(30)  # spooled counts as settled: then wait for the replay
    deadline = time.monotonic() + 30
    while handler.counters().replayed < handler.counters().spooled and time.monotonic() < deadline:
        time.sleep(0.05)
    c = handler.counters()
    logged = len(sent)
    assert c.accepted + c.dropped_overflow == logged
    assert c.sent - c.replayed + c.spooled + c.dropped_error == c.accepted
    stored = records_of(read_topic(broker.addr, topic, c.sent))
    seqs = [r["seq"] for r in stored]
    if with_spool:
        assert c.dropped_overflow == 0 and c.spooled > 0  # the spool took what the broker could not
        assert c.sent == c.accepted and c.replayed == c.spooled
        assert sorted(set(seqs)) == list(range(1, logged + 1))  # nothing lost (a batch may come twice)
    else:
        assert c.dropped_overflow > 0  # the queue filled during the outage, and said so
        assert len(set(seqs)) == c.sent == c.accepted - c.dropped_error


@pytest.mark.timeout(60)
def test_the_spool_replays_after_the_application_restarts(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    broker = broker_factory.broker()
    broker.stop()
    spool = tmp_path / "spool"
    first = logging.getLogger("restart.first")
    first.propagate = False
    h1 = RocketMQHandler("Replayed", namesrv_addr=broker.addr, spool_dir=str(spool), **FAST)
    first.addHandler(h1)
    for i in range(150):
        first.warning("before restart %d", i)
    h1.close(5)  # the "application" stops while the broker is down: everything goes to disk
    first.removeHandler(h1)
    c1 = h1.counters()
    assert (c1.accepted, c1.spooled, c1.sent, c1.dropped_error) == (150, 150, 0, 0)
    assert list(spool.glob("*.spool"))

    broker.start()
    h2 = RocketMQHandler("Replayed", namesrv_addr=broker.addr, spool_dir=str(spool), **FAST)  # next run, no logging
    try:
        deadline = time.monotonic() + 30
        while h2.counters().replayed < 150 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert h2.counters().replayed == 150
    finally:
        h2.close(5)
    records = records_of(read_topic(broker.addr, "Replayed", 150))
    assert [r["message"] for r in records] == [f"before restart {i}" for i in range(150)]  # in order
    assert not list(spool.glob("*.spool*"))


def _stalled_handler(port: int, **options: object) -> RocketMQHandler:
    """A handler whose first batch hangs in flight (the broker accepts connections and never answers)."""
    return RocketMQHandler(
        "Stalled",
        namesrv_addr=f"127.0.0.1:{port}",
        batch_max_records=1,
        send_timeout=30,
        **options,  # type: ignore[arg-type]
    )


def _wait_taken(handler: RocketMQHandler) -> None:
    deadline = time.monotonic() + 5
    while handler.counters().queued and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("policy", ["drop_new", "drop_oldest", "block"])
def test_overflow_policies_under_a_full_queue(silent_port: int, policy: str) -> None:
    logger = logging.getLogger(f"overflow.{policy}")
    logger.propagate = False
    handler = _stalled_handler(silent_port, queue_size=5, overflow=policy, block_timeout=0.2, linger=0)
    logger.addHandler(handler)
    try:
        logger.error("first")  # taken by the sender, stuck in flight
        _wait_taken(handler)
        t0 = time.monotonic()
        for i in range(8):
            logger.error("r%d", i)
        elapsed = time.monotonic() - t0
        c = handler.counters()
        assert c.queued == 5 and c.dropped_overflow == 3
        if policy == "drop_new":
            assert c.accepted == 6 and elapsed < 0.5
            assert [queued_message(item) for item in handler.shipper._queue] == [f"r{i}" for i in range(5)]
        elif policy == "drop_oldest":
            assert c.accepted == 9 and elapsed < 0.5
            assert [queued_message(item) for item in handler.shipper._queue] == [f"r{i}" for i in range(3, 8)]
        else:
            assert c.accepted == 6 and elapsed >= 3 * 0.2  # each of the three waited block_timeout
    finally:
        logger.removeHandler(handler)
        t0 = time.monotonic()
        handler.close(0.5)
        assert time.monotonic() - t0 < 2.0  # a hung broker does not hold close beyond its deadline
    c = handler.counters()
    evicted = c.dropped_overflow if policy == "drop_oldest" else 0
    assert c.sent == 0 and c.dropped_error + evicted == c.accepted  # nothing silently lost


@pytest.mark.timeout(30)
def test_block_policy_waits_for_room_while_the_broker_keeps_up(shared_broker: BrokerHandle) -> None:
    logger = logging.getLogger("overflow.block.ok")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    handler = RocketMQHandler(
        "BlockOk",
        namesrv_addr=shared_broker.addr,
        queue_size=10,
        overflow="block",
        block_timeout=5,
        **{k: v for k, v in FAST.items() if k != "linger"},
    )
    logger.addHandler(handler)
    try:
        for i in range(500):
            logger.info("b%d", i)
        assert handler.flush(20)
        c = handler.counters()
        assert (c.accepted, c.sent, c.dropped_overflow) == (500, 500, 0)
    finally:
        logger.removeHandler(handler)
        handler.close(5)
