"""Listener addresses: what counts as loopback-only, and the host:port gRPC binds."""

from __future__ import annotations

import pytest

from orbitmq.net import bind_target, is_loopback


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost", " LOCALHOST "])
def test_loopback(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.1", "192.168.1.5", "mq.example.com", "::ffff:10.0.0.1"])
def test_reachable(host):
    assert not is_loopback(host)


def test_bind_target():
    assert bind_target("127.0.0.1", 9876) == "127.0.0.1:9876"
    assert bind_target("", 9876) == "0.0.0.0:9876"
    assert bind_target("::1", 8081) == "[::1]:8081"
    assert bind_target("[::]", 0) == "[::]:0"
