"""The cluster credentials of name-server writes: parsing RocketMQ's JSON value, signing, and every refusal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from orbitmq.cluster_auth import MAX_CLOCK_SKEW_S, ClusterCredentials
from orbitmq.config import ConfigError
from orbitmq.errors import Code, MQError

GOOD = ClusterCredentials("cluster", "long-secret")
NOW = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)


def test_parse_rocketmq_json():
    assert ClusterCredentials.parse('{"accessKey": " cluster ", "secretKey": "long-secret"}') == GOOD
    assert ClusterCredentials.parse("  ") is None
    assert "long-secret" not in repr(GOOD)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("cluster:secret", "not JSON"),
        ('["cluster"]', "JSON object"),
        ('{"secretKey": "long-secret"}', "accessKey"),
        ('{"accessKey": "a", "secretKey": "short"}', "at least 7"),
        ('{"accessKey": "a", "secretKey": 12345678}', "secretKey"),
    ],
)
def test_bad_values_name_the_key(text, words):
    with pytest.raises(ConfigError, match=words) as err:
        ClusterCredentials.parse(text)
    assert "innerClientAuthenticationCredentials" in str(err.value)


def _refusal(headers: dict[str, str]) -> str:
    with pytest.raises(MQError) as err:
        GOOD.check(headers, now=NOW)
    assert err.value.code == Code.UNAUTHORIZED
    return err.value.message


def test_signed_now_passes_and_every_forgery_is_refused():
    GOOD.check(dict(GOOD.metadata(now=NOW)), now=NOW)
    GOOD.check(dict(GOOD.metadata(now=NOW - timedelta(seconds=MAX_CLOCK_SKEW_S - 5))), now=NOW)
    assert "no credentials" in _refusal({})
    assert "not the cluster's" in _refusal(dict(ClusterCredentials("other", "long-secret").metadata(now=NOW)))
    assert "signature check failed" in _refusal(dict(ClusterCredentials("cluster", "guessed-it").metadata(now=NOW)))
    assert "from the name server's clock" in _refusal(dict(GOOD.metadata(now=NOW - timedelta(hours=1))))
    assert "from the name server's clock" in _refusal(dict(GOOD.metadata(now=NOW + timedelta(hours=1))))
    signed = dict(GOOD.metadata(now=NOW))
    signed["x-mq-date-time"] = "20261124T120001Z"  # the signature covers the date: changing it breaks it
    assert "signature check failed" in _refusal(signed)
    assert "MQv2-HMAC-SHA1" in _refusal({"authorization": signed["authorization"].replace("MQv2-HMAC-SHA1", "X")})
