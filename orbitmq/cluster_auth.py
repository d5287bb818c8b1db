"""The cluster credentials brokers share with the name servers (RocketMQ 5's ``innerClientAuthenticationCredentials``).

Brokers sign their name-server calls with them (the v2 ``MQv2-HMAC-SHA1`` scheme); a name server with ACL on
refuses every write RPC that does not carry a valid, recent signature of these credentials.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from orbitmq.config import ConfigError
from orbitmq.errors import Code, MQError
from orbitmq.v2.metadata import AUTHORIZATION, DATE_TIME
from orbitmq.v2.signature import (
    AUTH_ALGORITHM,
    DATE_TIME_FORMAT,
    parse_authorization,
    signing_metadata,
    verify,
)

CONFIG_KEY = "innerClientAuthenticationCredentials"
# RocketMQ's plain ACL refuses a secretKey of 6 characters or fewer; the cluster secret is held to the same floor.
SECRET_KEY_MIN_LENGTH = 7
# A signature older (or newer) than this is refused, so a captured registration cannot be replayed for long.
MAX_CLOCK_SKEW_S = 900


@dataclass(frozen=True)
class ClusterCredentials:
    """One access key / secret key pair; ``metadata()`` signs a call, ``check(headers)`` verifies one."""

    access_key: str
    secret_key: str = field(repr=False)  # never in a log line

    @classmethod
    def parse(cls, text: str) -> ClusterCredentials | None:
        """``{"accessKey": "...", "secretKey": "..."}`` as RocketMQ writes the key; blank means none (None)."""
        if not text.strip():
            return None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f'{CONFIG_KEY} is not JSON {{"accessKey": ..., "secretKey": ...}}: {exc}') from exc
        if not isinstance(data, dict):
            raise ConfigError(f'{CONFIG_KEY} must be a JSON object {{"accessKey": ..., "secretKey": ...}}')
        access_key, secret_key = data.get("accessKey"), data.get("secretKey")
        if not isinstance(access_key, str) or not access_key.strip():
            raise ConfigError(f"{CONFIG_KEY}: accessKey is missing or blank")
        if not isinstance(secret_key, str) or len(secret_key) < SECRET_KEY_MIN_LENGTH:
            raise ConfigError(f"{CONFIG_KEY}: secretKey needs at least {SECRET_KEY_MIN_LENGTH} characters")
        return cls(access_key.strip(), secret_key)

    def metadata(self, now: datetime | None = None) -> list[tuple[str, str]]:
        """The headers that authenticate one call: ``x-mq-date-time`` and its ``authorization``."""
        return signing_metadata(self.access_key, self.secret_key, now=now)

    def check(self, headers: Mapping[str, str], now: datetime | None = None) -> None:
        """Raise UNAUTHORIZED naming what is wrong unless ``headers`` (lower-case) carry a valid recent signature."""
        header = headers.get(AUTHORIZATION, "")
        if not header:
            raise MQError(
                Code.UNAUTHORIZED,
                f"no credentials: the name server has ACL on and write RPCs need the cluster's {CONFIG_KEY}",
            )
        date_time = headers.get(DATE_TIME, "")
        parsed = parse_authorization(header)
        if parsed.algorithm != AUTH_ALGORITHM:
            raise MQError(Code.UNAUTHORIZED, f"authorization algorithm is not {AUTH_ALGORITHM}")
        if parsed.access_key != self.access_key:
            raise MQError(Code.UNAUTHORIZED, f"access key {parsed.access_key[:64]!r} is not the cluster's access key")
        if not verify(self.secret_key, date_time, parsed.signature_hex):
            raise MQError(Code.UNAUTHORIZED, f"signature check failed for access key {self.access_key!r}")
        try:
            signed_at = datetime.strptime(date_time, DATE_TIME_FORMAT).replace(tzinfo=UTC)
        except ValueError as exc:
            raise MQError(Code.UNAUTHORIZED, f"{DATE_TIME} {date_time[:64]!r} is not {DATE_TIME_FORMAT}") from exc
        skew = abs(((now or datetime.now(UTC)) - signed_at).total_seconds())
        if skew > MAX_CLOCK_SKEW_S:
            raise MQError(
                Code.UNAUTHORIZED,
                f"{DATE_TIME} {date_time!r} is {skew:.0f} s from the name server's clock (limit {MAX_CLOCK_SKEW_S} s)",
            )
