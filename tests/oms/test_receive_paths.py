"""The oms receive/ack consumers pop with ``Pop/ReceiveBatch`` and ack with ``Pop/AckBatch`` on OrbitMQ, and fall back
to v2 ReceiveMessage / AckMessage where the server has no such service (a RocketMQ proxy): both paths give the same
messages, headers and handles."""

from __future__ import annotations

import pytest

import oms
from oms.client.endpoints import Endpoint
from oms.consumer.calls import QueueRef
from oms.consumer.selector import MessageSelector
from oms.errors import OMSException
from oms.queue import MessageQueue


def _messages(topic: str) -> list[oms.BytesMessage]:
    out = []
    for i in range(3):
        m = oms.BytesMessage(f"p{i}".encode(), topic)
        m.tags = "TagA"
        m.keys = [f"k{i}"]
        m.put_user_headers("color", "blue")
        out.append(m)
    return out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", ["receive_batch", "v2"])
def test_both_receive_paths_deliver_the_same_messages(access_point, producer, path):
    topic = f"OmsRecvPath_{path}"
    for m in _messages(topic):
        producer.send(m)
    with access_point.create_pull_consumer(consumer_id=f"GRecvPath_{path}", consume_from_where="first") as pc:
        calls = pc._running_calls()
        if path == "v2":
            calls.receive_batch_enabled = False
        pc.attach_queue(topic, "TagA")
        got = [pc.receive(5) for _ in range(3)]
        assert all(m is not None for m in got)
        by_body = {m.body: m for m in got if m is not None}
        assert sorted(by_body) == [b"p0", b"p1", b"p2"]
        m0 = by_body[b"p0"]
        assert (m0.tags, m0.keys, m0.user_headers().get_string("color")) == ("TagA", ["k0"], "blue")
        assert m0.message_id and m0.receipt_handle and m0.reconsume_times == 0
        pc.nack(m0)
        again = pc.receive(5)
        assert again is not None and again.body == b"p0" and again.reconsume_times == 1
        for m in (again, by_body[b"p1"], by_body[b"p2"]):
            pc.ack(m)
        assert pc.receive({"TIMEOUT": 300}) is None


@pytest.mark.timeout(60)
def test_a_server_without_receive_batch_is_remembered_and_v2_is_used(access_point, broker_factory):
    """A real name server serves v2 but not ``orbitmq.pop``: UNIMPLEMENTED switches that endpoint to v2."""
    namesrv = broker_factory.namesrv()
    endpoint = Endpoint.of([("127.0.0.1", namesrv.port)])
    with access_point.create_pull_consumer(consumer_id="GRecvFallback") as pc:
        calls = pc._running_calls()
        ref = QueueRef(MessageQueue("AnyT", "broker-x", -1), endpoint)

        async def receive() -> None:
            await calls.receive(ref, MessageSelector.by_tag("*"), 4, 0.2, invisible_ms=30_000)

        with pytest.raises(OMSException) as info:
            pc._run(receive(), 30)
        # the v2 call was made (the name server has no ReceiveMessage either), after the batch one was refused
        assert "ReceiveMessage" in str(info.value)
        assert endpoint in calls._no_receive_batch

        async def ack() -> None:
            await calls.ack(endpoint, "AnyT", [("id", "handle")])

        with pytest.raises(OMSException) as acked:
            pc._run(ack(), 30)
        assert "AckMessage" in str(acked.value)  # v2 AckMessage was tried after AckBatch came back UNIMPLEMENTED
        assert endpoint in calls._no_ack_batch


@pytest.mark.timeout(60)
def test_an_ack_batch_refused_as_a_whole_raises_with_the_brokers_reason(access_point, shared_broker):
    """No per-handle failures but a failed status (here an illegal topic name): the caller gets the exception."""
    host, port = shared_broker.addr.rsplit(":", 1)
    endpoint = Endpoint.of([(host, int(port))])
    with access_point.create_pull_consumer(consumer_id="GAckRefused") as pc:
        calls = pc._running_calls()

        async def ack() -> None:
            await calls.ack(endpoint, "bad topic!", [("id", "OMQ1.whatever")])

        with pytest.raises(OMSException) as info:
            pc._run(ack(), 30)
        assert "AckBatch" in str(info.value) and "bad topic!" in str(info.value)
        assert endpoint not in calls._no_ack_batch  # refused, not unimplemented: AckBatch stays in use
