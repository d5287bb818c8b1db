"""Consumers keep reading from the slave when the master is down: the oms pull consumer from its committed offsets
(copied by SlaveSynchronize) and the official SimpleConsumer, both through the name server's routes."""

from __future__ import annotations

import signal

import pytest

import oms
from tests.broker.v2client import raw_client
from tests.ha.cluster import OK, start_group
from tests.pop.client_helpers import produce, receive_until, simple_consumer
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


def _master_gone(ns_addr: str, topic: str, slave_addr: str) -> bool:
    with raw_client(ns_addr) as c:
        route = c.route(topic)
    hosts = {f"{a.host}:{a.port}" for q in route.message_queues for a in q.broker.endpoints.addresses}
    return route.status.code == OK and hosts == {slave_addr}


@pytest.mark.timeout(180)
def test_oms_pull_consumer_continues_on_the_slave_from_its_committed_offsets(broker_factory):
    ns = broker_factory.namesrv()
    group = start_group(broker_factory, ns, "ha-oms", role="SYNC_MASTER")
    topic = "HaOmsPull"
    url = f"oms:rocketmq://{ns.addr}/"
    with oms.get_messaging_access_point(url) as ap:
        with ap.create_producer(operation_timeout=10_000) as p:
            for i in range(40):
                p.send(oms.BytesMessage(f"m{i}", topic))
        with ap.create_pull_consumer(consumer_id="GHaOms", operation_timeout=5000) as pc:
            queues = pc.queues(topic)
            assert {q.queue_id for q in queues} == {0, 1, 2, 3}
            consumed = []
            for q in queues:
                half = pc.pull(q, 0, max(1, pc.latest_offset(q) // 2))
                consumed += [m.get_body(str) for m in half]
                pc.commit(q, half.next_offset)
            committed = {q.queue_id: pc.committed(q) for q in queues}

    def offsets_on_slave() -> bool:
        with raw_client(group.slave.addr) as c:
            return all(c.get_offset("GHaOms", topic, qid).offset == off for qid, off in committed.items())

    wait_until(offsets_on_slave, timeout=30, what="SlaveSynchronize to copy the committed offsets")
    group.master.stop(signal.SIGKILL)
    wait_until(lambda: _master_gone(ns.addr, topic, group.slave.addr), timeout=30, what="routes to the slave only")
    with oms.get_messaging_access_point(url) as ap, ap.create_pull_consumer(consumer_id="GHaOms") as pc:
        queues = pc.queues(topic)
        rest = []
        for q in queues:
            start = pc.committed(q)
            assert start == committed[q.queue_id]
            rest += [m.get_body(str) for m in pc.pull(q, start, 100)]
    assert sorted(consumed + rest) == sorted(f"m{i}" for i in range(40))
    assert not set(consumed) & set(rest)


@pytest.mark.timeout(180)
def test_official_simple_consumer_receives_from_the_slave_with_the_master_down(broker_factory):
    ns = broker_factory.namesrv()
    group = start_group(broker_factory, ns, "ha-official", role="SYNC_MASTER")
    topic = "HaOfficial"
    ids = produce(ns.addr, topic, [f"o{i}".encode() for i in range(12)])
    wait_until(lambda: "HaOfficial" in (group.slave.store / "config" / "topics.json").read_text(), timeout=30)
    group.master.stop(signal.SIGKILL)
    wait_until(lambda: _master_gone(ns.addr, topic, group.slave.addr), timeout=30, what="routes to the slave only")
    with simple_consumer(ns.addr, "GHaOfficial", topic) as consumer:
        got = receive_until(consumer, len(ids), invisible_s=30, timeout=60)
        assert sorted(m.message_id for m in got) == sorted(ids)
        for m in got:
            consumer.ack(m)
