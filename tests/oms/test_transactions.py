"""Transactional sends against a real broker: executor commit/rollback, prepare(), and the broker's check-back."""

from __future__ import annotations

import threading
import time

import pytest

import oms
from orbitmq.errors import Code
from tests.oms.helpers import bodies, create_topic
from tests.waiting import wait_until

TOPIC = "OmsTx"


@pytest.fixture(scope="module", autouse=True)
def tx_topic(shared_broker):
    create_topic(shared_broker.addr, TOPIC, "TRANSACTION")


class Checker:
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.checked: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def check(self, message: oms.BytesMessage, context: oms.TransactionContext) -> str:
        with self.lock:
            self.checked.append((message.get_body(str), context.transaction_id))
        return self.answer


@pytest.mark.timeout(60)
def test_executor_commit_and_rollback(shared_broker, producer):
    class Commit(oms.LocalTransactionExecutor):
        def execute(self, message, context):
            assert context.transaction_id and message.transaction_id == context.transaction_id
            assert b"exec-commit" not in bodies(shared_broker.addr, TOPIC)  # still a half message
            context.commit()

    result = producer.send(oms.BytesMessage(b"exec-commit", TOPIC), Commit(), None)
    assert result.transaction_id and result.transaction_resolution is oms.TransactionResolution.COMMIT
    assert b"exec-commit" in bodies(shared_broker.addr, TOPIC)
    rolled = producer.send(oms.BytesMessage(b"exec-rollback", TOPIC), executor=lambda m, ctx: "rollback")
    assert rolled.transaction_resolution is oms.TransactionResolution.ROLLBACK
    time.sleep(0.5)
    assert b"exec-rollback" not in bodies(shared_broker.addr, TOPIC)


@pytest.mark.timeout(60)
def test_prepare_commits_on_success_and_rolls_back_on_exception(shared_broker, producer):
    with producer.prepare(oms.BytesMessage(b"ctx-commit", TOPIC)) as txn:
        assert txn.transaction_id and b"ctx-commit" not in bodies(shared_broker.addr, TOPIC)
    assert txn.resolution is oms.TransactionResolution.COMMIT
    assert b"ctx-commit" in bodies(shared_broker.addr, TOPIC)
    with (
        pytest.raises(RuntimeError, match="local work failed"),
        producer.prepare(oms.BytesMessage(b"ctx-rollback", TOPIC)) as failed,
    ):
        raise RuntimeError("local work failed")
    assert failed.resolution is oms.TransactionResolution.ROLLBACK
    with pytest.raises(oms.OMSTransactionException):
        failed.commit()  # decided once
    time.sleep(0.5)
    assert b"ctx-rollback" not in bodies(shared_broker.addr, TOPIC)
    with pytest.raises(oms.OMSMessageFormatException):
        producer.prepare(oms.BytesMessage(b"x", TOPIC, sharding_key="g"))  # transactions cannot be FIFO


@pytest.mark.timeout(60)
def test_unknown_then_the_broker_check_back_commits(shared_broker, access_point):
    checker = Checker("commit")
    with access_point.create_producer(transaction_checker=checker) as p:
        result = p.send(oms.BytesMessage(b"orphan-commit", TOPIC), lambda m, ctx: oms.TransactionResolution.UNKNOWN)
        assert result.transaction_resolution is oms.TransactionResolution.UNKNOWN
        assert b"orphan-commit" not in bodies(shared_broker.addr, TOPIC)
        wait_until(
            lambda: b"orphan-commit" in bodies(shared_broker.addr, TOPIC), 15, what="the check-back committing it"
        )
        assert ("orphan-commit", result.transaction_id) in checker.checked


@pytest.mark.timeout(60)
def test_check_back_rollback_and_a_failing_executor(shared_broker, access_point):
    checker = Checker("rollback")

    def explode(message, context):
        raise ValueError("local transaction crashed")  # means UNKNOWN, as RocketMQ does

    with access_point.create_producer(transaction_checker=checker) as p:
        result = p.send(oms.BytesMessage(b"orphan-rollback", TOPIC), explode, None)
        assert result.transaction_resolution is oms.TransactionResolution.UNKNOWN
        deadline = time.monotonic() + 15
        while not checker.checked and time.monotonic() < deadline:
            time.sleep(0.05)
        assert checker.checked == [("orphan-rollback", result.transaction_id)]
        time.sleep(1.5)  # a rolled back half is never checked again and never appears
        assert len(checker.checked) == 1
    assert b"orphan-rollback" not in bodies(shared_broker.addr, TOPIC)


@pytest.mark.timeout(60)
def test_ending_an_unknown_transaction_is_an_error_with_a_code(producer):
    txn = producer.prepare(oms.BytesMessage(b"twice", TOPIC))
    txn.rollback()
    other = oms.TransactionalResult(producer, txn.send_result, txn._endpoint)
    with pytest.raises(oms.OMSMessageFormatException) as err:
        other.commit()  # the broker already forgot it
    assert err.value.code == Code.INVALID_TRANSACTION_ID
