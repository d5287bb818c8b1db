"""The hook layer inside a real broker: SQL92 pulls and receives, Bloom bits, allocation strategies, a
third-party plugin loaded from an entry point, and disabling plugins by config."""

from __future__ import annotations

import textwrap
from pathlib import Path

import grpc
import pytest
from rocketmq import FilterExpression, SimpleConsumer
from rocketmq.grpc_protocol import FilterType, definition_pb2, service_pb2, service_pb2_grpc

from orbitmq.message_batch import BatchEntry, encode_message_batch
from orbitmq.message_const import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX as UNIQ
from orbitmq.proto import (
    admin_pb2,
    admin_pb2_grpc,
    consume_pb2,
    consume_pb2_grpc,
    produce_pb2,
    produce_pb2_grpc,
)
from orbitmq.record import iter_records
from tests.broker.v2client import message, raw_client
from tests.pop.client_helpers import config, receive_until

OK = definition_pb2.Code.OK
ILLEGAL_FILTER = definition_pb2.Code.ILLEGAL_FILTER_EXPRESSION


def _pull_all(c, group: str, topic: str, sql: str, until: int) -> list[definition_pb2.Message]:
    got: list[definition_pb2.Message] = []
    offset = 0
    for _ in range(50):
        if offset >= until:
            break
        r = c.pull(group, topic, 0, offset, batch=64, sql_expr=sql)
        got += r.messages
        assert r.next_offset is not None and r.next_offset >= offset
        if r.status.code != OK and r.next_offset == offset:
            break
        offset = r.next_offset
    return got


@pytest.mark.timeout(120)
def test_sql92_pull_before_and_after_registration(broker_factory):
    broker = broker_factory.broker(options={"defaultTopicQueueNums": "1"})
    with raw_client(broker.addr) as c:
        # Stored before the group's first SQL92 pull: no Bloom bits for it, evaluation decides.
        early = [message("SqlT", f"e{i}".encode(), props={"a": str(i)}) for i in range(10)]
        assert c.send(*early).status.code == OK
        first = c.pull("SqlG", "SqlT", 0, 0, batch=64, sql_expr="a >= 8")
        assert sorted(m.body for m in first.messages) == [b"e8", b"e9"]
        # Stored after registration: the dispatcher computes the group's bits.
        late = [message("SqlT", f"l{i}".encode(), props={"a": str(i), "b": "x" if i % 2 else "y"}) for i in range(30)]
        assert c.send(*late).status.code == OK
        got = _pull_all(c, "SqlG", "SqlT", "a >= 8", until=40)
        assert sorted(m.body for m in got) == sorted([b"e8", b"e9"] + [f"l{i}".encode() for i in range(8, 30)])
        both = _pull_all(c, "SqlG2", "SqlT", "a BETWEEN 3 AND 5 AND b = 'x'", until=40)
        assert sorted(m.body for m in both) == [b"l3", b"l5"]
        # Missing property: no match, no error.
        assert _pull_all(c, "SqlG3", "SqlT", "nosuch > 1", until=40) == []

        bad = c.pull("SqlG", "SqlT", 0, 0, sql_expr="a >> 3")
        assert bad.status.code == ILLEGAL_FILTER
        assert "position" in bad.status.message
        assert c.pull("SqlG", "SqlT", 0, 0, batch=64).status.code == OK  # the broker keeps serving
    ext_files = list((broker.store / "consumequeue_ext").glob("bits*/SqlT/0/*"))
    assert ext_files, "the Bloom bits of messages stored after registration live in the ConsumeQueue extension"
    assert (broker.store / "config" / "consumerFilter.json").exists()

    broker.restart()  # registrations and bits survive a restart
    with raw_client(broker.addr) as c:
        got = _pull_all(c, "SqlG", "SqlT", "a >= 8", until=40)
        assert len(got) == 24


@pytest.mark.timeout(120)
def test_official_simple_consumer_with_sql92_filter(broker):
    with raw_client(broker.addr) as c:
        msgs = [message("SqlOff", f"m{i}".encode(), tag="T", props={"n": str(i)}) for i in range(20)]
        assert c.send(*msgs).status.code == OK
    expr = {"SqlOff": FilterExpression("n < 5 AND TAGS = 'T'", FilterType.SQL)}
    consumer = SimpleConsumer(config(broker.addr), "SqlOffG", expr, await_duration=2)
    consumer.startup()
    try:
        got = receive_until(consumer, 5, invisible_s=20, timeout=30)
        assert sorted(m.body for m in got) == [f"m{i}".encode() for i in range(5)]
        for m in got:
            consumer.ack(m)
        assert consumer.receive(16, 20) == []
    finally:
        consumer.shutdown()


