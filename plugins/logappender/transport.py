"""How batches reach the broker: an ``oms`` producer in this process, or, in a forked child, a relay process.

gRPC cannot be used in a child forked after the parent used it (its channels and poller belong to the parent,
and new ones time out), so a forked child's sender hands its batches to a fresh ``python -m
plugins.logappender.relay`` process over a pipe, which sends them with its own producer and answers each batch.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import struct
import subprocess
import sys
import threading
from collections.abc import Sequence
from enum import Enum
from typing import IO, Any, Protocol

import oms
from orbitmq.errors import Code
from orbitmq.limits import MAX_MESSAGE_GROUP_LENGTH
from plugins.logappender.config import AppenderConfig
from plugins.logappender.record import (
    PROP_APPENDER,
    PROP_HOST,
    PROP_LOGGER,
    PROP_PID,
    PROP_RECORDS,
    PROP_SEQ,
    PROP_SERVICE,
    OutMessage,
)

FRAME = struct.Struct(">I")
COMPRESS_OVER = 4096  # RocketMQ's compressMsgBodyOverHowmuch
RELAY_START_TIMEOUT_S = 30.0


class Ordering(Enum):
    """How the records of one process keep their order on the broker."""

    GROUP = "group"  # one message group per process (FIFO/MIXED topics)
    QUEUE = "queue"  # one queue per process, chosen by pid (NORMAL topics: RocketMQ 4 partition order)
    NONE = "none"  # consumers order by the records' ``seq``


class Failure(Enum):
    """What the sender does with a batch whose send failed."""

    RETRY = "retry"  # the broker is unreachable or busy: back off and try again (or spool)
    DROP = "drop"  # the broker refused the records themselves: retrying cannot help
    UNORDERED = "unordered"  # the topic refuses this ordering: send again with the next one (GROUP, QUEUE, NONE)


class SendFailed(Exception):
    def __init__(self, failure: Failure, message: str) -> None:
        super().__init__(message)
        self.failure = failure


def classify(exc: BaseException) -> Failure:
    if isinstance(exc, oms.OMSException):
        if exc.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE or isinstance(exc, oms.OMSNotSupportedException):
            return Failure.UNORDERED  # no FIFO messages here, or no queue choice (a broker without SendBatch)
        if isinstance(exc, oms.OMSMessageFormatException):
            return Failure.DROP
    return Failure.RETRY


class Transport(Protocol):
    def send(self, messages: list[OutMessage], timeout: float, ordering: Ordering) -> None:
        """Store every message or raise ``SendFailed``."""

    def close(self) -> None: ...


def _queue_of_process(queues: Sequence[oms.MessageQueue], message: oms.BytesMessage, pid: Any) -> oms.MessageQueue:
    return queues[pid % len(queues)]


def message_group(config: AppenderConfig, pid: int) -> str:
    suffix = f":{pid}"
    return config.host[: MAX_MESSAGE_GROUP_LENGTH - 1 - len(suffix)] + suffix


class OmsTransport:
    """An access point and producer, created on first use (the application starts while the broker is down)."""

    def __init__(self, config: AppenderConfig, appender_type: str, pid: int | None = None) -> None:
        self.config = config
        self.pid = pid or os.getpid()
        self._group = message_group(config, self.pid)
        self._props: dict[str, str] = {PROP_APPENDER: appender_type, PROP_HOST: config.host, PROP_PID: str(self.pid)}
        if config.service:
            self._props[PROP_SERVICE] = config.service
        self._ap: oms.MessagingAccessPoint | None = None
        self._producer: oms.Producer | None = None

    def _ensure(self) -> oms.Producer:
        if self._producer is None:
            cfg = self.config
            ap = oms.get_messaging_access_point(
                cfg.url,
                access_key=cfg.access_key,
                secret_key=cfg.secret_key,
                operation_timeout=max(1, int(cfg.send_timeout * 1000)),
            ).startup()
            compress_over = COMPRESS_OVER if cfg.compress else 0  # 0: never
            try:
                self._producer = ap.create_producer(
                    group=cfg.producer_group, compress_msg_body_over_howmuch=compress_over
                ).startup()
            except BaseException:
                ap.shutdown()
                raise
            self._ap = ap
        return self._producer

    def to_oms(self, m: OutMessage, ordering: Ordering) -> oms.BytesMessage:
        props = dict(self._props)
        props[PROP_LOGGER] = m.logger
        props[PROP_RECORDS] = str(m.count)
        props[PROP_SEQ] = str(m.first_seq)
        return oms.BytesMessage(
            m.body,
            self.config.topic,
            tags=m.tag,
            keys=list(m.keys) or None,
            sharding_key=self._group if ordering is Ordering.GROUP else None,
            user_headers=props,
        )

    def send(self, messages: list[OutMessage], timeout: float, ordering: Ordering) -> None:
        try:
            producer = self._ensure()
            batch = [self.to_oms(m, ordering) for m in messages]
            if ordering is Ordering.QUEUE:
                producer.send_batch(batch, timeout=timeout, selector=_queue_of_process, arg=self.pid)
            else:
                producer.send_batch(batch, timeout=timeout)
        except Exception as exc:
            raise SendFailed(classify(exc), str(exc)) from exc

    def close(self) -> None:
        ap, self._ap, self._producer = self._ap, None, None
        if ap is not None:
            ap.shutdown()


def write_frame(stream: IO[bytes], doc: dict[str, Any]) -> None:
    data = json.dumps(doc).encode("utf-8")
    stream.write(FRAME.pack(len(data)) + data)
    stream.flush()


def read_frame(stream: IO[bytes]) -> dict[str, Any] | None:
    head = stream.read(FRAME.size)
    if len(head) < FRAME.size:
        return None
    (size,) = FRAME.unpack(head)
    data = stream.read(size)
    if len(data) < size:
        return None
    doc = json.loads(data)
    if not isinstance(doc, dict):
        raise ValueError("a relay frame must be a JSON object")
    return doc


def config_to_json(config: AppenderConfig) -> dict[str, Any]:
    return {
        "topic": config.topic,
        "namesrv_addr": config.endpoints,
        "namespace": config.namespace,
        "access_key": config.access_key,
        "secret_key": config.secret_key,
        "producer_group": config.producer_group,
        "service": config.service,
        "send_timeout": config.send_timeout,
        "compress": config.compress,
        "host": config.host,
    }


class RelayTransport:
    """Batches go to a relay process (started on first use, restarted if it dies or stops answering)."""

    def __init__(self, config: AppenderConfig, appender_type: str) -> None:
        self.config = config
        self.appender_type = appender_type
        self.pid = os.getpid()
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def _ensure(self) -> subprocess.Popen[bytes]:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            return proc
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "plugins.logappender.relay"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            close_fds=True,
        )
        assert proc.stdin is not None
        write_frame(
            proc.stdin,
            {"config": config_to_json(self.config), "appender_type": self.appender_type, "pid": self.pid},
        )
        self._proc = proc
        return proc

    def send(self, messages: list[OutMessage], timeout: float, ordering: Ordering) -> None:
        with self._lock:
            try:
                proc = self._ensure()
                assert proc.stdin is not None and proc.stdout is not None
                write_frame(proc.stdin, {"messages": [m.to_json() for m in messages], "ordering": ordering.value})
                # the relay's own send deadline, plus its start-up the first time
                ready, _, _ = select.select([proc.stdout], [], [], timeout + RELAY_START_TIMEOUT_S)
                answer = read_frame(proc.stdout) if ready else None
            except (OSError, ValueError) as exc:
                self._kill()
                raise SendFailed(Failure.RETRY, f"log relay failed: {exc}") from exc
            if answer is None:
                self._kill()  # out of step with us now: a fresh relay for the next batch
                raise SendFailed(Failure.RETRY, "log relay did not answer")
            if not answer.get("ok"):
                raise SendFailed(Failure(answer.get("failure", "retry")), str(answer.get("error")))

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(1)

    def close(self) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()  # the relay shuts its producer down and exits at end of input
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(1)
