"""Consumer pieces without a broker: settings parsing, selectors, listener outcomes, process queues, the local
offset file, and decoding stored records into messages."""

from __future__ import annotations

import json
import socket
import zlib
from pathlib import Path

import pytest
from rocketmq.grpc_protocol import definition_pb2

import oms
from oms.consumer.columns import decode_columns
from oms.consumer.config import ConsumeFromWhere, ConsumerConfig, ConsumerKeys, MessageModel, consumer_attributes
from oms.consumer.listener import ConsumeContext, ListenerAdapter, outcome
from oms.consumer.offset_store import LocalFileOffsetStore
from oms.consumer.process_queue import FlowControl, ProcessQueue
from oms.consumer.records import decode_records
from oms.consumer.selector import ExpressionType, MessageSelector
from orbitmq.record import HEADER, MESSAGE_MAGIC_CODE, PROPS_LEN, TOPIC_LEN, TRAILER, encode_properties

Q = oms.MessageQueue("T", "b", 0)


def config(**kwargs: object) -> ConsumerConfig:
    return ConsumerConfig.from_attributes(consumer_attributes(None, None, {"consumer_id": "G", **kwargs}))


def test_config_defaults_are_rocketmqs():
    cfg = config()
    assert cfg.group == "G" and cfg.message_model is MessageModel.CLUSTERING
    assert cfg.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    assert (cfg.consume_thread_nums, cfg.consume_message_batch_max_size, cfg.pull_batch_size) == (20, 1, 32)
    assert cfg.pull_threshold_for_queue == 1000 and cfg.pull_threshold_size_for_queue == 100 * 1024 * 1024
    assert cfg.consume_concurrently_max_span == 2000 and cfg.max_reconsume_times == 16
    assert cfg.persist_offset_interval_s == 5.0 and cfg.suspend_ms == 1000 and cfg.auto_ack


def test_config_keywords_keys_and_aliases():
    cfg = config(
        message_model="broadcasting",
        consume_from_where="timestamp",
        consume_timestamp="20240102030405",
        orderly=True,
        retry_backoff_ms=[100, 200],
        offset_store_dir=Path("/tmp/x"),
    )
    assert cfg.message_model is MessageModel.BROADCASTING and cfg.orderly
    assert cfg.consume_from_where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
    assert cfg.retry_backoff_ms == (100, 200) and cfg.offset_store_dir == Path("/tmp/x")
    kv = consumer_attributes(None, {"rmq.max.redelivery.times": 3, "rmq.consumer.group": "H"}, {})
    cfg = ConsumerConfig.from_attributes(kv)
    assert cfg.group == "H" and cfg.max_reconsume_times == 3
    assert config(consume_from_where="CONSUME_FROM_FIRST_OFFSET").consume_from_where.name.endswith("FIRST_OFFSET")
    with pytest.raises(TypeError, match="consumer keywords"):
        consumer_attributes(None, None, {"no_such_thing": 1})
    with pytest.raises(ValueError, match=ConsumerKeys.PULL_THRESHOLD_FOR_QUEUE):
        config(pull_threshold_for_queue=0)
    with pytest.raises(ValueError, match="CLUSTERING or BROADCASTING"):
        config(message_model="sideways")
    with pytest.raises(oms.OMSMessageFormatException):
        ConsumerConfig.from_attributes(consumer_attributes(None, None, {}))
    with pytest.raises(oms.OMSMessageFormatException):
        config(consumer_id="bad group!")


def test_selectors():
    assert MessageSelector.of("*").matches_all and MessageSelector.of(None).matches_all
    tags = MessageSelector.of(" TagB ||TagA ")
    assert tags.expression == "TagA || TagB" and tags.pull_filter() == ("TAG", "TagA || TagB")
    assert tags.accepts_tag("TagA") and not tags.accepts_tag("TagC") and not tags.accepts_tag(None)
    assert tags.to_pb().type == definition_pb2.FilterType.TAG
    sql = MessageSelector.of("a > 1", "sql92")
    assert sql.type is ExpressionType.SQL92 and sql.to_pb().type == definition_pb2.FilterType.SQL
    assert sql.accepts_tag(None) and sql.pull_filter() == ("SQL92", "a > 1")
    for bad in ("||", "A || *"):
        with pytest.raises(oms.OMSMessageFormatException):
            MessageSelector.by_tag(bad)
    with pytest.raises(oms.OMSMessageFormatException):
        MessageSelector.by_sql(" ")
    with pytest.raises(oms.OMSMessageFormatException):
        MessageSelector.of("x", "XPATH")


