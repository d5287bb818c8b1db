"""Request metadata parsing and Status building."""

from __future__ import annotations

import pytest
from rocketmq.grpc_protocol import definition_pb2 as d

from orbitmq.errors import MQError
from orbitmq.v2.metadata import meta_from_pairs
from orbitmq.v2.status import internal_error_status, ok_status, status, status_from_error


def test_metadata_from_official_client_headers() -> None:
    meta = meta_from_pairs(
        [
            ("x-mq-client-id", "vm@9273@0@dn1pagvp0sje"),
            ("x-mq-namespace", ""),
            ("x-mq-language", "PYTHON"),
            ("x-mq-protocol", "GRPC_V2"),
            ("x-mq-client-version", "5.1.2"),
            ("x-mq-date-time", "20261122T112510Z"),
            ("x-mq-request-id", "0b5a"),
            ("Authorization", "MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, Signature=ab"),
            ("trace-bin", b"\x01\x02"),
        ],
        peer="ipv4:10.1.2.3:5555",
    )
    assert meta.require_client_id() == "vm@9273@0@dn1pagvp0sje"
    assert (meta.language, meta.client_version, meta.namespace) == ("PYTHON", "5.1.2", "")
    assert meta.date_time == "20261122T112510Z" and meta.request_id == "0b5a"
    assert meta.authorization.startswith("MQv2-HMAC-SHA1 Credential=ak")
    assert meta.peer_host == "10.1.2.3"
    assert meta_from_pairs([], peer="ipv6:[::1]:5555").peer_host == "::1"


def test_blank_client_id_is_client_id_required() -> None:
    with pytest.raises(MQError) as exc:
        meta_from_pairs([("x-mq-client-id", "  ")]).require_client_id()
    assert exc.value.code == d.Code.CLIENT_ID_REQUIRED


def test_status_helpers_never_produce_code_zero() -> None:
    assert (ok_status().code, ok_status().message) == (d.Code.OK, "OK")
    assert status(d.Code.TOPIC_NOT_FOUND).message == "TOPIC_NOT_FOUND"
    err = status_from_error(MQError(d.Code.ILLEGAL_TOPIC, "topic 'x y' must match"))
    assert (err.code, err.message) == (d.Code.ILLEGAL_TOPIC, "topic 'x y' must match")
    assert internal_error_status(KeyError("k")).code == d.Code.INTERNAL_SERVER_ERROR
    with pytest.raises(ValueError):
        status(0)
