"""Plain ACL: file validation, white addresses, signatures, permissions with RocketMQ's rules, reloading."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from common.errors import Code, MQError
from common.v2.signature import signing_metadata
from plugins.acl import AclConfig, AclConfigError, Action, PlainAccessValidator, ResourceKind
from plugins.acl.remote_address import AddressPatternError, RemoteAddressPattern

ACL = {
    "globalWhiteRemoteAddresses": ["10.10.*"],
    "accounts": [
        {"accessKey": "admin", "secretKey": "admin-secret", "admin": True},
        {
            "accessKey": "app",
            "secretKey": "app-secret",
            "defaultTopicPerm": "DENY",
            "defaultGroupPerm": "SUB",
            "topicPerms": ["orders=PUB|SUB", "audit=PUB", "blocked=DENY"],
            "groupPerms": ["billing=DENY"],
        },
        {"accessKey": "lan", "secretKey": "lan-secret", "whiteRemoteAddress": "192.168.1.1,2,3"},
    ],
}


def headers(ak: str, sk: str) -> dict[str, str]:
    return dict(signing_metadata(ak, sk))


def code_of(fn) -> Code:
    with pytest.raises(MQError) as err:
        fn()
    return err.value.code


@pytest.fixture
def validator() -> PlainAccessValidator:
    return PlainAccessValidator(AclConfig.parse(ACL))


def test_authentication_paths(validator):
    ctx = validator.authenticate(headers("app", "app-secret"), "127.0.0.1")
    assert ctx.access_key == "app" and not ctx.trusted_address
    assert validator.authenticate({}, "10.10.3.4").global_white  # no credentials needed there
    assert code_of(lambda: validator.authenticate({}, "127.0.0.1")) == Code.UNAUTHORIZED
    assert code_of(lambda: validator.authenticate(headers("app", "wrong-secret"), "127.0.0.1")) == Code.UNAUTHORIZED
    with pytest.raises(MQError, match="'ghost' is not known"):
        validator.authenticate(headers("ghost", "whatever"), "127.0.0.1")
    assert code_of(lambda: validator.authenticate(headers("", "x"), "127.0.0.1")) == Code.UNAUTHORIZED
    no_date = {"authorization": headers("app", "app-secret")["authorization"]}
    with pytest.raises(MQError, match="x-mq-date-time"):
        validator.authenticate(no_date, "127.0.0.1")
    # The account's white address is trusted: no signature, no permission check (RocketMQ 4).
    trusted = validator.authenticate(headers("lan", "not-the-secret"), "192.168.1.2")
    assert trusted.trusted_address
    validator.authorize(trusted, ResourceKind.TOPIC, "anything", Action.PUB)
    assert code_of(lambda: validator.authenticate(headers("lan", "bad-secret"), "192.168.1.4")) == Code.UNAUTHORIZED


def test_permissions_follow_rocketmq(validator):
    app = validator.authenticate(headers("app", "app-secret"), "127.0.0.1")
    validator.authorize(app, ResourceKind.TOPIC, "orders", Action.PUB)
    validator.authorize(app, ResourceKind.TOPIC, "orders", Action.SUB)
    validator.authorize(app, ResourceKind.TOPIC, "audit", Action.PUB_SUB)  # either suffices for a route query
    with pytest.raises(MQError, match="no SUB permission on topic 'audit'") as err:
        validator.authorize(app, ResourceKind.TOPIC, "audit", Action.SUB)
    assert err.value.code == Code.FORBIDDEN
    assert code_of(lambda: validator.authorize(app, ResourceKind.TOPIC, "blocked", Action.PUB_SUB)) == Code.FORBIDDEN
    assert code_of(lambda: validator.authorize(app, ResourceKind.TOPIC, "other", Action.PUB)) == Code.FORBIDDEN
    validator.authorize(app, ResourceKind.GROUP, "any-group", Action.SUB)  # defaultGroupPerm SUB
    assert code_of(lambda: validator.authorize(app, ResourceKind.GROUP, "billing", Action.SUB)) == Code.FORBIDDEN
    # Retry topics are the group's resource.
    assert code_of(lambda: validator.authorize(app, ResourceKind.TOPIC, "%RETRY%billing", Action.SUB)) == Code.FORBIDDEN
    validator.authorize(app, ResourceKind.TOPIC, "%RETRY%other", Action.SUB)
    assert code_of(lambda: validator.authorize(app, ResourceKind.TOPIC, "x", Action.ADMIN)) == Code.FORBIDDEN
    admin = validator.authenticate(headers("admin", "admin-secret"), "127.0.0.1")
    validator.authorize(admin, ResourceKind.TOPIC, "x", Action.ADMIN)
    validator.authorize(admin, ResourceKind.TOPIC, "anything", Action.PUB)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"accounts": [{"accessKey": "a", "secretKey": "short"}]}, "at least 6"),
        ({"accounts": [{"secretKey": "long-enough"}]}, "accessKey is missing"),
        ({"accounts": [{"accessKey": "a", "secretKey": "long-enough", "topicPerms": ["t=WRITE"]}]}, "'WRITE'"),
        ({"accounts": [{"accessKey": "a", "secretKey": "long-enough"}] * 2}, "appears twice"),
        ({"accounts": [{"accessKey": "a", "secretKey": "long-enough", "whiteRemoteAddress": "1.2.x.4"}]}, "'x'"),
        ({"accounts": [{"accessKey": "a", "secretKey": "long-enough", "groupPerms": ["nogroup"]}]}, "name=PERM"),
    ],
)
def test_bad_files_name_the_account_and_field(data, message):
    with pytest.raises(AclConfigError, match=message):
        AclConfig.parse(data)


def test_address_patterns():
    assert RemoteAddressPattern.parse("*").matches("8.8.8.8")
    assert not RemoteAddressPattern.parse("").matches("127.0.0.1")
    assert RemoteAddressPattern.parse("192.168.*.1-100").matches("192.168.7.100")
    assert not RemoteAddressPattern.parse("192.168.*.1-100").matches("192.168.7.101")
    assert RemoteAddressPattern.parse("192.168.*").matches("192.168.200.3")
    assert RemoteAddressPattern.parse("127.0.0.1").matches("127.0.0.1")
    assert not RemoteAddressPattern.parse("127.0.0.1").matches("127.0.0.2")
    assert not RemoteAddressPattern.parse("127.0.0.*").matches("::1")
    with pytest.raises(AddressPatternError):
        RemoteAddressPattern.parse("300.1.1.1")


@given(st.lists(st.integers(0, 255), min_size=4, max_size=4), st.integers(0, 255), st.integers(0, 255))
def test_range_segment_matches_exactly_its_range(ip, lo, hi):
    lo, hi = min(lo, hi), max(lo, hi)
    pattern = RemoteAddressPattern.parse(f"{ip[0]}.{ip[1]}.{ip[2]}.{lo}-{hi}")
    assert pattern.matches(".".join(map(str, ip))) == (lo <= ip[3] <= hi)


def test_file_reload_and_broken_file_keeps_the_last_good_one(tmp_path: Path):
    path = tmp_path / "plain_acl.yml"
    path.write_text(yaml.safe_dump(ACL))
    v = PlainAccessValidator.from_file(path)
    app = v.authenticate(headers("app", "app-secret"), "127.0.0.1")
    assert code_of(lambda: v.authorize(app, ResourceKind.TOPIC, "later", Action.PUB)) == Code.FORBIDDEN

    changed = {**ACL, "accounts": [{**ACL["accounts"][1], "topicPerms": ["later=PUB"]}]}
    path.write_text(yaml.safe_dump(changed))
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    deadline = time.monotonic() + 10
    while True:
        app = v.authenticate(headers("app", "app-secret"), "127.0.0.1")
        try:
            v.authorize(app, ResourceKind.TOPIC, "later", Action.PUB)
            break
        except MQError:
            assert time.monotonic() < deadline, "the changed file was not picked up"
            time.sleep(0.2)

    path.write_text("accounts: [ {accessKey: broken")  # not YAML
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 2 * 10**9))
    time.sleep(1.2)
    app = v.authenticate(headers("app", "app-secret"), "127.0.0.1")  # still the last good config
    v.authorize(app, ResourceKind.TOPIC, "later", Action.PUB)
