"""The v2 signature: the protocol's test vector, parsing as the reference proxy does, and byte-for-byte
agreement with the official ``rocketmq`` client's own signer (``rocketmq.v5.util.signature``)."""

from __future__ import annotations

import base64
import hmac
from datetime import UTC, datetime, timedelta, timezone

import pytest
import rocketmq.v5.util.signature as official_signature
from hypothesis import given
from hypothesis import strategies as st
from rocketmq import ClientConfiguration, Credentials
from rocketmq.v5.util.signature import Signature

import orbitmq.v2.signature as signature
from orbitmq.errors import Code, MQError
from orbitmq.v2.signature import (
    AUTH_ALGORITHM,
    authorization_header,
    date_time_now,
    parse_authorization,
    sign,
    signing_metadata,
    verify,
)

VECTOR_SK, VECTOR_DATE = "mysk", "20240101T000000Z"
VECTOR_HEX, VECTOR_B64 = "8e88fd26f9a84f63fd0446e5162eef5cf1d148ea", "joj9JvmoT2P9BEblFi7vXPHRSOo="
FIXED = datetime(2026, 11, 22, 11, 25, 10)  # naive, as the official client's datetime.now()
text = st.text(st.characters(codec="utf-8"), max_size=40)  # no lone surrogates: secrets are UTF-8 encoded


class _FrozenClock(datetime):
    @classmethod
    def now(cls, tz: object = None) -> datetime:  # type: ignore[override]
        return FIXED


@pytest.fixture
def frozen_official(monkeypatch: pytest.MonkeyPatch) -> None:
    """The official signer reads ``datetime.now()``; pin it so both sides sign the same instant."""
    monkeypatch.setattr(official_signature, "datetime", _FrozenClock)


def official_headers(ak: str, sk: str) -> dict[str, str]:
    config = ClientConfiguration("127.0.0.1:8081", Credentials(ak, sk))
    return {k: v for k, v in Signature.metadata(config, "client-1") if isinstance(v, str)}


def test_protocol_test_vector():
    assert sign(VECTOR_SK, VECTOR_DATE) == VECTOR_HEX
    assert base64.b64encode(bytes.fromhex(VECTOR_HEX)).decode() == VECTOR_B64  # what the reference compares
    assert verify(VECTOR_SK, VECTOR_DATE, VECTOR_HEX)
    assert verify(VECTOR_SK, VECTOR_DATE, VECTOR_HEX.upper())  # hex is case-insensitive
    assert not verify("other", VECTOR_DATE, VECTOR_HEX)
    assert not verify(VECTOR_SK, "20240101T000001Z", VECTOR_HEX)
    assert authorization_header("myak", VECTOR_SK, VECTOR_DATE) == (
        f"MQv2-HMAC-SHA1 Credential=myak, SignedHeaders=x-mq-date-time, Signature={VECTOR_HEX}"
    )


def test_date_time_format():
    assert date_time_now(FIXED) == "20261122T112510Z"
    assert date_time_now(FIXED.replace(tzinfo=UTC)) == "20261122T112510Z"
    # an aware time in another zone is written in UTC, as the "Z" says
    assert date_time_now(FIXED.replace(tzinfo=timezone(timedelta(hours=8)))) == "20261122T032510Z"
    assert len(date_time_now()) == 16 and date_time_now().endswith("Z")


def test_official_client_headers_verify_with_ours():
    headers = official_headers("myak", "mysecret")  # real clock: whatever instant it signs
    parsed = parse_authorization(headers["authorization"])
    assert (parsed.algorithm, parsed.access_key, parsed.signed_headers) == (AUTH_ALGORITHM, "myak", "x-mq-date-time")
    assert verify("mysecret", headers["x-mq-date-time"], parsed.signature_hex)
    assert not verify("not-the-secret", headers["x-mq-date-time"], parsed.signature_hex)


