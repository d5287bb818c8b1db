"""Transactions end to end with the official Producer: a transaction whose checker never decides is rolled back
after ``transactionCheckMax`` checks and never delivered; a broker restart (clean, or SIGKILL with SYNC_FLUSH)
between the half message and the commit/rollback keeps the outcome exact: committed once, rolled back never."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable

import grpc
import pytest
from rocketmq import ClientConfiguration, Credentials, Message, Producer, TransactionChecker, TransactionResolution
from rocketmq.grpc_protocol import definition_pb2

from orbitmq.proto import admin_pb2, admin_pb2_grpc
from tests.broker.v2client import raw_client
from tests.waiting import wait_until

TOPIC = "TxLifeT"


class UndecidedChecker(TransactionChecker):
    def __init__(self) -> None:
        self.checked: list[str] = []
        self.lock = threading.Lock()

    def check(self, message: Message) -> TransactionResolution:
        with self.lock:
            self.checked.append(message.body.decode())
        return TransactionResolution.UNKNOWN


def _create_topic(addr: str) -> None:
    with grpc.insecure_channel(addr) as ch:
        cfg = admin_pb2.TopicConfig(
            topic_name=TOPIC, read_queue_nums=2, write_queue_nums=2, perm=6, message_type="TRANSACTION"
        )
        resp = admin_pb2_grpc.AdminStub(ch).CreateOrUpdateTopic(admin_pb2.CreateOrUpdateTopicRequest(config=cfg))
        assert resp.status.code == definition_pb2.Code.OK


def _bodies(addr: str) -> list[bytes]:
    with raw_client(addr) as c:
        return sorted(m.body for q in range(2) for m in c.pull("g", TOPIC, q, 0, batch=100).messages)


def _message(body: bytes) -> Message:
    msg = Message()
    msg.topic, msg.body = TOPIC, body
    return msg


def _producer(addr: str, checker: TransactionChecker) -> Producer:
    producer = Producer(ClientConfiguration(addr, Credentials(), request_timeout=5), (TOPIC,), checker)
    producer.startup()
    return producer


@pytest.mark.timeout(120)
def test_undecided_transaction_is_rolled_back_after_check_max(broker_factory):
    b = broker_factory.broker(
        options={"transactionTimeOut": "500", "transactionCheckInterval": "200", "transactionCheckMax": "3"}
    )
    _create_topic(b.addr)
    checker = UndecidedChecker()
    producer = _producer(b.addr, checker)
    try:
        tx = producer.begin_transaction()
        producer.send(_message(b"undecided"), tx)
        wait_until(lambda: "transaction never resolved, rolled back" in b.log(), 30, what="give-up after checkMax")
        assert checker.checked == ["undecided"] * 3  # asked exactly transactionCheckMax times, then given up
        time.sleep(1.0)
        assert checker.checked == ["undecided"] * 3  # and never asked again
        assert _bodies(b.addr) == []
        with pytest.raises(Exception):  # noqa: B017 - the official client raises ClientException on any non-OK
            tx.commit()  # the broker rolled it back: INVALID_TRANSACTION_ID
        assert _bodies(b.addr) == []
    finally:
        producer.shutdown()
    b.restart()
    time.sleep(1.0)
    assert _bodies(b.addr) == []  # the Op message keeps it rolled back across a restart


@pytest.mark.timeout(180)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["clean", "sigkill"])
def test_restart_between_half_and_end_commits_once_and_rolls_back_never(broker_factory, sig):
    # Checks far away: the outcome must come from the producer's own commit/rollback after the restart.
    b = broker_factory.broker(
        options={"flushDiskType": "SYNC_FLUSH", "transactionTimeOut": "60000", "transactionCheckInterval": "60000"}
    )
    _create_topic(b.addr)
    producer = _producer(b.addr, UndecidedChecker())
    try:
        to_commit = producer.begin_transaction()
        producer.send(_message(b"commit-after-restart"), to_commit)
        to_rollback = producer.begin_transaction()
        producer.send(_message(b"rollback-after-restart"), to_rollback)
        assert _bodies(b.addr) == []
        b.restart(sig)
        # The client reconnects to the restarted broker; the half messages were recovered from the store.
        wait_until(lambda: _try_end(to_commit.commit), 30, what="commit after restart")
        wait_until(lambda: _try_end(to_rollback.rollback), 30, what="rollback after restart")
        assert _bodies(b.addr) == [b"commit-after-restart"]
    finally:
        producer.shutdown()
    b.restart()
    time.sleep(1.0)
    assert _bodies(b.addr) == [b"commit-after-restart"]  # once, also after another restart


def _try_end(end: Callable[[], None]) -> bool:
    """True once the broker accepted the end. Right after a restart the client may still be reconnecting, so a
    failure is retried; a half message the broker lost would keep failing and time the wait out."""
    try:
        end()
    except Exception:  # the official client raises ClientException for transport and status errors alike
        return False
    return True
