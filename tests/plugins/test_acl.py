"""Plain ACL: the file and its validation, white-address patterns, every refusal path of authentication and
authorization with RocketMQ 4's rules, and reloading (including a broken file keeping the last good one)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rocketmq import ClientConfiguration, Credentials
from rocketmq.v5.util.signature import Signature

from orbitmq.errors import Code, MQError
from orbitmq.v2.signature import signing_metadata
from plugins.acl import (
    AccessContext,
    AclConfig,
    AclConfigError,
    Action,
    AddressPatternError,
    Perm,
    PlainAccessValidator,
    RemoteAddressPattern,
    ResourceKind,
)
from tests.waiting import wait_until

TOPIC, GROUP = ResourceKind.TOPIC, ResourceKind.GROUP
PUB, SUB, ANY, ADMIN = Action.PUB, Action.SUB, Action.PUB_SUB, Action.ADMIN

ACL_YAML = """
globalWhiteRemoteAddresses:
  - 10.10.*.*
  - 172.16.0.1,2,3
accounts:
  - accessKey: rootAK
    secretKey: rootSecret
    admin: true
  - accessKey: bossAK
    secretKey: bossSecret
    admin: true
    defaultTopicPerm: DENY
    topicPerms:
      - payroll=PUB
  - accessKey: appAK
    secretKey: appSecret
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - orders=PUB|SUB
      - audit=PUB
      - feed=SUB|PUB
      - reports=SUB
      - blocked=DENY
      - "%DLQ%special=SUB"
    groupPerms:
      - billing=DENY
      - special=DENY
      - pubgroup=PUB
  - accessKey: lanAK
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
  - accessKey: nopermsAK
    secretKey: "0123456"
