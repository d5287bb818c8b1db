"""The v2 request signature (``MQv2-HMAC-SHA1``): signing for the oms client, parsing and checking for the broker.

The official client signs only the ``x-mq-date-time`` header with HMAC-SHA1 keyed by the secret key
(protocol-v2.md §2); the hex digest travels in the ``authorization`` header.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import UTC, datetime

from common.errors import Code, MQError
from common.v2.metadata import AUTHORIZATION, DATE_TIME, SESSION_TOKEN

AUTH_ALGORITHM = "MQv2-HMAC-SHA1"
SIGNED_HEADERS = DATE_TIME
DATE_TIME_FORMAT = "%Y%m%dT%H%M%SZ"


def date_time_now(now: datetime | None = None) -> str:
    return (now or datetime.now(UTC)).strftime(DATE_TIME_FORMAT)


def sign(secret_key: str, date_time: str) -> str:
    """Lower-case hex of HMAC-SHA1(key = secret key, message = the date-time header value)."""
    return hmac.new(secret_key.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1).hexdigest()


def authorization_header(access_key: str, secret_key: str, date_time: str) -> str:
    return (
        f"{AUTH_ALGORITHM} Credential={access_key}, SignedHeaders={SIGNED_HEADERS}, "
        f"Signature={sign(secret_key, date_time)}"
    )


def signing_metadata(
    access_key: str, secret_key: str, session_token: str | None = None, now: datetime | None = None
) -> list[tuple[str, str]]:
    """The headers a signed call carries: ``x-mq-date-time``, ``authorization`` (and the session token)."""
    date_time = date_time_now(now)
    headers = [(DATE_TIME, date_time), (AUTHORIZATION, authorization_header(access_key, secret_key, date_time))]
    if session_token:
        headers.append((SESSION_TOKEN, session_token))
    return headers


@dataclass(frozen=True)
class ParsedAuthorization:
    algorithm: str
    access_key: str
    signed_headers: str
    signature_hex: str


def parse_authorization(header: str) -> ParsedAuthorization:
    """Parse as the reference proxy does: algorithm, then ``key=value`` items separated by commas."""
    algorithm, sep, rest = header.strip().partition(" ")
    if not sep or not rest.strip():
        raise MQError(Code.UNAUTHORIZED, f"authorization header {header[:64]!r} has no credential items")
    items: dict[str, str] = {}
    for item in rest.split(","):
        key, eq, value = item.strip().partition("=")
        if not eq:
            raise MQError(Code.UNAUTHORIZED, f"authorization item {item.strip()[:64]!r} is not key=value")
        items[key.strip()] = value.strip()
    if "Credential" not in items or "Signature" not in items:
        raise MQError(Code.UNAUTHORIZED, "authorization header needs Credential and Signature")
    access_key = items["Credential"].split("/", 1)[0]
    return ParsedAuthorization(algorithm, access_key, items.get("SignedHeaders", ""), items["Signature"])


def verify(secret_key: str, date_time: str, signature_hex: str) -> bool:
    """Constant-time comparison; the hex may be in either case."""
    return hmac.compare_digest(sign(secret_key, date_time), signature_hex.strip().lower())
