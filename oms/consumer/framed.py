"""A receive whose I/O the caller does: the ``Pop/ReceiveBatch`` of a pull consumer, sent over the caller's own
connection to the broker's frame listener and read on the caller's own event loop (``oms.client.frame_codec``).

For a caller that must not hand every answer across threads: the Celery transport's worker reads its receives on
Celery's hub, as py-amqp and Redis read theirs. The consumer still owns the receipts: ``PullConsumer.framed_answer``
holds what an answer brought, so ``ack``/``ack_batch``/``change_invisible_duration`` work on them as on any receive.
"""

from __future__ import annotations

from dataclasses import dataclass

from oms.consumer.calls import QueueRef
from orbitmq.proto import pop_pb2

RECEIVE_BATCH_METHOD = "/" + pop_pb2.DESCRIPTOR.services_by_name["Pop"].full_name + "/ReceiveBatch"


@dataclass(frozen=True)
class FramedReceive:
    """One receive to send: ``body`` as a unary call of ``method`` with ``metadata``, to ``host``:``port``, answered
    within ``timeout_s`` (the long poll and the operation timeout); give the answer's body to ``framed_answer``."""

    host: str
    port: int
    method: str
    body: bytes
    metadata: tuple[tuple[str, str], ...]
    timeout_s: float
    ref: QueueRef

    @property
    def what(self) -> str:
        return f"ReceiveBatch from {self.ref.endpoint}"