"""


def headers(ak: str, sk: str) -> dict[str, str]:
    return dict(signing_metadata(ak, sk))


def refusal(fn: Callable[[], object], code: Code, *words: str) -> str:
    """Run ``fn``, expect an MQError with ``code`` whose message contains every word; return the message."""
    with pytest.raises(MQError) as err:
        fn()
    assert err.value.code == code, err.value
    for word in words:
        assert word in err.value.message, (word, err.value.message)
    return err.value.message


@pytest.fixture
def validator() -> PlainAccessValidator:
    return PlainAccessValidator(AclConfig.from_yaml(ACL_YAML))


def login(validator: PlainAccessValidator, ak: str, sk: str, ip: str = "127.0.0.1") -> AccessContext:
    return validator.authenticate(headers(ak, sk), ip)


# ---------------------------------------------------------------- the file


def test_the_file_loads_with_rocketmq_defaults():
    config = AclConfig.from_yaml(ACL_YAML)
    assert set(config.accounts) == {"rootAK", "bossAK", "appAK", "lanAK", "nopermsAK"}
    app = config.accounts["appAK"]
    assert app.topic_perms["orders"] == Perm.PUB | Perm.SUB == app.topic_perms["feed"]
    assert app.group_perms["billing"] == Perm.DENY and app.default_group_perm == Perm.SUB
    assert not app.admin and not app.white_remote_address.matches("127.0.0.1")
    noperms = config.accounts["nopermsAK"]
    assert noperms.default_topic_perm == Perm.DENY == noperms.default_group_perm  # absent means DENY
    # numbers stay as typed: RocketMQ's own sample has "secretKey: 12345678"; 0123456 is not octal 42798
    assert config.accounts["lanAK"].secret_key == "12345678"
    assert (
        AclConfig.from_yaml("accounts:\n  - {accessKey: k, secretKey: 0123456}").accounts["k"].secret_key == "0123456"
    )
    assert "Secret" not in repr(app)  # the secret never reaches a log line
    assert AclConfig.from_yaml("accounts: []").accounts == {}  # no accounts, said on purpose
    for empty in ("", "  \n", "# only a comment\n", "---\n"):  # an empty file is an error, not "no accounts"
        with pytest.raises(AclConfigError, match="the file is empty"):
            AclConfig.from_yaml(empty, "plain_acl.yml")
    assert len(config.global_white_remote_addresses) == 2


ONE = "accounts:\n  - {accessKey: a, secretKey: long-enough, "  # one account; the test adds fields and the "}"


@pytest.mark.parametrize(
    ("yaml_text", "words"),
    [
        ("accounts:\n  - {accessKey: a, secretKey: '123456'}", ("accounts[0] (a)", "secretKey", "more than 6")),
        ("accounts:\n  - {accessKey: a}", ("accounts[0] (a)", "secretKey is missing")),
        ("accounts:\n  - {secretKey: long-enough}", ("accounts[0]", "accessKey is missing")),
        (ONE + "topicPerms: [t=WRITE]}", ("(a)", "topicPerms[0]", "'WRITE'")),
        (ONE + "topicPerms: [t=pub]}", ("(a)", "'pub'")),
        (ONE + "defaultTopicPerm: ALL}", ("(a)", "defaultTopicPerm")),
        (ONE + "defaultGroupPerm: RW}", ("(a)", "defaultGroupPerm")),
        (ONE + "groupPerms: [g]}", ("(a)", "groupPerms[0]", "name=PERM")),
        (ONE + "groupPerms: g=SUB}", ("(a)", "groupPerms", "list")),
        (ONE + "admin: maybe}", ("(a)", "admin")),
        (ONE + "whiteRemoteAddress: 1.2.x.4}", ("(a)", "whiteRemote", "'x'")),
        (
            "accounts:\n  - {accessKey: a, secretKey: long-enough}\n  - {accessKey: a, secretKey: other-secret}",
            ("accounts[1] (a)", "accessKey 'a' is already defined"),
        ),
        ("globalWhiteRemoteAddresses: [300.1.1.1]", ("globalWhiteRemoteAddresses[0]", "300")),
        ("accounts: {accessKey: a}", ("accounts", "must be a list")),
        ("accounts: [just-a-string]", ("accounts[0]", "mapping")),
        ("- a\n- b", ("top level",)),
        ("accounts: [ {accessKey: broken", ("not valid YAML",)),
        ("accounts:\n  - {accessKey: yes, secretKey: long-enough}", ("accessKey must be a string",)),
    ],
)
def test_bad_files_name_the_account_and_the_field(yaml_text, words):
    with pytest.raises(AclConfigError) as err:
        AclConfig.from_yaml(yaml_text, "acl.yml")
    assert str(err.value).startswith("acl.yml: ")
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_secret_key_length_follows_rocketmq_and_unknown_keys_are_reported(caplog):
    AclConfig.from_yaml("accounts:\n  - {accessKey: a, secretKey: '1234567'}")  # 7 characters: enough
    with caplog.at_level(logging.WARNING, logger="plugins.acl.config"):
        AclConfig.from_yaml(ONE + "topicPerm: [t=PUB]}")
    assert "'topicPerm'" in caplog.text and "(a)" in caplog.text


def test_an_unreadable_file_is_a_config_error(tmp_path: Path):
    with pytest.raises(AclConfigError, match="cannot read"):
        AclConfig.load(tmp_path / "missing.yml")
    with pytest.raises(AclConfigError, match="cannot read"):
        PlainAccessValidator.from_file(tmp_path / "missing.yml")


# ---------------------------------------------------------------- authentication


def test_a_good_signature_authenticates(validator):
    ctx = login(validator, "appAK", "appSecret")
    assert (ctx.access_key, ctx.global_white, ctx.trusted_address) == ("appAK", False, False)
    assert ctx.account is not None and ctx.account.access_key == "appAK"


def test_the_official_clients_headers_authenticate(validator):
    config = ClientConfiguration("127.0.0.1:8081", Credentials("appAK", "appSecret"))
    metadata = {k: v for k, v in Signature.metadata(config, "client-1") if isinstance(v, str)}
    assert validator.authenticate(metadata, "127.0.0.1").access_key == "appAK"


def test_global_white_addresses_need_no_credentials(validator):
    for ip in ("10.10.3.4", "172.16.0.3", "::ffff:10.10.0.1"):
        ctx = validator.authenticate({}, ip)
        assert ctx.global_white and ctx.access_key == "" and ctx.account is None
        validator.authorize(ctx, TOPIC, "anything", PUB)
        validator.authorize(ctx, TOPIC, "anything", ADMIN)
    # even junk credentials: RocketMQ returns before it looks at them
    assert validator.authenticate({"authorization": "junk"}, "10.10.0.1").global_white
    refusal(lambda: validator.authenticate({}, "172.16.0.4"), Code.UNAUTHORIZED)


def test_every_authentication_refusal(validator):
    good = headers("appAK", "appSecret")
    ip = "127.0.0.1"
    refusal(lambda: validator.authenticate({}, ip), Code.UNAUTHORIZED, "no credentials", "'authorization'")
    refusal(
        lambda: validator.authenticate({"authorization": good["authorization"]}, ip),
        Code.UNAUTHORIZED,
        "'x-mq-date-time' header is missing",
    )
    refusal(
        lambda: validator.authenticate({**good, "authorization": "MQv2-HMAC-SHA1"}, ip),
        Code.UNAUTHORIZED,
        "no key=value items",
    )
    other_algorithm = good["authorization"].replace("MQv2-HMAC-SHA1", "MQv2-HMAC-SHA256")
    refusal(
        lambda: validator.authenticate({**good, "authorization": other_algorithm}, ip),
        Code.UNAUTHORIZED,
        "'MQv2-HMAC-SHA256' is not MQv2-HMAC-SHA1",
    )
    refusal(lambda: login(validator, "", "x"), Code.UNAUTHORIZED, "access key is empty")
    refusal(lambda: login(validator, "ghost", "whatever"), Code.UNAUTHORIZED, "access key 'ghost' is not known")
    message = refusal(
        lambda: login(validator, "appAK", "wrong-secret"), Code.UNAUTHORIZED, "signature check failed", "'appAK'"
    )
    assert "appSecret" not in message and "wrong-secret" not in message
    stale = {**good, "x-mq-date-time": "20000101T000000Z"}  # signed another instant
    refusal(lambda: validator.authenticate(stale, ip), Code.UNAUTHORIZED, "signature check failed")


def test_the_account_white_address_is_trusted_as_in_rocketmq(validator):
    # matching whiteRemoteAddress: no signature check, no permission check (RocketMQ 4 validate, step 2)
    trusted = login(validator, "lanAK", "not-the-secret", "192.168.1.77")
    assert trusted.trusted_address and trusted.access_key == "lanAK"
    validator.authorize(trusted, TOPIC, "anything", PUB)
    # the access key must still be known, and the date present
    refusal(lambda: login(validator, "ghost", "x", "192.168.1.77"), Code.UNAUTHORIZED, "'ghost' is not known")
    no_date = {"authorization": headers("lanAK", "x")["authorization"]}
    refusal(lambda: validator.authenticate(no_date, "192.168.1.77"), Code.UNAUTHORIZED, "x-mq-date-time")
    # elsewhere the list grants nothing: the caller must sign, and then permissions apply
    refusal(lambda: login(validator, "lanAK", "not-the-secret", "192.168.2.77"), Code.UNAUTHORIZED, "signature")
    signed = login(validator, "lanAK", "12345678", "192.168.2.77")
    assert not signed.trusted_address
    refusal(lambda: validator.authorize(signed, TOPIC, "anything", PUB), Code.FORBIDDEN, "'lanAK'")


# ---------------------------------------------------------------- authorization


@pytest.mark.parametrize(
    ("kind", "resource", "action", "allowed"),
    [
        (TOPIC, "orders", PUB, True),  # PUB|SUB grants both
        (TOPIC, "orders", SUB, True),
        (TOPIC, "feed", PUB, True),  # SUB|PUB too
        (TOPIC, "audit", PUB, True),
        (TOPIC, "audit", SUB, False),
        (TOPIC, "audit", ANY, True),  # a route query needs either
        (TOPIC, "reports", ANY, True),
        (TOPIC, "blocked", ANY, False),  # DENY refuses everything
        (TOPIC, "blocked", PUB, False),
        (TOPIC, "unlisted", PUB, False),  # defaultTopicPerm DENY
        (TOPIC, "unlisted", ANY, False),
        (GROUP, "unlisted-group", SUB, True),  # defaultGroupPerm SUB
        (GROUP, "unlisted-group", PUB, False),
        (GROUP, "billing", SUB, False),  # explicit entry wins over the default
        (GROUP, "pubgroup", SUB, False),
        (TOPIC, "%RETRY%unlisted-group", SUB, True),  # retry topics are the group's resource
        (TOPIC, "%RETRY%unlisted-group", PUB, True),  # sending back needs SUB on the group (RocketMQ 4)
        (TOPIC, "%RETRY%billing", SUB, False),
        (TOPIC, "%RETRY%billing", PUB, False),
        (TOPIC, "%RETRY%pubgroup", PUB, False),  # a group's PUB does not let it send back
        (TOPIC, "%DLQ%unlisted-group", SUB, True),  # dead letters too
        (TOPIC, "%DLQ%billing", SUB, False),
        (TOPIC, "%DLQ%special", SUB, True),  # an explicit topicPerms entry still wins over the group's DENY
        (TOPIC, "%RETRY%", SUB, False),  # no group name: an ordinary (unlisted) topic
        (TOPIC, "RMQ_SYS_TRACE_TOPIC", PUB, True),  # trace data may always be published
        (TOPIC, "RMQ_SYS_TRACE_TOPIC", SUB, False),
        (TOPIC, "orders", ADMIN, False),
        (GROUP, "unlisted-group", ADMIN, False),
    ],
)
def test_permissions_follow_rocketmq(validator, kind, resource, action, allowed):
    app = login(validator, "appAK", "appSecret")
    if allowed:
        validator.authorize(app, kind, resource, action)
    else:
        refusal(lambda: validator.authorize(app, kind, resource, action), Code.FORBIDDEN, "'appAK'")


def test_forbidden_messages_name_account_kind_resource_and_permission(validator):
    app = login(validator, "appAK", "appSecret")
    refusal(
        lambda: validator.authorize(app, TOPIC, "audit", SUB),
        Code.FORBIDDEN,
        "account 'appAK' has no SUB permission on topic 'audit'",
        "topicPerms entry is PUB",
    )
    refusal(lambda: validator.authorize(app, TOPIC, "unlisted", ANY), Code.FORBIDDEN, "PUB or SUB", "defaultTopicPerm")
    refusal(
        lambda: validator.authorize(app, TOPIC, "%RETRY%billing", PUB),
        Code.FORBIDDEN,
        "no SUB permission on group 'billing' (through topic '%RETRY%billing')",
        "groupPerms entry is DENY",
    )
    refusal(
        lambda: validator.authorize(app, TOPIC, "newTopic", ADMIN),
        Code.FORBIDDEN,
        "account 'appAK' has no ADMIN permission on topic 'newTopic'",
        "admin: true",
    )
    refusal(lambda: validator.authorize(AccessContext("someone"), GROUP, "g", SUB), Code.FORBIDDEN, "not authenticated")


def test_admins(validator):
    root = login(validator, "rootAK", "rootSecret")  # admin with no resource perms: everything
    for kind, resource, action in [(TOPIC, "x", ADMIN), (TOPIC, "x", PUB), (GROUP, "g", SUB), (TOPIC, "%DLQ%g", SUB)]:
        validator.authorize(root, kind, resource, action)
    boss = login(validator, "bossAK", "bossSecret")  # admin listing perms: RocketMQ checks those
    validator.authorize(boss, TOPIC, "anyTopic", ADMIN)
    validator.authorize(boss, TOPIC, "payroll", PUB)
    refusal(lambda: validator.authorize(boss, TOPIC, "payroll", SUB), Code.FORBIDDEN, "'bossAK'", "payroll")
    refusal(lambda: validator.authorize(boss, TOPIC, "other", PUB), Code.FORBIDDEN, "defaultTopicPerm is DENY")


# ---------------------------------------------------------------- white-address patterns


@pytest.mark.parametrize(
    ("pattern", "inside", "outside"),
    [
        ("*", ["8.8.8.8", "::1", "not-an-ip"], []),
        ("*.*.*.*", ["1.2.3.4"], []),
        ("", [], ["127.0.0.1", "::1"]),
        ("127.0.0.1", ["127.0.0.1", "::ffff:127.0.0.1", "[127.0.0.1]"], ["127.0.0.2", "::1", "", "localhost"]),
        ("192.168.0.*", ["192.168.0.0", "192.168.0.255"], ["192.168.1.1"]),
        ("192.168.*", ["192.168.200.3"], ["192.169.0.1"]),
        ("192.168.*.1-100", ["192.168.7.1", "192.168.7.100"], ["192.168.7.101", "192.168.7.0"]),
        ("10.1-3.*.*", ["10.2.9.9"], ["10.4.0.0"]),
        ("192.168.1.1,2,3", ["192.168.1.1", "192.168.1.3"], ["192.168.1.4"]),
        ("192.168.1.1,192.168.2.9", ["192.168.2.9"], ["192.168.2.1", "192.168.1.9"]),
        ("192.168.1.1, 192.168.2.9, 10", ["192.168.2.10"], ["192.168.1.10"]),
        ("192.168.1.{1,2,3}", ["192.168.1.2"], ["192.168.1.4"]),
        ("2001:db8::1", ["2001:DB8:0:0:0:0:0:1", "[2001:db8::1]", "2001:db8::1%eth0"], ["2001:db8::2", "1.2.3.4"]),
        ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["127.0.0.1"]),
        ("*:*:*:*:*:*:*:*", ["::1", "1.1.1.1"], []),
        ("2001:db8:*", ["2001:db8:1::5"], ["2001:db9::1"]),
        ("2001:db8::a-ff", ["2001:db8::b", "2001:db8::ff"], ["2001:db8::100", "2001:db8::9"]),
        ("2001:db8::1,2,abc", ["2001:db8::abc", "2001:db8::2"], ["2001:db8::3"]),
        ("1050::300c:{1,2}", ["1050::300c:2"], ["1050::300c:3"]),
    ],
)
def test_address_patterns(pattern, inside, outside):
    parsed = RemoteAddressPattern.parse(pattern)
    assert str(parsed) == pattern.strip()
    for ip in inside:
        assert parsed.matches(ip), (pattern, ip)
    for ip in outside:
        assert not parsed.matches(ip), (pattern, ip)


@pytest.mark.parametrize(
    "pattern",
    [
        "300.1.1.1",
        "1.2.3",
        "1.2.3.4.5",
        "1.2.x.4",
        "1.2.3.9-5",
        "1.2.3.-5",
        "1.2.3.+5",
        "1,2",
        "1.2.3.4,",
        "1.2.3.{}",
        "1.2.3{1}",
        "2001::db8::1",
        "2001:db8::10000",
        "2001:db8::g-h",
        "1.2.3.٣",
    ],
)
def test_bad_address_patterns(pattern):
    with pytest.raises(AddressPatternError, match="white address"):
        RemoteAddressPattern.parse(pattern)


octet = st.integers(0, 255)
# (pattern text, low, high) of one IPv4 segment: exact, "*" or an a-b range
segment = st.one_of(
    octet.map(lambda v: (str(v), v, v)),
    st.just(("*", 0, 255)),
    st.tuples(octet, octet).map(lambda p: (f"{min(p)}-{max(p)}", min(p), max(p))),
)


@given(st.lists(segment, min_size=4, max_size=4), st.lists(octet, min_size=4, max_size=4))
def test_every_segment_is_checked(segments, ip):
    pattern = RemoteAddressPattern.parse(".".join(text for text, _, _ in segments))
    expected = all(low <= v <= high for (_, low, high), v in zip(segments, ip, strict=True))
    address = ".".join(map(str, ip))
    assert pattern.matches(address) == expected
    assert pattern.matches(f"::ffff:{address}") == expected  # a dual-stack listener's view of the same caller


@given(st.lists(octet, min_size=3, max_size=3), st.sets(octet, min_size=1, max_size=6), octet)
def test_last_segment_lists(prefix, lasts, probe):
    head = ".".join(map(str, prefix))
    choices = sorted(lasts)
    short = RemoteAddressPattern.parse(f"{head}." + ",".join(map(str, choices)))
    braces = RemoteAddressPattern.parse(f"{head}.{{" + ",".join(map(str, choices)) + "}")
    full = RemoteAddressPattern.parse(",".join(f"{head}.{c}" for c in choices))
    for pattern in (short, braces, full):
        assert pattern.matches(f"{head}.{probe}") == (probe in lasts)


@given(st.integers(0, 2**128 - 1))
def test_ipv6_exact_addresses_match_in_any_spelling(value):
    import ipaddress

    address = ipaddress.IPv6Address(value)
    if address.ipv4_mapped is not None:
        return  # those are matched as IPv4
    pattern = RemoteAddressPattern.parse(address.compressed)
    assert pattern.matches(address.exploded) and pattern.matches(address.compressed.upper())
    assert not pattern.matches(str(ipaddress.IPv6Address(value ^ 1)))


# ---------------------------------------------------------------- reloading


def _write(path: Path, text: str, bump_s: int) -> None:
    path.write_text(text)
    stamp = time.time_ns() + bump_s * 10**9  # a distinct mtime even on coarse-timestamp filesystems
    os.utime(path, ns=(stamp, stamp))


def _logged(v: PlainAccessValidator, caplog: pytest.LogCaptureFixture, text: str) -> bool:
    """Touch the validator (reloads happen on access), then look at the log."""
    assert v.config is not None
    return text in caplog.text


def _can(v: PlainAccessValidator, topic: str) -> bool:
    ctx = login(v, "appAK", "appSecret")
    try:
        v.authorize(ctx, TOPIC, topic, PUB)
    except MQError:
        return False
    return True


def test_a_changed_file_takes_effect_and_a_broken_one_keeps_the_last_good(tmp_path: Path, caplog):
    path = tmp_path / "plain_acl.yml"
    _write(path, ACL_YAML, 0)
    with PlainAccessValidator.from_file(path, check_interval_s=0.05) as v:
        assert not _can(v, "later")

        _write(path, ACL_YAML.replace("      - audit=PUB", "      - audit=PUB\n      - later=PUB"), 1)
        wait_until(lambda: _can(v, "later"))

        with caplog.at_level(logging.ERROR, logger="plugins.acl.watcher"):
            _write(path, "accounts: [ {accessKey: broken", 2)  # not YAML
            wait_until(lambda: _logged(v, caplog, "not reloaded"))
            assert _can(v, "later")  # still the last good configuration
            caplog.clear()
            _write(path, "accounts:\n  - {accessKey: appAK, secretKey: short}", 3)  # YAML, but invalid
            wait_until(lambda: _logged(v, caplog, "not reloaded"))
            assert "secretKey" in caplog.text and _can(v, "later")
            caplog.clear()
            _write(path, "", 4)  # emptied (an editor truncating before it writes): not "no accounts"
            wait_until(lambda: _logged(v, caplog, "not reloaded"))
            assert "empty" in caplog.text and _can(v, "later")
            caplog.clear()
            path.unlink()
            wait_until(lambda: _logged(v, caplog, "not reloaded"))
            assert _can(v, "later")

        _write(path, ACL_YAML, 5)  # fixed again: picked up again
        wait_until(lambda: not _can(v, "later"))

    # closed: no more reloading
    _write(path, ACL_YAML.replace("      - audit=PUB", "      - audit=PUB\n      - later=PUB"), 6)
    time.sleep(0.2)
    assert not _can(v, "later")


def test_a_broken_reload_is_logged_once_per_change(tmp_path: Path, caplog):
    path = tmp_path / "plain_acl.yml"
    _write(path, ACL_YAML, 0)
    v = PlainAccessValidator.from_file(path, check_interval_s=0.01)
    with caplog.at_level(logging.ERROR, logger="plugins.acl.watcher"):
        _write(path, "{{{", 1)
        wait_until(lambda: _logged(v, caplog, "not reloaded"))
        for _ in range(10):
            time.sleep(0.015)
            login(v, "appAK", "appSecret")
    assert caplog.text.count("not reloaded") == 1
    v.close()


def test_a_broken_file_at_start_is_refused(tmp_path: Path):
    path = tmp_path / "plain_acl.yml"
    path.write_text("accounts:\n  - {accessKey: a, secretKey: x}")
    with pytest.raises(AclConfigError, match=r"accounts\[0\] \(a\): secretKey"):
        PlainAccessValidator.from_file(path)
