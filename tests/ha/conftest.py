"""One etcd per test session for the failover tests (started only when a test asks for it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.ha.etcd import EtcdHandle, start_etcd


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdHandle]:
    handle = start_etcd(tmp_path_factory.mktemp("etcd"))
    try:
        yield handle
    finally:
        handle.stop()
