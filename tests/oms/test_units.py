"""oms units without servers: KeyValue, URL parsing, message mapping, errors, batching, selectors, futures, hooks."""

from __future__ import annotations

import os
import threading
import time
import zlib

import pytest
from rocketmq.grpc_protocol import definition_pb2

import oms
from oms.convert import decode_body, from_wire, to_wire
from oms.errors import exception_class, from_mq_error
from oms.keys import attribute_key
from oms.plugins import ClientPluginManager, Hooks
from oms.producer.base import ProducerConfig
from oms.producer.fault import LatencyFaultTolerance, not_available_ms
from oms.producer.selector import group_for_queue, java_string_hash
from oms.producer.sender import split_batches
from oms.producer.transaction import parse_resolution
from oms.url import parse_access_point
from orbitmq.errors import Code, MQError
from orbitmq.limits import MAX_BATCH_SIZE

MiB = 1024 * 1024


def wire(message: oms.BytesMessage, **kw):
    return to_wire(message, max_message_size=kw.pop("max_message_size", 4 * MiB), compress_over=kw.pop("c", 4096), **kw)


# -- KeyValue -----------------------------------------------------------------------------------------------------


def test_key_value_stores_strings_and_parses_on_read():
    kv = oms.new_key_value().put("A", 1).put("B", 2.5).put("C", True).put("D", "x")
    assert dict(kv) == {"A": "1", "B": "2.5", "C": "true", "D": "x"}
    assert kv.get_int("A") == 1 and kv.get_long("A") == 1 and kv.get_double("B") == 2.5
    assert kv.get_boolean("C") is True and kv.get_string("D") == "x"
    assert kv.get_int("missing", 7) == 7 and kv.get_string("missing") is None
    assert kv.key_set() == {"A", "B", "C", "D"} and kv.contains_key("A") and not kv.contains_key("Z")
    with pytest.raises(TypeError):
        kv.put("E", None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        kv.put("F", object())  # type: ignore[arg-type]
    assert oms.new_key_value(TIMEOUT=3000).get_int("TIMEOUT") == 3000
    assert oms.KeyValue({"X": 1}) == {"X": "1"}


def test_keyword_sugar_maps_to_the_java_key_strings():
    assert attribute_key("operation_timeout") == "OPERATION_TIMEOUT"
    assert attribute_key("retry_times_when_send_failed") == "rmq.retry.times.when.send.failed"
    assert attribute_key("send_latency_fault_enable") == "rmq.send.latency.fault.enable"
    assert attribute_key("access_key") == "ACCOUNT_KEY"
    with pytest.raises(TypeError, match="unknown attribute keyword"):
        attribute_key("operation_timout")


# -- URL ----------------------------------------------------------------------------------------------------------


def test_access_point_url_parsing():
    url = parse_access_point("oms:rocketmq://127.0.0.1:9876;10.0.0.2:9877/ns1")
    assert url.driver == "rocketmq" and url.namespace == "ns1"
    assert url.endpoints == (("127.0.0.1", 9876), ("10.0.0.2", 9877))
    assert url.addresses == "127.0.0.1:9876;10.0.0.2:9877"
    java = parse_access_point("oms:rocketmq://alice@localhost:9876,localhost:9877/default:default")
    assert java.account == "alice" and java.namespace == "default:default" and len(java.endpoints) == 2
    v6 = parse_access_point("oms:rocketmq://[::1]:9876")
    assert v6.endpoints == (("::1", 9876),) and v6.namespace == ""


def test_access_point_url_falls_back_to_namesrv_addr():
    url = parse_access_point("oms:rocketmq:///ns", environ={"NAMESRV_ADDR": "127.0.0.1:9876;127.0.0.1:9877"})
    assert url.endpoints == (("127.0.0.1", 9876), ("127.0.0.1", 9877)) and url.namespace == "ns"
    with pytest.raises(oms.OMSRuntimeException) as err:
        parse_access_point("oms:rocketmq:///ns", environ={})
    assert err.value.code == Code.ILLEGAL_ACCESS_POINT and "NAMESRV_ADDR" in str(err.value)


@pytest.mark.parametrize("bad", ["rocketmq://h:1/ns", "oms:rocketmq://host/ns", "oms:rocketmq://h:99999/ns", "x"])
def test_malformed_urls_are_illegal_access_points(bad):
    with pytest.raises(oms.OMSRuntimeException) as err:
        parse_access_point(bad, environ={})
    assert err.value.code == Code.ILLEGAL_ACCESS_POINT


def test_access_point_attributes_credentials_and_driver(monkeypatch):
    ap = oms.get_messaging_access_point("oms:rocketmq://u@127.0.0.1:1/ns", {"OPERATION_TIMEOUT": 100})
    kv = ap.attributes()
    assert kv["ACCESS_POINTS"] == "127.0.0.1:1" and kv["REGION"] == "ns" and kv["ACCOUNT_ID"] == "u"
    assert kv.get_int("OPERATION_TIMEOUT") == 100 and ap.credentials is None
    ap.shutdown()  # never started: still fine, and idempotent
    ap.shutdown()
    with pytest.raises(ValueError, match="ACCOUNT_SECRET"):
        oms.get_messaging_access_point("oms:rocketmq://127.0.0.1:1/", access_key="ak")
    with pytest.raises(oms.OMSNotSupportedException):
        oms.get_messaging_access_point("oms:kafka://127.0.0.1:1/")


# -- message mapping ----------------------------------------------------------------------------------------------


def test_message_mapping_tag_keys_group_trace_and_properties():
    msg = oms.BytesMessage(b"x", "T", tags="TagA", keys=["k1", "k2"], sharding_key="order-7")
    msg.put_user_headers("color", "red").put_sys_headers("custom", "1").put_sys_headers("TRACE_ID", "t-1")
    w = wire(msg)
    sp = w.pb.system_properties
    assert sp.tag == "TagA" and list(sp.keys) == ["k1", "k2"] and sp.message_group == "order-7"
    assert sp.message_type == definition_pb2.FIFO and sp.trace_context == "t-1"
    assert dict(w.pb.user_properties) == {"color": "red", "custom": "1"}
    assert msg.message_id == sp.message_id and len(sp.message_id) == 34
    assert w.pb.topic.name == "T" and sp.born_timestamp.seconds > 0


def test_raw_rocketmq_header_names_are_accepted_for_java_parity():
    msg = oms.BytesMessage(b"x", "T", user_headers={"TAGS": "A", "KEYS": "a b", "__SHARDINGKEY": "g"})
    sp = wire(msg).pb.system_properties
    assert sp.tag == "A" and list(sp.keys) == ["a", "b"] and sp.message_group == "g"
    assert dict(wire(msg).pb.user_properties) == {}


def test_delay_level_and_start_time_become_delivery_timestamps():
    now = time.time()
    leveled = wire(oms.BytesMessage(b"x", "T", delay_level=3)).pb
    sp = leveled.system_properties
    assert sp.message_type == definition_pb2.DELAY
    assert 9 <= sp.delivery_timestamp.seconds - now <= 11  # level 3 = 10 s (what a RocketMQ proxy honours)
    assert leveled.user_properties["rmq.delay.time.level"] == "3"  # an OrbitMQ broker applies its own ladder
    capped = wire(oms.BytesMessage(b"x", "T", delay_level=40)).pb
    assert capped.user_properties["rmq.delay.time.level"] == "40"  # the broker caps it at its own last level
    assert 7190 <= capped.system_properties.delivery_timestamp.seconds - now <= 7210  # default ladder's 2 h
    at_ms = int((now + 60) * 1000)
    timed = wire(oms.BytesMessage(b"x", "T", start_time=at_ms)).pb
    assert "rmq.delay.time.level" not in timed.user_properties
    sp = timed.system_properties
    assert sp.delivery_timestamp.seconds * 1000 + sp.delivery_timestamp.nanos // 1_000_000 == at_ms
    past = wire(oms.BytesMessage(b"x", "T", start_time=int(now * 1000) - 5000)).pb.system_properties
    assert not past.HasField("delivery_timestamp") and past.message_type == definition_pb2.NORMAL
    with pytest.raises(oms.OMSMessageFormatException) as err:
        wire(oms.BytesMessage(b"x", "T", start_time=int((now + 3 * 86400) * 1000)))
    assert err.value.code == Code.ILLEGAL_DELIVERY_TIME


@pytest.mark.parametrize("key", ["PRIORITY", "SCHEDULE_EXPRESSION", "STOP_TIME", "TIMEOUT"])
def test_unsupported_headers_raise_instead_of_being_ignored(key):
    with pytest.raises(oms.OMSNotSupportedException) as err:
        wire(oms.BytesMessage(b"x", "T", sys_headers={key: "1"}))
    assert key in str(err.value) and err.value.code == Code.NOT_IMPLEMENTED


def test_bad_input_is_refused_with_codes_before_sending():
    cases = [
        (oms.BytesMessage(b"x"), Code.ILLEGAL_TOPIC),
        (oms.BytesMessage(b"x", "bad topic"), Code.ILLEGAL_TOPIC),
        (oms.BytesMessage(b"x", "TBW102"), Code.ILLEGAL_TOPIC),
        (oms.BytesMessage(b"", "T"), Code.MESSAGE_BODY_EMPTY),
        (oms.BytesMessage(b"x", "T", tags="a|b"), Code.ILLEGAL_MESSAGE_TAG),
        (oms.BytesMessage(b"x", "T", user_headers={"UNIQ_KEY": "1"}), Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
        (oms.BytesMessage(b"x", "T", sharding_key="g" * 80), Code.ILLEGAL_MESSAGE_GROUP),
        (oms.BytesMessage(b"x", "T", sharding_key="g", delay_level=2), Code.BAD_REQUEST),
    ]
    for msg, code in cases:
        with pytest.raises(oms.OMSMessageFormatException) as err:
            wire(msg)
        assert err.value.code == code, (msg, err.value)
        assert isinstance(err.value, ValueError)


def test_max_message_size_names_the_limit():
    with pytest.raises(oms.OMSMessageFormatException) as err:
        wire(oms.BytesMessage(b"x" * 1001, "T"), max_message_size=1000)
    assert err.value.code == Code.MESSAGE_BODY_TOO_LARGE
    assert "1001 bytes" in str(err.value) and "1000 bytes" in str(err.value) and "max_message_size" in str(err.value)


def test_compression_over_threshold_only_when_it_helps():
    body = b"abc" * 5000
    w = wire(oms.BytesMessage(body, "T"), c=4096)
    assert w.pb.system_properties.body_encoding == definition_pb2.GZIP and w.body_size < len(body)
    assert zlib.decompress(w.pb.body) == body and decode_body(w.pb.body, definition_pb2.GZIP) == body
    small = wire(oms.BytesMessage(b"abc" * 100, "T"), c=4096)
    assert small.pb.system_properties.body_encoding == definition_pb2.IDENTITY
    random_body = os.urandom(8192)
    raw = wire(oms.BytesMessage(random_body, "T"), c=4096)
    assert raw.pb.system_properties.body_encoding == definition_pb2.IDENTITY and raw.pb.body == random_body
    off = wire(oms.BytesMessage(body, "T"), c=0)
    assert off.pb.system_properties.body_encoding == definition_pb2.IDENTITY


def test_received_message_round_trip_fills_sys_headers():
    w = wire(oms.BytesMessage(b"abc" * 5000, "T", tags="A", keys=["k"], user_headers={"u": "1"}))
    sp = w.pb.system_properties
    sp.receipt_handle, sp.delivery_attempt, sp.queue_id, sp.queue_offset = "rh", 3, 2, 9
    back = from_wire(w.pb)
    assert back.body == b"abc" * 5000 and back.tags == "A" and back.keys == ["k"]
    assert back.user_headers() == {"u": "1"} and back.receipt_handle == "rh" and back.reconsume_times == 2
    assert back.queue_id == 2 and back.queue_offset == 9 and back.message_id == sp.message_id
    assert back.get_body(str) == "abc" * 5000


# -- errors -------------------------------------------------------------------------------------------------------


def test_exception_hierarchy_by_code():
    assert exception_class(Code.UNAUTHORIZED) is oms.OMSSecurityException
    assert exception_class(Code.FORBIDDEN) is oms.OMSSecurityException
    assert exception_class(Code.TOPIC_NOT_FOUND) is oms.OMSResourceNotExistException
    assert exception_class(Code.ILLEGAL_TOPIC) is oms.OMSMessageFormatException
    assert exception_class(Code.MESSAGE_BODY_TOO_LARGE) is oms.OMSMessageFormatException
    assert exception_class(Code.PROXY_TIMEOUT) is oms.OMSTimeoutException
    assert exception_class(Code.NOT_IMPLEMENTED) is oms.OMSNotSupportedException
    assert exception_class(Code.INTERNAL_SERVER_ERROR) is oms.OMSRuntimeException
    err = from_mq_error(MQError(Code.ILLEGAL_TOPIC, "bad"))
    assert isinstance(err, oms.OMSException) and err.code == Code.ILLEGAL_TOPIC and err.error_code == 40002
    assert str(err) == "ILLEGAL_TOPIC(40002): bad"
    assert issubclass(oms.OMSTimeOutException, TimeoutError)
    assert issubclass(oms.OMSResourceNotExistException, LookupError)
    unknown = oms.OMSRuntimeException(49999, "new code")
    assert unknown.code == 49999 and "49999" in str(unknown)


# -- batching, fault avoidance, selectors -------------------------------------------------------------------------


def test_batches_split_per_topic_and_at_4_mib():
    msgs = [oms.BytesMessage(bytes(MiB), "A") for _ in range(9)] + [oms.BytesMessage(b"x", "B")]
    wires = [wire(m, c=0) for m in msgs]
    chunks = split_batches(wires, MAX_BATCH_SIZE, 1024)
    assert chunks == [[0, 1, 2, 3], [4, 5, 6, 7], [8], [9]]
    assert all(sum(wires[i].body_size for i in c) <= MAX_BATCH_SIZE for c in chunks)
    many = [wire(oms.BytesMessage(b"x", "A")) for _ in range(5)]
    assert split_batches(many, MAX_BATCH_SIZE, 2) == [[0, 1], [2, 3], [4]]


def test_latency_fault_tolerance_tables():
    assert [not_available_ms(x) for x in (10, 100, 600, 1500, 2500, 5000, 20000)] == [
        0, 0, 30_000, 60_000, 120_000, 180_000, 600_000,
    ]  # fmt: skip
    now = [100.0]
    ft = LatencyFaultTolerance(True, clock=lambda: now[0])
    ft.update("a", 20, isolation=False)
    assert ft.is_available("a")
    ft.update("b", 0, isolation=True)  # a failure benches the broker for 10 minutes
    assert not ft.is_available("b") and ft.least_bad(["b"]) == "b"
    now[0] += 601
    assert ft.is_available("b")
    off = LatencyFaultTolerance(False)
    off.update("a", 0, isolation=True)
    assert off.is_available("a")


def test_selectors_are_stable_and_pick_from_the_list():
    queues = [oms.MessageQueue("T", b, q) for b in ("room1@a", "room2@b") for q in range(4)]
    by_hash = oms.SelectMessageQueueByHash()
    msg = oms.BytesMessage(b"x", "T")
    assert by_hash(queues, msg, "order-1") == by_hash(queues, msg, "order-1")
    assert by_hash(queues, msg, 5) == queues[5]
    assert by_hash(queues, msg, "order-1") == queues[abs(java_string_hash("order-1")) % 8]
    assert oms.SelectMessageQueueByRandom()(queues, msg, None) in queues
    room = oms.SelectMessageQueueByMachineRoom({"room2"})
    assert all(room(queues, msg, k).broker_name == "room2@b" for k in range(20))
    assert oms.SelectMessageQueueByMachineRoom({"nowhere"})(queues, msg, 3) in queues
    assert java_string_hash("hello") == 99162322  # "hello".hashCode() in Java


def test_group_for_queue_lands_on_the_queue_by_java_hash():
    for n in (1, 3, 4, 8):
        for qid in range(n):
            assert java_string_hash(group_for_queue(qid, n)) % n == qid
    with pytest.raises(ValueError):
        group_for_queue(4, 4)


def test_producer_config_from_attributes():
    cfg = ProducerConfig.from_attributes(
        oms.KeyValue({"OPERATION_TIMEOUT": 1500, "rmq.retry.times.when.send.failed": 0, "PRODUCER_ID": "P"})
    )
    assert cfg.timeout_s == 1.5 and cfg.retry_times_when_send_failed == 0 and cfg.group == "P"
    assert cfg.max_message_size == 4 * MiB and cfg.compress_msg_body_over_howmuch == 4096
    with pytest.raises(ValueError):
        ProducerConfig.from_attributes(oms.KeyValue({"OPERATION_TIMEOUT": 0}))


# -- futures, resolutions, hooks ----------------------------------------------------------------------------------


def test_future_listener_fires_exactly_once_and_get_timeout_does_not_cancel():
    fut: oms.Future[int] = oms.Future()
    calls: list[int] = []
    fut.add_listener(lambda f: calls.append(f.get()))
    with pytest.raises(oms.OMSTimeOutException):
        fut.get(0.01)
    assert not fut.cancelled() and fut.get_throwable() is None
    setter = threading.Timer(0.05, fut.set_result, (5,))
    setter.start()
    assert fut.get(5) == 5 and fut.get(5) == 5
    setter.join(5)  # get() may return before the setting thread ran the listeners registered earlier
    fut.add_listener(lambda f: calls.append(-1))  # already done: runs now, once
    assert calls == [5, -1]
    failed: oms.Future[int] = oms.Future()
    failed.set_exception(oms.OMSRuntimeException(Code.INTERNAL_ERROR, "boom"))
    assert isinstance(failed.get_throwable(), oms.OMSRuntimeException)


def test_transaction_resolutions_from_user_code():
    from rocketmq import TransactionResolution as Official

    assert parse_resolution("commit") is oms.TransactionResolution.COMMIT
    assert parse_resolution(Official.ROLLBACK) is oms.TransactionResolution.ROLLBACK
    assert parse_resolution(None) is oms.TransactionResolution.UNKNOWN
    assert parse_resolution(True) is oms.TransactionResolution.COMMIT
    with pytest.raises(ValueError):
        parse_resolution("maybe")


def test_plain_objects_and_marked_plugins_implement_hooks():
    seen: list[str] = []

    class Plain:
        def oms_before_send(self, message):
            seen.append("plain-before")

        def unrelated(self):
            raise AssertionError("not a hook")

    class Marked:
        @oms.hookimpl
        def oms_after_send(self, message, result, error):
            seen.append("marked-after")
            raise RuntimeError("observers cannot break a send")

    pm = ClientPluginManager(load_entry_points=False)
    pm.register(Plain())
    own = ClientPluginManager(load_entry_points=False)
    own.register(Marked())
    hooks = Hooks(pm, own)
    hooks.before_send(oms.BytesMessage(b"x", "T"))
    hooks.after_send(oms.BytesMessage(b"x", "T"), None, None)
    assert seen == ["plain-before", "marked-after"]


def test_hooks_see_plugins_registered_and_removed_after_their_first_use():
    """Which hooks are implemented is cached (asked once per message); a change of either manager shows at once."""
    seen: list[str] = []

    class Late:
        def oms_before_send(self, message):
            seen.append(message.get_body(str))

    shared, own = ClientPluginManager(load_entry_points=False), ClientPluginManager(load_entry_points=False)
    hooks = Hooks(shared, own)
    hooks.before_send(oms.BytesMessage(b"nobody", "T"))
    late = Late()
    own.register(late)
    hooks.before_send(oms.BytesMessage(b"own", "T"))
    own.unregister(late)
    hooks.before_send(oms.BytesMessage(b"gone", "T"))
    shared.register(late)
    hooks.before_send(oms.BytesMessage(b"shared", "T"))
    assert seen == ["own", "shared"]


def test_third_party_plugins_load_from_the_entry_point_group(tmp_path, monkeypatch):
    (tmp_path / "oms_fake_plugin.py").write_text(
        "import oms\nSEEN = []\n@oms.hookimpl\ndef oms_before_send(message):\n    SEEN.append(message.get_body(str))\n"
    )
    dist = tmp_path / "oms_fake_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: oms-fake-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[orbitmq.client_plugins]\nfake = oms_fake_plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ap = oms.get_messaging_access_point("oms:rocketmq://127.0.0.1:1/")
    try:
        assert ap.plugin_manager.has_plugin("fake")
        Hooks(ap.plugin_manager).before_send(oms.BytesMessage(b"via entry point", "T"))
        import oms_fake_plugin  # type: ignore[import-not-found]

        assert oms_fake_plugin.SEEN == ["via entry point"]
        off = oms.get_messaging_access_point("oms:rocketmq://127.0.0.1:1/", {"oms.load.plugins": False})
        assert not off.plugin_manager.has_plugin("fake")
    finally:
        ap.shutdown()


def test_oms_depends_on_common_only():
    import ast
    from pathlib import Path

    root = Path(oms.__file__).resolve().parent
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in {"broker", "namesrv", "plugins", "transports"}, (path, name)


# -- stored records as messages (lazy headers) --------------------------------------------------------------------


def _stored(props: dict[str, str], **kw):
    from oms.consumer.records import record_to_message
    from orbitmq.record import RecordView

    record = RecordView(
        "T", b"body", 3, 41, 9000, props, 0, 0, 1_700_000_000_000, ("10.0.0.1", 5), 1_700_000_000_100,
        ("10.0.0.2", 8081), 2, 120,
    )  # fmt: skip
    return record_to_message(record)


def test_stored_message_answers_from_the_record_then_from_headers():
    props = {"TAGS": "TagA", "KEYS": "k1 k2 k1", "UNIQ_KEY": "ID1", "color": "red", "": "dropped"}
    lazy = _stored(props)
    assert isinstance(lazy, oms.BytesMessage)
    # the conveniences, before the header maps exist
    assert (lazy.destination, lazy.message_id, lazy.tags, lazy.keys) == ("T", "ID1", "TagA", ["k1", "k2"])
    assert (lazy.queue_id, lazy.queue_offset, lazy.reconsume_times) == (3, 41, 2)
    assert (lazy.born_timestamp, lazy.store_timestamp, lazy.body) == (1_700_000_000_000, 1_700_000_000_100, b"body")
    # the same answers once the maps are built, and the maps hold what the eager mapping held
    built = _stored(props)
    assert dict(built.user_headers()) == {"color": "red"}
    assert dict(built.sys_headers()) == {
        "DESTINATION": "T", "MESSAGE_ID": "ID1", "rmq.tags": "TagA", "SEARCH_KEYS": "k1,k2,k1",
        "BORN_TIMESTAMP": "1700000000000", "BORN_HOST": "10.0.0.1", "STORE_TIMESTAMP": "1700000000100",
        "STORE_HOST": "10.0.0.2:8081", "QUEUE_ID": "3", "QUEUE_OFFSET": "41", "REDELIVERED_NUMBER": "2",
    }  # fmt: skip
    assert (built.destination, built.message_id, built.tags, built.keys) == ("T", "ID1", "TagA", ["k1", "k2"])
    assert (built.queue_id, built.queue_offset, built.reconsume_times) == (3, 41, 2)
    # writes go to the maps and win over the record from then on
    changed = _stored(props)
    changed.tags = "TagB"
    changed.put_user_headers("extra", 1)
    changed.destination = "U"
    assert (changed.tags, changed.destination, changed.user_headers()["extra"]) == ("TagB", "U", "1")
    assert changed.queue_offset == 41 and "TagB" in repr(changed)
    bare = _stored({})
    assert (bare.tags, bare.keys, bare.message_id) == (None, [], "9000"), "no unique key: the commit log offset"
    with pytest.raises(AttributeError):
        bare.no_such_attribute  # noqa: B018


def test_a_received_message_keeps_its_receipt_aside_until_the_sys_headers_are_built():
    props = {"UNIQ_KEY": "ID1", "color": "red"}
    received = _stored(props)
    received.set_receipt("handle-1", 4)
    assert (received.receipt_handle, received.reconsume_times) == ("handle-1", 4), "the receive's count wins"
    assert dict(received.user_headers()) == {"color": "red"}
    received.put_user_headers("seen", "yes")  # a user header written before the sys headers are built
    assert received._record is not None, "the user headers alone keep the record: no sys header built"
    sys_h = received.sys_headers()
    assert (sys_h["RECEIPT_HANDLE"], sys_h["REDELIVERED_NUMBER"], sys_h["MESSAGE_ID"]) == ("handle-1", "4", "ID1")
    assert dict(received.user_headers()) == {"color": "red", "seen": "yes"}, "the user headers are not built again"
    assert (received.receipt_handle, received.reconsume_times, received._record) == ("handle-1", 4, None)
    received.set_receipt("handle-2", 5)  # a renewed handle on a message whose maps exist: the maps take it
    assert (received.receipt_handle, received.reconsume_times) == ("handle-2", 5)
    assert received.sys_headers()["RECEIPT_HANDLE"] == "handle-2"
    plain = _stored(props)
    assert plain.receipt_handle is None and plain.reconsume_times == 2 and "RECEIPT_HANDLE" not in plain.sys_headers()


def test_pulled_records_decode_properties_only_when_asked():
    from oms.consumer.records import decode_records, record_to_message
    from orbitmq.record import iter_records
    from tests.oms.test_consumer_units import _record

    props = {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ID1", "color": "red"}
    raw = _record(b"a", props, queue_offset=7) + _record(zlib.compress(b"z" * 50), {}, queue_offset=8, sys_flag=1)
    first, second = decode_records(raw)
    assert first._record is None, "nothing decoded beyond the framing yet"
    assert (first.queue_offset, first.queue_id, first.body, second.body) == (7, 2, b"a", b"z" * 50)
    assert first._record is None, "offsets come from the header"
    assert first.tags == "TagA" and first._record is not None
    eager = [record_to_message(r) for r in iter_records(raw)]
    for lazy, built in zip(decode_records(raw), eager, strict=True):
        assert dict(lazy.sys_headers()) == dict(built.sys_headers())
        assert dict(lazy.user_headers()) == dict(built.user_headers())
    with pytest.raises(oms.OMSRuntimeException, match="do not decode") as err:
        decode_records(raw[:-3])
    assert err.value.code == Code.MESSAGE_CORRUPTED
    bad = bytearray(raw)
    bad[4] ^= 0xFF  # the magic code
    with pytest.raises(oms.OMSRuntimeException, match="magic"):
        decode_records(bytes(bad))


def test_a_message_built_from_any_accepted_type_holds_what_the_setters_would() -> None:
    # the constructor stores a bytes body and non-empty str topic and tag as they are; anything else goes
    # through the setters' checks and conversions
    text = oms.BytesMessage("héllo", 7, tags=5)
    assert text.body == "héllo".encode() and text.destination == "7" and text.tags == "5"
    assert oms.BytesMessage(bytearray(b"ab"), "T").body == b"ab"
    assert type(oms.BytesMessage(memoryview(b"ab"), "T").body) is bytes
    empty = oms.BytesMessage(b"x", "", tags="")
    assert empty.sys_headers().as_dict() == {oms.BuiltinKeys.DESTINATION: "", oms.NonStandardKeys.TAGS: ""}
    with pytest.raises(TypeError):
        oms.BytesMessage(12345, "T")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        oms.BytesMessage(b"x", "T", tags=None, sys_headers={"k": None})
    plain = oms.BytesMessage(b"x", "T", tags="A")
    assert dict(plain.sys_headers()) == {oms.BuiltinKeys.DESTINATION: "T", oms.NonStandardKeys.TAGS: "A"}
    assert not plain.user_headers()
