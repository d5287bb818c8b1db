"""Natural batching of ``send_async``: plain messages of a topic sent while its earlier requests are in flight leave
together, as one ``Produce/SendBatch``, when a request slot frees up.

Nothing waits on purpose: with a slot free a message goes at once, so a lone send's latency is what it was; under
load, what queues up during one round trip becomes the next request (RocketMQ 5's producer batches only with
``autoBatch`` set, and then after a delay; this needs neither). Callers' threads hand messages over in bursts (one
wake-up of the loop per burst, not per message) and each request's outcome goes back in one piece.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rocketmq.grpc_protocol import definition_pb2

from oms.client.core import ClientCore
from oms.client.routes import RouteQueue
from oms.convert import WireMessage
from oms.errors import OMSException, OMSIllegalStateException, OMSRuntimeException, OMSTimeOutException
from oms.producer.result import SendResult
from oms.producer.sender import Sender, retryable
from orbitmq.errors import Code
from orbitmq.limits import MAX_BATCH_SIZE, MAX_SEND_BATCH_MESSAGES

log = logging.getLogger("oms.producer")

MAX_IN_FLIGHT_PER_TOPIC = 2  # requests of one topic in flight at once; more messages wait for the next request


@dataclass(slots=True)
class Coalesced:
    """One ``send_async`` on its way: ``token`` is the producer's (its message and future)."""

    wire: WireMessage
    deadline: float  # time.monotonic()
    token: Any


# Called on the loop once per request: its messages, then their results in order, or the error they all share.
Completion = Callable[[Sequence[Coalesced], Sequence[SendResult] | None, BaseException | None], None]


class SendCoalescer:
    """Per topic, the messages waiting for a request slot and the requests in flight (loop-only), fed by ``submit``
    from any thread."""

    def __init__(self, sender: Sender, complete: Completion) -> None:
        self._sender = sender
        self._complete = complete
        self._intake: list[Coalesced] = []
        self._intake_lock = threading.Lock()
        self._intake_scheduled = False
        self._queues: dict[str, deque[Coalesced]] = {}
        self._in_flight: dict[str, int] = {}

    @staticmethod
    def takes(wire: WireMessage, pinned: RouteQueue | None) -> bool:
        """Only plain messages (no delay, transaction, group, compression: what SendBatch carries) without a
        chosen queue; others are sent alone."""
        return pinned is None and wire.batch_properties is not None and wire.message_type == definition_pb2.NORMAL

    def submit(self, core: ClientCore, item: Coalesced) -> None:
        """From any thread: queue ``item``; the loop is woken only if it was not already about to take the queue."""
        with self._intake_lock:
            self._intake.append(item)
            if self._intake_scheduled:
                return
            self._intake_scheduled = True
        core.runtime.loop.call_soon(lambda: self._take_intake(core))

    def _take_intake(self, core: ClientCore) -> None:
        with self._intake_lock:
            items, self._intake = self._intake, []
            self._intake_scheduled = False
        started: set[str] = set()
        for item in items:
            topic = item.wire.topic
            self._queues.setdefault(topic, deque()).append(item)
            started.add(topic)
        for topic in started:
            while self._in_flight.get(topic, 0) < MAX_IN_FLIGHT_PER_TOPIC and self._queues.get(topic):
                self._in_flight[topic] = self._in_flight.get(topic, 0) + 1
                core.spawn(self._drain(core, topic), f"send-batch {topic}")

    async def _drain(self, core: ClientCore, topic: str) -> None:
        """Send what is queued for ``topic``, a request at a time, until nothing is left."""
        batch: list[Coalesced] = []
        try:
            while batch := self._take(topic):
                await self._send(core, batch)
        except asyncio.CancelledError:  # the access point is shutting down: nobody will send the rest
            stopped = OMSIllegalStateException("the producer shut down before the send finished")
            self._complete([*batch, *self._queues.pop(topic, ())], None, stopped)
            raise
        finally:
            self._in_flight[topic] -= 1

    def _take(self, topic: str) -> list[Coalesced]:
        """The next request's messages, oldest first, within the batch limits; expired ones fail here."""
        queue = self._queues.get(topic)
        batch: list[Coalesced] = []
        expired: list[Coalesced] = []
        size = 0
        now = time.monotonic()
        while queue and len(batch) < MAX_SEND_BATCH_MESSAGES:
            item = queue[0]
            if batch and size + item.wire.body_size > MAX_BATCH_SIZE:
                break
            queue.popleft()
            if item.deadline <= now:
                expired.append(item)
                continue
            batch.append(item)
            size += item.wire.body_size
        if not queue:
            self._queues.pop(topic, None)
        if expired:
            self._complete(expired, None, OMSTimeOutException(Code.REQUEST_TIMEOUT, f"send to {topic!r}: timed out"))
        return batch

    async def _send(self, core: ClientCore, batch: list[Coalesced]) -> None:
        wires = [item.wire for item in batch]
        deadline = min(item.deadline for item in batch)
        try:
            results, _ = await self._sender.send(core, wires, deadline, None, fast_batch=len(wires) > 1)
        except OMSException as exc:
            if len(batch) > 1 and not retryable(exc):
                # the broker may have refused one of them: each alone, so only that one fails
                await asyncio.gather(*(self._send(core, [item]) for item in batch))
                return
            self._complete(batch, None, exc)
            return
        except Exception as exc:  # a bug, not a broker answer: the senders must still hear of it
            log.exception("batched send of %d messages failed", len(batch))
            self._complete(batch, None, OMSRuntimeException(Code.INTERNAL_ERROR, f"send failed: {exc!r}"))
            return
        self._complete(batch, results, None)