def test_listener_outcomes():
    ctx = ConsumeContext(Q, [], 1000)
    assert outcome(oms.ConsumeConcurrentlyStatus.CONSUME_SUCCESS, ctx, False)
    assert not outcome(oms.ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, ctx, True)
    assert outcome("SUCCESS", ctx, False) and not outcome(False, ctx, True)
    assert outcome(None, ctx, True) and not outcome(None, ctx, False)  # auto-ack decides when nothing else does
    ctx.ack()
    assert outcome(None, ctx, False)
    ctx.reconsume_later()
    assert not outcome(None, ctx, True)
    ctx.suspend(50)
    assert ctx.suspend_current_queue_time_millis == 50


def test_listener_shapes_and_failures():
    msgs = [oms.BytesMessage(f"m{i}") for i in range(3)]

    class OnReceived:
        def on_received(self, message, context):
            if message.body == b"m1":
                raise RuntimeError("boom")

    concurrent, _ = ListenerAdapter(OnReceived())(msgs, Q, 1000, True, False)
    orderly, _ = ListenerAdapter(OnReceived())(msgs, Q, 1000, True, True)
    assert concurrent == [True, False, True]
    assert orderly == [True, False, False], "orderly: nothing after a failure is offered"
    calls = []

    class Batch:
        def on_received_batch(self, messages, context):
            calls.append(len(messages))
            context.ack()

    adapter = ListenerAdapter(Batch())
    assert adapter.batch and adapter(msgs, Q, 1000, False, False)[0] == [True, True, True] and calls == [3]
    with pytest.raises(TypeError):
        ListenerAdapter(42)


def test_process_queue_flow_control_and_commit_offsets():
    pq = ProcessQueue()
    msgs = []
    for offset in (5, 6, 9):
        m = oms.BytesMessage(b"x" * 10)
        m.put_sys_headers("QUEUE_ID", 0).put_sys_headers("QUEUE_OFFSET", offset)
        msgs.append(m)
    pq.put(msgs)
    pq.put(msgs[:1])  # a redelivery still held counts once
    assert (pq.count, pq.size, pq.span()) == (3, 30, 4)
    assert pq.flow_control(3, 100, None) is FlowControl.COUNT
    assert pq.flow_control(10, 30, None) is FlowControl.SIZE
    assert pq.flow_control(10, 100, 3) is FlowControl.SPAN
    assert pq.flow_control(10, 100, 4) is None
    pq.remove([msgs[1]])
    assert pq.commit_offset(0) == 5
    pq.remove([msgs[0], msgs[2]])
    assert pq.commit_offset(0) == 10 and pq.commit_offset(1) is None
    pq.advance(0, 20)
    assert pq.commit_offset(0) == 20


def test_local_offset_store_is_atomic_and_falls_back_to_the_backup(tmp_path):
    store = LocalFileOffsetStore(tmp_path, "inst", "G")
    assert store.load() == 0 and not store.persist()
    store.update(Q, 5)
    store.update(Q, 3)  # offsets only move forward...
    assert store.read(Q) == 5
    store.update(Q, 2, increase_only=False)  # ...unless corrected
    assert store.persist() and store.read(Q) == 2
    store.update(Q, 7)
    store.persist()
    path = tmp_path / "inst" / "G" / "offsets.json"
    assert json.loads(path.read_text())["offsets"] == [{"topic": "T", "broker_name": "b", "queue_id": 0, "offset": 7}]
    assert json.loads(path.with_name("offsets.json.bak").read_text())["offsets"][0]["offset"] == 2
    assert not list(path.parent.glob("*.tmp.*"))
    path.write_text("{ damaged")
    again = LocalFileOffsetStore(tmp_path, "inst", "G")
    assert again.load() == 1 and again.read(Q) == 2


