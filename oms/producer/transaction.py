"""Transactions: the OMS 0.3 executor form and the 2.x ``prepare()`` form, ``EndTransaction``, and the check-back.

A half message is invisible until ``EndTransaction`` commits it; UNKNOWN leaves it to the broker's check-back
(``RecoverOrphanedTransactionCommand`` on the Telemetry stream), answered by the producer's ``transaction_checker``.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Protocol

from rocketmq.grpc_protocol import definition_pb2, service_pb2

from oms.client.core import ClientCore
from oms.client.endpoints import Endpoint
from oms.convert import from_wire
from oms.errors import OMSException, OMSTransactionException
from oms.keys import BuiltinKeys
from oms.message import BytesMessage
from oms.producer.result import SendResult, TransactionResolution
from orbitmq.errors import Code

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


class TransactionEnder(Protocol):
    """The producer that prepared a half message: it ends the transaction on the broker (blocking)."""

    def _end_transaction(
        self,
        topic: str,
        message_id: str,
        transaction_id: str,
        endpoint: Endpoint,
        resolution: TransactionResolution,
        from_check: bool,
    ) -> None: ...


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

    def __init__(self, producer: TransactionEnder, send_result: SendResult, endpoint: Endpoint) -> None:
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


def is_executor(value: object) -> bool:
    """Whether ``send(msg, value)`` is the OMS transactional form (an executor, not an attributes mapping)."""
    if isinstance(value, Mapping):
        return False
    return isinstance(value, LocalTransactionExecutor) or callable(getattr(value, "execute", None)) or callable(value)


def run_local_transaction(txn: TransactionalResult, executor: Executor, message: BytesMessage) -> SendResult:
    """Run ``executor`` for the prepared half message, then commit or roll back; UNKNOWN waits for the check-back."""
    execute = executor_fn(executor)
    context = TransactionContext(message, txn.transaction_id)
    resolution = decide(execute, message, context, "local transaction")
    if resolution is not TransactionResolution.UNKNOWN:
        try:
            if resolution is TransactionResolution.COMMIT:
                txn.commit()
            else:
                txn.rollback()
        except OMSException as exc:  # RocketMQ's choice too: the broker's check-back settles it later
            log.warning("ending transaction %s failed, the broker will check back: %s", txn.transaction_id, exc)
    return dataclasses.replace(txn.send_result, transaction_resolution=resolution)


def end_transaction_request(
    core: ClientCore,
    topic: str,
    message_id: str,
    transaction_id: str,
    resolution: TransactionResolution,
    from_check: bool,
) -> service_pb2.EndTransactionRequest:
    return service_pb2.EndTransactionRequest(
        topic=core.resource(topic),
        message_id=message_id,
        transaction_id=transaction_id,
        resolution=definition_pb2.COMMIT if resolution is TransactionResolution.COMMIT else definition_pb2.ROLLBACK,
        source=definition_pb2.SOURCE_SERVER_CHECK if from_check else definition_pb2.SOURCE_CLIENT,
    )


def orphan_of(command: service_pb2.TelemetryCommand) -> tuple[BytesMessage, str] | None:
    """The half message and transaction id a broker asks about, or None for another command."""
    if not command.HasField("recover_orphaned_transaction_command"):
        return None
    orphan = command.recover_orphaned_transaction_command
    message = from_wire(orphan.message)
    message.sys_headers()[BuiltinKeys.TRANSACTION_ID] = orphan.transaction_id
    return message, orphan.transaction_id


def answer_check(
    checker: Checker | None, producer: TransactionEnder, endpoint: Endpoint, message: BytesMessage, transaction_id: str
) -> None:
    """The broker's check-back of an undecided transaction: ask ``checker``, then end it (UNKNOWN: asked later)."""
    if checker is None:
        log.warning(
            "broker %s asks about transaction %s but the producer has no transaction_checker", endpoint, transaction_id
        )
        return
    context = TransactionContext(message, transaction_id)
    resolution = decide(checker_fn(checker), message, context, "transaction check")
    if resolution is TransactionResolution.UNKNOWN:
        return  # asked again later
    try:
        producer._end_transaction(
            message.destination or "", message.message_id or "", transaction_id, endpoint, resolution, from_check=True
        )
    except OMSException as exc:
        log.warning("answering the check of transaction %s failed: %s", transaction_id, exc)
