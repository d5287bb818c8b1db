"""The frame protocol without I/O (oms/client/frame_codec.py): requests numbered and framed as the broker's
dispatcher reads them, answers cut from reads of any size, and read as gRPC would (status codes)."""

from __future__ import annotations

import grpc
import pytest

from oms.client.frame_codec import FrameCodec, FrameRpcError, answer_body
from orbitmq.remoting.codec import RPC_TYPE_RESPONSE, RemotingCommand, decode, encode
from orbitmq.remoting.codes import ResponseCode, SerializeType
from orbitmq.remoting.grpc_frames import (
    CANCEL_FIELD,
    MAX_FRAME_BODY_BYTES,
    METHOD_FIELD,
    STATUS_FIELD,
    TIMEOUT_FIELD,
    OrbitRequestCode,
)

METHOD = "/orbitmq.pop.Pop/ReceiveBatch"


def _answer(opaque: int, body: bytes, code: int = ResponseCode.SUCCESS, **ext: str) -> RemotingCommand:
    return RemotingCommand(
        code, opaque, RPC_TYPE_RESPONSE, ext_fields=dict(ext), body=body, serialize_type=SerializeType.ROCKETMQ
    )


def test_requests_are_numbered_and_carry_method_deadline_and_metadata() -> None:
    codec = FrameCodec()
    first, frame = codec.request(METHOD, b"req", [("x-mq-client-id", "c1")], 6.5)
    second, _ = codec.request(METHOD, b"req", [], 1.0)
    assert second == first + 1
    cmd = decode(frame[4:])
    assert cmd.code == OrbitRequestCode.GRPC_UNARY and cmd.opaque == first and cmd.body == b"req"
    assert cmd.ext_fields[METHOD_FIELD] == METHOD and cmd.ext_fields[TIMEOUT_FIELD] == "6500"
    assert cmd.ext_fields["x-mq-client-id"] == "c1"
    cancel = decode(codec.cancel(first)[4:])
    assert cancel.code == OrbitRequestCode.GRPC_CANCEL and cancel.ext_fields[CANCEL_FIELD] == str(first)


def test_an_over_limit_request_is_refused_before_anything_is_written() -> None:
    with pytest.raises(FrameRpcError) as err:
        FrameCodec().request(METHOD, b"x" * (MAX_FRAME_BODY_BYTES + 1), [], 1.0)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_answers_are_cut_from_reads_of_any_size() -> None:
    wire = encode(_answer(1, b"a" * 1000)) + encode(_answer(2, b"b"))
    codec = FrameCodec()
    got = [a for i in range(0, len(wire), 7) for a in codec.feed(wire[i : i + 7])]
    assert [(a.opaque, answer_body(a, METHOD)) for a in got] == [(1, b"a" * 1000), (2, b"b")]


def test_an_error_answer_reads_as_the_grpc_status() -> None:
    refused = _answer(3, b"", ResponseCode.SYSTEM_ERROR, **{STATUS_FIELD: str(grpc.StatusCode.UNAVAILABLE.value[0])})
    refused.remark = "broker is stopping"
    with pytest.raises(FrameRpcError) as err:
        answer_body(refused, METHOD)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE and err.value.details() == "broker is stopping"
    with pytest.raises(FrameRpcError) as unknown:
        answer_body(_answer(4, b"", ResponseCode.SYSTEM_ERROR), METHOD)
    assert unknown.value.code() == grpc.StatusCode.UNKNOWN


def test_a_request_head_and_its_body_written_after_it_are_the_whole_request() -> None:
    body = b"payload" * 1000
    opaque, frame = FrameCodec().request(METHOD, body, [("x-mq-client-id", "c1")], 2.0)
    same, head = FrameCodec().request_head(METHOD, len(body), [("x-mq-client-id", "c1")], 2.0)
    assert same == opaque and head + body == frame
    with pytest.raises(FrameRpcError) as err:
        FrameCodec().request_head(METHOD, MAX_FRAME_BODY_BYTES + 1, [], 1.0)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
