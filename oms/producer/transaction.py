"""Transactions: the OMS 0.3 executor form and the 2.x ``prepare()`` form, plus the check-back contract.

A half message is invisible until ``EndTransaction`` commits it; UNKNOWN leaves it to the broker's check-back.
"""

from __future__ import annotations

import inspect
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from rocketmq.grpc_protocol import definition_pb2

from oms.errors import OMSTransactionException
from oms.message import BytesMessage
from oms.producer.result import SendResult, TransactionResolution
from orbitmq.errors import Code

if TYPE_CHECKING:
    from oms.producer.producer import Producer

log = logging.getLogger("oms.producer.transaction")


class TransactionContext:
    """Given to ``execute``/``check``: call ``commit()``, ``rollback()`` or ``unknown()`` (last call wins)."""

    def __init__(self, message: BytesMessage, transaction_id: str) -> None:
        self.message = message
        self.transaction_id = transaction_id
        self.resolution: TransactionResolution | None = None

    def commit(self) -> None:
        self.resolution = TransactionResolution.COMMIT

    def rollback(self) -> None:
        self.resolution = TransactionResolution.ROLLBACK

    def unknown(self) -> None:
        self.resolution = TransactionResolution.UNKNOWN


class LocalTransactionExecutor(ABC):
    """OMS 0.3's executor: run the local transaction for the half message, then decide.

    Decide by calling ``context.commit()``/``rollback()`` or by returning a ``TransactionResolution`` (or
    ``"commit"``/``"rollback"``/``"unknown"``); deciding nothing, or raising, means UNKNOWN.
    """

    @abstractmethod
    def execute(self, message: BytesMessage, context: TransactionContext) -> object: ...

    def check(self, message: BytesMessage, context: TransactionContext) -> object:
        """The broker's check-back for this transaction; used when the producer has no ``transaction_checker``."""
        return TransactionResolution.UNKNOWN


class TransactionChecker(Protocol):
    def check(self, message: BytesMessage, context: TransactionContext) -> object: ...


Executor = LocalTransactionExecutor | Callable[[BytesMessage, TransactionContext], object]
Checker = TransactionChecker | Callable[..., object]


def parse_resolution(outcome: object) -> TransactionResolution:
    """A resolution from what user code returned (our enum, a string, the official client's enum, a bool)."""
    if isinstance(outcome, TransactionResolution):
        return outcome
    if outcome is None:
        return TransactionResolution.UNKNOWN
    if isinstance(outcome, bool):
        return TransactionResolution.COMMIT if outcome else TransactionResolution.ROLLBACK
    if isinstance(outcome, int):  # the official client's protobuf enum: COMMIT=1, ROLLBACK=2
        by_value = {
            definition_pb2.COMMIT: TransactionResolution.COMMIT,
            definition_pb2.ROLLBACK: TransactionResolution.ROLLBACK,
            definition_pb2.TRANSACTION_RESOLUTION_UNSPECIFIED: TransactionResolution.UNKNOWN,
        }
        if outcome in by_value:
            return by_value[outcome]
    name = getattr(outcome, "name", outcome)
    if isinstance(name, str):
        text = name.strip().upper()
        if text in ("COMMIT", "COMMIT_MESSAGE"):
            return TransactionResolution.COMMIT
        if text in ("ROLLBACK", "ROLLBACK_MESSAGE"):
            return TransactionResolution.ROLLBACK
        if text in ("UNKNOWN", "UNKNOW"):
            return TransactionResolution.UNKNOWN
    raise ValueError(f"{outcome!r} is not a transaction resolution (COMMIT, ROLLBACK or UNKNOWN)")


def decide(
    fn: Callable[..., object], message: BytesMessage, context: TransactionContext, what: str
) -> TransactionResolution:
    """Run user code ``fn(message, context)`` (or ``fn(message)``); any failure means UNKNOWN, logged."""
    try:
        outcome = fn(message) if _arity(fn) == 1 else fn(message, context)
        resolution = parse_resolution(outcome)
    except Exception:
        log.exception("%s failed for transaction %s: UNKNOWN", what, context.transaction_id)
        return TransactionResolution.UNKNOWN
    if context.resolution is not None:
        return context.resolution
    return resolution


def _arity(fn: Callable[..., object]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 2
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 2
    return len(positional)


def executor_fn(executor: Executor) -> Callable[..., object]:
    execute = getattr(executor, "execute", None)
    if callable(execute):
        return execute
    if callable(executor):
        return executor
    raise TypeError(f"{executor!r} is neither a LocalTransactionExecutor nor a callable")


def checker_fn(checker: Checker) -> Callable[..., object]:
    check = getattr(checker, "check", None)
    if callable(check):
        return check
    if callable(checker):
        return checker
    raise TypeError(f"{checker!r} has no check() and is not callable")


class TransactionalResult:
    """A prepared (half) message: ``commit()`` or ``rollback()`` once; a context manager deciding for you.

    ``with producer.prepare(msg) as txn:`` commits when the block ends normally, rolls back on an exception.
    """

    def __init__(self, producer: Producer, send_result: SendResult, endpoint: Any) -> None:
        self._producer = producer
        self.send_result = send_result
        self._endpoint = endpoint
        self.resolution: TransactionResolution | None = None

    @property
    def transaction_id(self) -> str:
        return self.send_result.transaction_id or ""

    @property
    def message_id(self) -> str:
        return self.send_result.message_id

    def _end(self, resolution: TransactionResolution) -> None:
        if self.resolution is not None:
            raise OMSTransactionException(
                Code.INVALID_TRANSACTION_ID, f"transaction {self.transaction_id} was already {self.resolution}"
            )
        result = self.send_result
        self._producer._end_transaction(
            result.topic, result.message_id, self.transaction_id, self._endpoint, resolution, from_check=False
        )
        self.resolution = resolution

    def commit(self) -> None:
        self._end(TransactionResolution.COMMIT)

    def rollback(self) -> None:
        self._end(TransactionResolution.ROLLBACK)

    def __enter__(self) -> TransactionalResult:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.resolution is not None:
            return  # decided inside the block
        if exc_type is None:
            self.commit()
        else:
            self.rollback()

    def __repr__(self) -> str:
        return f"TransactionalResult(transaction_id={self.transaction_id!r}, resolution={self.resolution})"
