"""``PullConsumer.pull_frames`` and its Arrow columns (``oms.consumer.arrow_columns``): the same values as
``pull_columns``/``decode_columns`` for the same records, on hand-made payloads and against a real broker."""

from __future__ import annotations

import socket
import zlib
from typing import Any

import pytest

import oms
from oms.consumer import PullShape
from oms.consumer.arrow_columns import to_arrow
from oms.consumer.columns import MessageColumns, decode_columns
from oms.consumer.frames import RecordFrames, locate_frames
from orbitmq.record import HEADER, MESSAGE_MAGIC_CODE, PROPS_LEN, TOPIC_LEN, TRAILER, encode_properties

pa = pytest.importorskip("pyarrow")


def _record(body: bytes, raw_props: bytes, *, queue_offset: int, sys_flag: int = 0, topic: bytes = b"T") -> bytes:
    """One stored record with its properties given as bytes (so a name can appear twice)."""
    size = HEADER.size + len(body) + TOPIC_LEN.size + len(topic) + PROPS_LEN.size + len(raw_props) + TRAILER.size
    header = HEADER.pack(
        size, MESSAGE_MAGIC_CODE, zlib.crc32(body), 2, 0, queue_offset, 1000 + queue_offset, sys_flag,
        1700000000000 + queue_offset, socket.inet_aton("10.0.0.1"), 5, 1700000000100, socket.inet_aton("10.0.0.2"),
        8081, queue_offset % 3, 0, len(body),
    )  # fmt: skip
    record = header + body + TOPIC_LEN.pack(len(topic)) + topic + PROPS_LEN.pack(len(raw_props)) + raw_props
    return record + TRAILER.pack(zlib.crc32(record))


RECORDS: list[tuple[bytes, bytes, int]] = [
    (encode_properties({"TAGS": "TagA", "KEYS": "k1 k2 k1", "UNIQ_KEY": "ID1", "color": "red"}), b"plain", 0),
    (encode_properties({"MYTAGS": "not-a-tag", "XUNIQ_KEY": "not-an-id", "note": "TAGS"}), b"no system props", 0),
    (encode_properties({"KEYS": " lone ", "TAGS": ""}), zlib.compress(b"z" * 100), 1),
    (encode_properties({"UNIQ_KEY": "ID4", "KEYS": "solo", "TAGS": "TagB"}), b"", 0),
    (b"", b"no properties at all", 0),
    (
        encode_properties({"XUNIQ_KEY": "not-it", "UNIQ_KEY": "ID6", "cit\u00e9": "\u00e9t\u00e9 \u2603"}),
        b"\x00\xff",
        0,
    ),
    (b"TAGS\x01first\x02TAGS\x01second\x02UNIQ_KEY\x01\x02KEYS\x01a\x02", b"a name twice, an empty id", 0),
    (encode_properties({"UNIQ_KEY": "ID8", "TAGS": "TagA"}), b"x" * 5000, 0),
]


def _payload(records: list[tuple[bytes, bytes, int]] = RECORDS, first_offset: int = 7) -> bytes:
    return b"".join(
        _record(body, props, queue_offset=first_offset + i, sys_flag=flag)
        for i, (props, body, flag) in enumerate(records)
    )


def _as_lists(cols: Any) -> dict[str, list[Any]]:
    """``MessageColumns`` or ``ArrowColumns`` as plain lists, field by field."""
    names = ("queue_offsets", "message_ids", "tags", "keys", "bodies", "born_timestamps", "store_timestamps")
    out = {n: list(v) if isinstance(v := getattr(cols, n), list) else v.to_pylist() for n in names}
    reconsumed = cols.reconsume_times
    out["reconsume_times"] = list(reconsumed) if isinstance(reconsumed, list) else reconsumed.to_pylist()
    out["properties"] = cols.properties
    return out


@pytest.mark.parametrize("properties", [False, True])
def test_frames_give_what_decode_columns_gives(properties: bool) -> None:
    raw = _payload()
    expected = decode_columns(raw, properties)
    frames = locate_frames(raw)
    assert len(frames) == len(expected) == len(RECORDS)
    assert frames.decoded(properties) == expected
    arrow = to_arrow([frames], properties)
    assert _as_lists(arrow) == _as_lists(expected)
    # what the cases are there for
    assert arrow.message_ids.to_pylist()[:2] == ["ID1", "1008"] and arrow.message_ids[5].as_py() == "ID6"
    assert arrow.message_ids[6].as_py() == "1013" and arrow.tags[6].as_py() == "first"
    assert arrow.keys.to_pylist()[:4] == ["k1 k2", None, "lone", "solo"]
    assert arrow.bodies[2].as_py() == b"z" * 100 and arrow.bodies[7].as_py() == b"x" * 5000
    assert arrow.bodies.type == pa.binary() and arrow.message_ids.type == pa.string()
    if properties:
        assert arrow.properties is not None and arrow.properties[5] == {
            "XUNIQ_KEY": "not-it",
            "cit\u00e9": "\u00e9t\u00e9 \u2603",
        }


def test_several_pulls_make_one_set_of_columns() -> None:
    first, second = _payload(RECORDS[:3]), _payload(RECORDS[3:], first_offset=10)
    arrow = to_arrow([locate_frames(first), RecordFrames(), locate_frames(second)], properties=True)
    assert _as_lists(arrow) == _as_lists(decode_columns(first + second, properties=True))