def _meta(client_id: str) -> tuple[tuple[str, str], ...]:
    return (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"))


@pytest.mark.timeout(120)
def test_group_allocation_strategy_is_used_and_validated(broker):
    with raw_client(broker.addr) as c, grpc.insecure_channel(broker.addr) as ch:
        assert c.send(message("AllocT")).status.code == OK
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        admin = admin_pb2_grpc.AdminStub(ch)
        group, topic = definition_pb2.Resource(name="AllocG"), definition_pb2.Resource(name="AllocT")
        cfg = admin_pb2.GroupConfig(
            group_name="AllocG", retry_max_times=16, consume_message_orderly=True, allocate_strategy="AVG_BY_CIRCLE"
        )
        assert admin.CreateOrUpdateGroup(admin_pb2.CreateOrUpdateGroupRequest(config=cfg), timeout=10).status.code == OK
        for cid in ("client-1", "client-2"):
            hb = service_pb2.HeartbeatRequest(group=group, client_type=definition_pb2.SIMPLE_CONSUMER)
            assert stub.Heartbeat(hb, metadata=_meta(cid), timeout=10).status.code == OK
        req = service_pb2.QueryAssignmentRequest(topic=topic, group=group)
        ids = [
            sorted(a.message_queue.id for a in stub.QueryAssignment(req, metadata=_meta(cid), timeout=10).assignments)
            for cid in ("client-1", "client-2")
        ]
        assert ids == [[0, 2], [1, 3]]  # round robin, not the contiguous halves of AVG

        cfg.allocate_strategy = "NO_SUCH_STRATEGY"
        bad = admin.CreateOrUpdateGroup(admin_pb2.CreateOrUpdateGroupRequest(config=cfg), timeout=10)
        assert bad.status.code == definition_pb2.Code.BAD_REQUEST and "NO_SUCH_STRATEGY" in bad.status.message


EXAMPLE_PLUGIN = '''
"""A third-party OrbitMQ plugin: stamps every produced message with a property."""
import pluggy

hookimpl = pluggy.HookimplMarker("orbitmq")


@hookimpl
def orbitmq_before_store(message):
    message.properties["stamped-by"] = "example"


@hookimpl
def orbitmq_after_store(message, result):
    print(
        f"stored {message.topic} {message.body!r} at {result.append_result.logics_offset}"
        f" stamped-by {message.properties.get('stamped-by')}",
        flush=True,
    )
'''


def _install_example_plugin(root: Path) -> dict[str, str]:
    """A real distribution on PYTHONPATH whose entry point names the plugin module (no pip needed)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "orbitmq_example_stamp.py").write_text(textwrap.dedent(EXAMPLE_PLUGIN))
    dist = root / "orbitmq_example_stamp-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: orbitmq-example-stamp\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[orbitmq.plugins]\nexample-stamp = orbitmq_example_stamp\n")
    return {"PYTHONPATH": f"{root}:{Path(__file__).resolve().parents[2]}"}


@pytest.mark.timeout(120)
def test_third_party_plugin_from_entry_point_and_disabling_it(broker_factory, tmp_path):
    env = _install_example_plugin(tmp_path / "site")
    on = broker_factory.broker(name="stamp-on", options={"defaultTopicQueueNums": "1"}, env=env)
    off = broker_factory.broker(
        name="stamp-off", options={"defaultTopicQueueNums": "1", "pluginsDisabled": "example-stamp"}, env=env
    )
    for b, expected in ((on, "example"), (off, None)):
        with raw_client(b.addr) as c:
            assert c.send(message("StampT", b"x")).status.code == OK
            [m] = c.pull("StampG", "StampT", 0, 0).messages
            assert m.user_properties.get("stamped-by") == expected
        # A SendBatch to a BatchCQ topic: the hook sees each message, and what it changed is what is stored.
        with grpc.insecure_channel(b.addr) as ch:
            cfg = admin_pb2.TopicConfig(
                topic_name="StampBatchT", read_queue_nums=1, write_queue_nums=1, attributes={"queue.type": "BatchCQ"}
            )
            admin = admin_pb2_grpc.AdminStub(ch)
            assert (
                admin.CreateOrUpdateTopic(admin_pb2.CreateOrUpdateTopicRequest(config=cfg), timeout=10).status.code
                == OK
            )
            entries = [BatchEntry(0, f"b{i}".encode(), {UNIQ: f"STAMP{i}"}) for i in range(3)]
            req = produce_pb2.SendBatchRequest(
                topic="StampBatchT", queue_id=0, messages=encode_message_batch(entries), count=3
            )
            assert produce_pb2_grpc.ProduceStub(ch).SendBatch(req, timeout=30).status.code == OK
            pulled = consume_pb2_grpc.ConsumeStub(ch).PullBatch(
                consume_pb2.PullBatchRequest(group="StampG", topic="StampBatchT", queue_id=0, offset=0), timeout=30
            )
            records = list(iter_records(pulled.records))
            assert [r.body for r in records] == [b"b0", b"b1", b"b2"]
            assert [r.properties.get("stamped-by") for r in records] == [expected] * 3
    # each message of the batch is reported at its own queue offset
    assert all(f"stored StampBatchT b'b{i}' at {i}" in on.log() for i in range(3)), on.log()[-2000:]
    # a v2 send's after-store hook sees the message as the before-store hook left it
    assert "stored StampT b'x' at 0 stamped-by example" in on.log(), on.log()[-2000:]
    assert "stored StampBatchT" not in off.log()
    assert "example-stamp" in on.log()