def _record(body: bytes, props: dict[str, str], *, queue_offset: int, sys_flag: int = 0) -> bytes:
    topic = b"T"
    raw_props = encode_properties(props)
    size = HEADER.size + len(body) + TOPIC_LEN.size + len(topic) + PROPS_LEN.size + len(raw_props) + TRAILER.size
    header = HEADER.pack(
        size, MESSAGE_MAGIC_CODE, zlib.crc32(body), 2, 0, queue_offset, 1000 + queue_offset, sys_flag,
        1700000000000, socket.inet_aton("10.0.0.1"), 5, 1700000000100, socket.inet_aton("10.0.0.2"), 8081, 3, 0,
        len(body),
    )  # fmt: skip
    rest = body + TOPIC_LEN.pack(len(topic)) + topic + PROPS_LEN.pack(len(raw_props)) + raw_props
    record = header + rest
    return record + TRAILER.pack(zlib.crc32(record))


def test_records_decode_to_messages_with_headers_and_decompressed_bodies():
    props = {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ID1", "__SHARDINGKEY": "g", "color": "red"}
    raw = _record(b"plain", props, queue_offset=7) + _record(zlib.compress(b"z" * 100), {}, queue_offset=8, sys_flag=1)
    first, second = decode_records(raw)
    assert first.body == b"plain" and first.destination == "T" and first.message_id == "ID1"
    assert first.tags == "TagA" and first.keys == ["k1", "k2"] and first.sharding_key == "g"
    assert dict(first.user_headers()) == {"color": "red"}
    assert (first.queue_id, first.queue_offset, first.reconsume_times) == (2, 7, 3)
    assert first.born_timestamp == 1700000000000 and first.sys_headers()["STORE_HOST"] == "10.0.0.2:8081"
    assert second.body == b"z" * 100 and second.message_id == "1008"
    with pytest.raises(oms.OMSRuntimeException):
        list(decode_records(raw[:-3]))


def test_columns_hold_what_the_decoded_messages_say():
    records = [
        ({"TAGS": "TagA", "KEYS": "k1 k2 k1", "UNIQ_KEY": "ID1", "color": "red"}, b"plain", 0),
        ({"MYTAGS": "not-a-tag", "XUNIQ_KEY": "not-an-id", "note": "TAGS"}, b"no system props", 0),
        ({"KEYS": " lone ", "TAGS": ""}, zlib.compress(b"z" * 100), 1),
        ({"UNIQ_KEY": "ID4", "KEYS": "solo", "TAGS": "TagB"}, b"", 0),
    ]
    raw = b"".join(
        _record(body, props, queue_offset=7 + i, sys_flag=flag) for i, (props, body, flag) in enumerate(records)
    )
    messages = decode_records(raw)
    cols = decode_columns(raw, properties=True)
    assert len(cols) == len(messages) == 4
    assert cols.queue_offsets == [m.queue_offset for m in messages] == [7, 8, 9, 10]
    assert cols.message_ids == [m.message_id for m in messages] == ["ID1", "1008", "1009", "ID4"]
    assert cols.tags == [m.tags for m in messages] == ["TagA", None, None, "TagB"]
    assert cols.keys == [" ".join(m.keys) or None for m in messages] == ["k1 k2", None, "lone", "solo"]
    assert cols.bodies == [m.body for m in messages]
    assert cols.bodies[2] == b"z" * 100
    assert cols.born_timestamps == [m.born_timestamp for m in messages]
    assert cols.store_timestamps == [m.store_timestamp for m in messages]
    assert cols.reconsume_times == [m.reconsume_times for m in messages] == [3] * 4
    assert cols.properties == [dict(m.user_headers()) for m in messages]
    assert cols.properties[1] == {"MYTAGS": "not-a-tag", "XUNIQ_KEY": "not-an-id", "note": "TAGS"}
    assert decode_columns(raw).properties is None
    kept = cols.take([1, 3])
    assert (
        kept.queue_offsets == [8, 10]
        and kept.message_ids == ["1008", "ID4"]
        and kept.properties
        == [
            cols.properties[1],
            cols.properties[3],
        ]
    )
    with pytest.raises(oms.OMSRuntimeException):
        decode_columns(raw[:-3])
