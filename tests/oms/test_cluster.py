"""Failover: with one broker of a two-broker cluster stopped, sends retry onto the other (name server routes)."""

from __future__ import annotations

import logging
import time

import pytest

import oms
from tests.oms.helpers import bodies, create_topic


def _wait_route(producer: oms.Producer, topic: str, brokers: int, timeout: float = 20) -> None:
    """Until the name server's route of ``topic`` lists ``brokers`` brokers (registration is periodic)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            producer.send(oms.BytesMessage(b"warm-up", topic))
        except oms.OMSResourceNotExistException:  # no broker has registered yet (it does so after opening its port)
            time.sleep(0.3)
            continue
        core = producer._core
        assert core is not None
        route = core.routes.cached(topic)
        if route is not None and len({q.broker_name for q in route.queues}) >= brokers:
            return
        core.routes.invalidate(topic)
        time.sleep(0.3)
    raise TimeoutError(f"route of {topic} never listed {brokers} brokers")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fault_avoidance", [False, True], ids=["plain-retry", "latency-fault"])
def test_sends_retry_onto_the_second_broker_when_one_is_stopped(broker_factory, fault_avoidance, caplog):
    caplog.set_level(logging.INFO, logger="oms.producer")
    ns = broker_factory.namesrv()
    a = broker_factory.broker(ns, name="broker-a")
    b = broker_factory.broker(ns, name="broker-b")
    topic = "OmsFailover"
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap,
        ap.create_producer(operation_timeout=5000, send_latency_fault_enable=fault_avoidance) as p,
    ):
        # the topic must exist on both brokers (a broker answers QueryRoute with the name server's view)
        for handle in (a, b):
            create_topic(handle.addr, topic)
        _wait_route(p, topic, 2)
        a.kill()  # SIGKILL: no unregistration, the name server keeps routing to broker-a for a while
        results = [p.send(oms.BytesMessage(f"m{i}", topic)) for i in range(20)]
        assert {r.queue.broker_name for r in results} == {"broker-b"}
        retried = [r for r in caplog.records if "on broker-a failed" in r.getMessage()]
        assert retried, "at least one send tried the stopped broker first and was retried"
        if fault_avoidance:
            assert len(retried) == 1, "after one failure the broker sits out: no send tries it again"
        async_results = [p.send_async(oms.BytesMessage(f"async{i}", topic)).get(20) for i in range(5)]
        assert {r.queue.broker_name for r in async_results} == {"broker-b"}
    stored = bodies(b.addr, topic)
    assert all(f"m{i}".encode() in stored for i in range(20))


@pytest.mark.timeout(60)
def test_no_retry_budget_surfaces_the_connection_error(broker_factory):
    ns = broker_factory.namesrv()
    a = broker_factory.broker(ns, name="broker-a")
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap,
        ap.create_producer(retry_times_when_send_failed=0, operation_timeout=3000) as p,
    ):
        _wait_route(p, "OmsLonely", 1)
        a.stop()
        with pytest.raises(oms.OMSRuntimeException) as err:
            p.send(oms.BytesMessage(b"x", "OmsLonely"))
        assert isinstance(err.value, oms.OMSConnectionException | oms.OMSTimeOutException)
