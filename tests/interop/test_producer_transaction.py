"""Transactional messages with the official Producer: commit, rollback, and an orphan resolved by the checker."""

from __future__ import annotations

import threading
import time

import grpc
import pytest
from rocketmq import (
    ClientConfiguration,
    Credentials,
    Message,
    Producer,
    TransactionChecker,
    TransactionResolution,
)
from rocketmq.grpc_protocol import definition_pb2

from orbitmq.proto import admin_pb2, admin_pb2_grpc
from tests.broker.v2client import raw_client
from tests.waiting import wait_until

TOPIC = "TxT"


class Checker(TransactionChecker):
    def __init__(self) -> None:
        self.checked: list[str] = []
        self.lock = threading.Lock()

    def check(self, message: Message) -> TransactionResolution:
        with self.lock:
            self.checked.append(message.body.decode())
        return TransactionResolution.COMMIT


def _bodies(addr: str) -> list[bytes]:
    with raw_client(addr) as c:
        return [m.body for q in range(4) for m in c.pull("g", TOPIC, q, 0, batch=100).messages]


def _message(body: bytes) -> Message:
    msg = Message()
    msg.topic, msg.body = TOPIC, body
    return msg


@pytest.mark.timeout(120)
def test_transactions_commit_rollback_and_orphan_check(broker_factory):
    b = broker_factory.broker(options={"transactionTimeOut": "1000", "transactionCheckInterval": "300"})
    with grpc.insecure_channel(b.addr) as ch:
        cfg = admin_pb2.TopicConfig(
            topic_name=TOPIC, read_queue_nums=4, write_queue_nums=4, perm=6, message_type="TRANSACTION"
        )
        resp = admin_pb2_grpc.AdminStub(ch).CreateOrUpdateTopic(admin_pb2.CreateOrUpdateTopicRequest(config=cfg))
        assert resp.status.code == definition_pb2.Code.OK
    checker = Checker()
    producer = Producer(ClientConfiguration(b.addr, Credentials(), request_timeout=5), (TOPIC,), checker)
    producer.startup()
    try:
        tx = producer.begin_transaction()
        receipt = producer.send(_message(b"committed"), tx)
        assert receipt.transaction_id
        assert _bodies(b.addr) == []  # half messages are invisible
        tx.commit()
        assert _bodies(b.addr) == [b"committed"]

        tx = producer.begin_transaction()
        producer.send(_message(b"rolled-back"), tx)
        tx.rollback()
        with pytest.raises(Exception):  # noqa: B017 - the client raises ClientException for any non-OK status
            tx.commit()  # already ended: INVALID_TRANSACTION_ID

        tx = producer.begin_transaction()
        producer.send(_message(b"orphan"), tx)  # never ended: the broker asks the checker, which commits
        wait_until(lambda: b"orphan" in _bodies(b.addr), 20, what="orphan check")
        assert "orphan" in checker.checked and "rolled-back" not in checker.checked
        time.sleep(0.5)
        assert sorted(_bodies(b.addr)) == [b"committed", b"orphan"]
    finally:
        producer.shutdown()
    b.restart()  # resolved transactions stay resolved; nothing is delivered twice
    time.sleep(1.5)
    assert sorted(_bodies(b.addr)) == [b"committed", b"orphan"]