def test_take_and_before_keep_rows_as_message_columns_take() -> None:
    raw = _payload()
    frames, cols = locate_frames(raw), decode_columns(raw, properties=True)
    kept = frames.take([1, 3, 6])
    assert kept.decoded(True) == cols.take([1, 3, 6])
    assert _as_lists(to_arrow([kept], True)) == _as_lists(cols.take([1, 3, 6]))
    assert frames.before(10).decoded() == decode_columns(raw).take([0, 1, 2])
    assert frames.before(1000) is frames and len(frames.before(0)) == 0
    assert frames.last_queue_offset == 7 + len(RECORDS) - 1


def test_nothing_pulled_is_empty_columns_of_the_right_types() -> None:
    for chunks in ([], [RecordFrames()], [locate_frames(b"")]):
        arrow = to_arrow(chunks, properties=True)
        assert len(arrow) == 0 and arrow.properties == []
        assert arrow.bodies.type == pa.binary() and arrow.queue_offsets.type == pa.int64()
        assert arrow.reconsume_times.type == pa.int32() and arrow.tags.type == pa.string()
    assert to_arrow([]).properties is None
    assert RecordFrames().decoded(True) == MessageColumns(properties=[])


def test_broken_payloads_are_refused() -> None:
    raw = _payload()
    with pytest.raises(oms.OMSRuntimeException):
        locate_frames(raw[:-3])
    record = bytearray(_record(b"body", encode_properties({"a": "b"}), queue_offset=1))
    at = HEADER.size + 4 + 1 + 1  # the properties' length
    record[at : at + 2] = PROPS_LEN.pack(60_000)  # past the record's end
    with pytest.raises(oms.OMSRuntimeException, match="properties"):
        locate_frames(bytes(record))
    not_utf8 = locate_frames(_record(b"body", b"TAGS\x01\xff\xfe\x02", queue_offset=1))
    with pytest.raises(oms.OMSRuntimeException, match="UTF-8"):
        to_arrow([not_utf8])


@pytest.fixture
def pull_consumer(access_point: oms.MessagingAccessPoint) -> Any:
    with access_point.create_pull_consumer(consumer_id="GPullFrames", operation_timeout=5000) as pc:
        yield pc


@pytest.mark.timeout(60)
def test_pull_frames_equals_pull_columns_on_a_broker(producer: oms.Producer, pull_consumer: Any) -> None:
    topic = "OmsPullFrames"
    for i in range(24):  # one by one: the broker spreads single sends over the queues
        message = oms.BytesMessage(f"f{i}".encode() * (i + 1), topic, tags="TagA" if i % 2 else "TagB")
        if i % 3 == 0:
            message.keys = [f"k{i}", "shared", f"k{i}"]
        message.put_user_headers("n", str(i))
        producer.send(message)
    pc = pull_consumer
    rows = 0
    for q in pc.queues(topic):
        latest = pc.latest_offset(q)
        frames = pc.pull_frames(q, 0, 100)
        columns = pc.pull_columns(q, 0, 100, properties=True)
        assert frames.status is columns.status and frames.next_offset == columns.next_offset == latest
        assert frames.frames is not None and columns.columns is not None and not frames.messages
        assert len(frames) == len(columns) == latest
        assert frames.frames.decoded(True) == columns.columns
        assert _as_lists(to_arrow([frames.frames], True)) == _as_lists(columns.columns)
        rows += len(frames)
        tagged = pc.pull_frames(q, 0, 100, expression="TagA")
        tagged_columns = pc.pull_columns(q, 0, 100, expression="TagA")
        assert tagged.frames is not None and tagged_columns.columns is not None
        assert tagged.frames.decoded() == tagged_columns.columns
        assert tagged.next_offset == tagged_columns.next_offset
        at_end = pc.pull_frames(q, latest, 10)
        assert at_end.status is oms.PullStatus.NO_NEW_MSG and at_end.frames is not None and not len(at_end)
        illegal = pc.pull_frames(q, latest + 5, 10)
        assert illegal.status is oms.PullStatus.OFFSET_ILLEGAL and illegal.next_offset == latest
        assert illegal.frames is not None and not len(illegal)
    assert rows == 24


@pytest.mark.timeout(60)
def test_started_pulls_answer_as_the_blocking_ones(producer: oms.Producer, pull_consumer: Any) -> None:
    topic = "OmsStartPull"
    producer.send_batch([oms.BytesMessage(f"s{i}".encode(), topic, tags="T") for i in range(30)])
    queue = next(q for q in pull_consumer.queues(topic) if pull_consumer.latest_offset(q) > 0)
    latest = pull_consumer.latest_offset(queue)
    pending = [pull_consumer.start_pull(queue, at, 10) for at in range(0, latest, 10)]
    columns = pull_consumer.start_pull(queue, 0, 100, shape=PullShape.COLUMNS, properties=True)
    # a long poll past the end cannot answer before the cancel reaches it (a pull of stored messages could)
    dropped = pull_consumer.start_pull(queue, latest, 100, timeout=30.0)
    assert dropped.cancel()
    got = [p.result() for p in pending]
    assert all(r.frames is not None for r in got)
    assert [r.next_offset for r in got] == [min(at + 10, latest) for at in range(0, latest, 10)]
    whole = pull_consumer.pull_columns(queue, 0, 100, properties=True)
    decoded = [r.frames.decoded(True) for r in got if r.frames is not None]
    assert [m for c in decoded for m in c.message_ids] == whole.columns.message_ids
    assert columns.result().columns == whole.columns
    with pytest.raises(oms.OMSIllegalStateException):
        dropped.result()
