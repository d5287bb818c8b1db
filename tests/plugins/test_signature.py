"""The v2 signature: the protocol's test vector, and byte-for-byte agreement with the official client's signer."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from rocketmq.v5.util.signature import Signature

from common.errors import Code, MQError
from common.v2.signature import parse_authorization, sign, signing_metadata, verify


def test_protocol_test_vector():
    assert sign("mysk", "20240101T000000Z") == "8e88fd26f9a84f63fd0446e5162eef5cf1d148ea"
    assert verify("mysk", "20240101T000000Z", "8E88FD26F9A84F63FD0446E5162EEF5CF1D148EA")  # hex case-insensitive
    assert not verify("other", "20240101T000000Z", "8e88fd26f9a84f63fd0446e5162eef5cf1d148ea")


def test_official_client_headers_verify_and_ours_match_them():
    config = SimpleNamespace(credentials=SimpleNamespace(ak="myak", sk="mysecret"), namespace="")
    official = dict(Signature.metadata(config, "client-1"))
    parsed = parse_authorization(official["authorization"])
    assert parsed.access_key == "myak" and parsed.signed_headers == "x-mq-date-time"
    assert verify("mysecret", official["x-mq-date-time"], parsed.signature_hex)
    when = datetime.strptime(official["x-mq-date-time"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    ours = dict(signing_metadata("myak", "mysecret", now=when))
    assert ours["authorization"] == official["authorization"]
    assert ours["x-mq-date-time"] == official["x-mq-date-time"]
    assert "x-mq-session-token" in dict(signing_metadata("a", "b", session_token="tok"))


@pytest.mark.parametrize(
    "header",
    ["MQv2-HMAC-SHA1", "MQv2-HMAC-SHA1 Credential", "MQv2-HMAC-SHA1 SignedHeaders=x-mq-date-time", ""],
)
def test_malformed_authorization_is_unauthorized(header):
    with pytest.raises(MQError) as err:
        parse_authorization(header)
    assert err.value.code == Code.UNAUTHORIZED


def test_credential_scope_after_slash_is_ignored():
    assert parse_authorization("MQv2-HMAC-SHA1 Credential=ak/2024/x, Signature=ab").access_key == "ak"
