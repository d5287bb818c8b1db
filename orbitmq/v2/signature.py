"""The v2 request signature (``MQv2-HMAC-SHA1``): signing for the oms client, parsing and checking for the broker.

The official client signs only the ``x-mq-date-time`` value with HMAC-SHA1 keyed by the secret key (protocol-v2.md §2).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from orbitmq.errors import Code, MQError
from orbitmq.v2.metadata import AUTHORIZATION, DATE_TIME, SESSION_TOKEN

AUTH_ALGORITHM = "MQv2-HMAC-SHA1"
SIGNED_HEADERS = DATE_TIME  # the only header the official clients sign
DATE_TIME_FORMAT = "%Y%m%dT%H%M%SZ"
CREDENTIAL = "Credential"
SIGNED_HEADERS_ITEM = "SignedHeaders"
SIGNATURE = "Signature"

_HEX = re.compile(r"(?:[0-9a-fA-F]{2})*")
_SHOWN = 64  # a hostile header can be long; messages quote only its start


def _shown(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


def date_time_now(now: datetime | None = None) -> str:
    """``now`` (default: the current UTC time) as the client writes ``x-mq-date-time``, e.g. ``20261122T112510Z``.

    An aware datetime is converted to UTC; a naive one is written as is, as the Python client does with local time.
    """
    moment = datetime.now(UTC) if now is None else now
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime(DATE_TIME_FORMAT)


def _digest(secret_key: str, date_time: str) -> bytes:
    return hmac.new(secret_key.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1).digest()


def sign(secret_key: str, date_time: str) -> str:
    """Lower-case hex of HMAC-SHA1(key = secret key, message = the date-time header value), both UTF-8."""
    return _digest(secret_key, date_time).hex()


def authorization_header(access_key: str, secret_key: str, date_time: str) -> str:
    """The ``authorization`` value, byte for byte as the official client builds it."""
    return (
        f"{AUTH_ALGORITHM} {CREDENTIAL}={access_key}, {SIGNED_HEADERS_ITEM}={SIGNED_HEADERS}, "
        f"{SIGNATURE}={sign(secret_key, date_time)}"
    )


def signing_metadata(
    access_key: str, secret_key: str, session_token: str | None = None, now: datetime | None = None
) -> list[tuple[str, str]]:
    """The headers a signed call carries: ``x-mq-date-time``, ``authorization`` (and the session token if any)."""
    date_time = date_time_now(now)
    headers = [(DATE_TIME, date_time), (AUTHORIZATION, authorization_header(access_key, secret_key, date_time))]
    if session_token:
        headers.append((SESSION_TOKEN, session_token))
    return headers


@dataclass(frozen=True)
class ParsedAuthorization:
    """The parts of an ``authorization`` header; ``access_key`` is the Credential up to its first ``/``."""

    algorithm: str
    access_key: str
    signed_headers: str
    signature_hex: str


def parse_authorization(header: str) -> ParsedAuthorization:
    """Parse as the reference proxy does; raise UNAUTHORIZED naming what is wrong with a malformed header.

    Algorithm up to the first space, then items split on ``,``, trimmed, split at the first ``=``. Unknown items
    are ignored and a repeated item keeps its last value (as the reference). The algorithm is not checked here.
    """
    algorithm, sep, rest = header.strip().partition(" ")
    if not sep or not rest.strip():
        raise MQError(Code.UNAUTHORIZED, f"authorization header {_shown(header)} has no key=value items")
    items: dict[str, str] = {}
    raw_items = rest.split(",")
    while raw_items and not raw_items[-1].strip():
        raw_items.pop()  # Java's String.split drops trailing empty items; do the same
    for raw in raw_items:
        key, eq, value = raw.strip().partition("=")
        if not eq:
            raise MQError(Code.UNAUTHORIZED, f"authorization item {_shown(raw.strip())} is not key=value")
        items[key] = value
    if CREDENTIAL not in items:
        raise MQError(Code.UNAUTHORIZED, f"authorization header has no {CREDENTIAL} item")
    if SIGNATURE not in items:
        raise MQError(Code.UNAUTHORIZED, f"authorization header has no {SIGNATURE} item")
    signature = items[SIGNATURE]
    if not _HEX.fullmatch(signature):
        raise MQError(Code.UNAUTHORIZED, f"authorization {SIGNATURE} {_shown(signature)} is not hex")
    access_key = items[CREDENTIAL].split("/", 1)[0]  # the reference takes the user before any scope
    return ParsedAuthorization(algorithm, access_key, items.get(SIGNED_HEADERS_ITEM, ""), signature)


def verify(secret_key: str, date_time: str, signature_hex: str) -> bool:
    """Whether ``signature_hex`` (either case) signs ``date_time`` with ``secret_key``; compared in constant time."""
    provided = signature_hex.strip()
    if not _HEX.fullmatch(provided):
        return False
    # Compare the raw digests: compare_digest refuses non-ASCII str, and bytes make hex case irrelevant.
    return hmac.compare_digest(_digest(secret_key, date_time), bytes.fromhex(provided))