def test_our_metadata_equals_the_official_clients(frozen_official):
    official = official_headers("myak", "mysecret")
    ours = signing_metadata("myak", "mysecret", now=FIXED)
    assert ours == [("x-mq-date-time", official["x-mq-date-time"]), ("authorization", official["authorization"])]
    assert signing_metadata("a", "b", session_token="tok", now=FIXED)[-1] == ("x-mq-session-token", "tok")
    assert len(signing_metadata("a", "b", session_token="", now=FIXED)) == 2


@given(ak=st.text("abcXYZ019-_.@=", max_size=20), sk=text)
def test_any_credentials_sign_as_the_official_client(ak, sk):
    date_time = date_time_now(FIXED)
    assert sign(sk, date_time) == Signature.sign(sk, date_time)
    header = authorization_header(ak, sk, date_time)
    parsed = parse_authorization(header)
    assert parsed.access_key == ak and verify(sk, date_time, parsed.signature_hex)


def test_official_client_without_credentials_sends_an_empty_access_key():
    config = ClientConfiguration("127.0.0.1:8081", Credentials())
    headers = dict((k, v) for k, v in Signature.metadata(config, "c") if isinstance(v, str))
    parsed = parse_authorization(headers["authorization"])
    assert parsed.access_key == "" and verify("", headers["x-mq-date-time"], parsed.signature_hex)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("", "has no key=value items"),
        ("MQv2-HMAC-SHA1", "has no key=value items"),
        ("MQv2-HMAC-SHA1   ", "has no key=value items"),
        ("MQv2-HMAC-SHA1 Credential", "'Credential' is not key=value"),
        ("MQv2-HMAC-SHA1 Credential=ak, , Signature=ab", "'' is not key=value"),
        ("MQv2-HMAC-SHA1 SignedHeaders=x-mq-date-time, Signature=ab", "no Credential item"),
        ("MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time", "no Signature item"),
        ("MQv2-HMAC-SHA1 Credential=ak, Signature=xyz1", "'xyz1' is not hex"),
        ("MQv2-HMAC-SHA1 Credential=ak, Signature=abc", "'abc' is not hex"),  # odd length
    ],
)
def test_malformed_authorization_is_unauthorized(header, message):
    with pytest.raises(MQError, match=message) as err:
        parse_authorization(header)
    assert err.value.code == Code.UNAUTHORIZED


def test_parsing_follows_the_reference_proxy():
    parsed = parse_authorization("MQv2-HMAC-SHA1 Credential=ak/2024/scope,Signature=AB , Extra=ignored,")
    assert parsed.access_key == "ak"  # the user is the Credential before the first "/"
    assert parsed.signature_hex == "AB" and parsed.signed_headers == ""
    assert parse_authorization("X Credential=a=b, Signature=").access_key == "a=b"  # split at the first "="
    assert parse_authorization("X Credential=a, Credential=b, Signature=").access_key == "b"  # last wins
    long_junk = "MQv2-HMAC-SHA1 " + "z" * 10_000
    with pytest.raises(MQError) as err:
        parse_authorization(long_junk)
    assert len(err.value.message) < 200  # a hostile header is not echoed whole


def test_verify_rejects_junk_without_raising():
    for junk in ("", "zz", "abc", "é" * 40, VECTOR_HEX + "00", " "):
        assert verify(VECTOR_SK, VECTOR_DATE, junk) is False
    assert verify(VECTOR_SK, VECTOR_DATE, f"  {VECTOR_HEX}\n")  # surrounding whitespace is not the signature


def test_verify_compares_in_constant_time(monkeypatch: pytest.MonkeyPatch):
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(signature.hmac, "compare_digest", spy)
    assert verify(VECTOR_SK, VECTOR_DATE, VECTOR_HEX)
    assert not verify(VECTOR_SK, VECTOR_DATE, "00" * 20)
    assert calls == [(bytes.fromhex(VECTOR_HEX), bytes.fromhex(VECTOR_HEX)), (bytes.fromhex(VECTOR_HEX), bytes(20))]
