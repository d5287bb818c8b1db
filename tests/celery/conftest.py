"""One broker per test module for the Celery/kombu transport tests; short invisible times through broker config."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

import transports.celery  # noqa: F401  # registers rocketmq:// with kombu
from tests.conftest import BrokerFactory, BrokerHandle

# The transport's invisible_time may go down to 3 s in tests: the broker's receive minimum is lowered to match.
BROKER_OPTIONS = {"minInvisibleTimeMillsForRecv": "1000"}
INVISIBLE_S = 4.0
_names = itertools.count()


@pytest.fixture(scope="module")
def celery_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerHandle]:
    factory = BrokerFactory(tmp_path_factory.mktemp("celery-broker"))
    try:
        yield factory.broker(options=BROKER_OPTIONS)
    finally:
        factory.stop_all()


@pytest.fixture
def broker_url(celery_broker: BrokerHandle) -> str:
    return f"rocketmq://{celery_broker.addr}"


@pytest.fixture
def qname(request: pytest.FixtureRequest) -> str:
    """A queue name of its own for each test (the broker is shared by the module)."""
    return f"t{next(_names)}-{request.node.name[:40].replace('[', '-').replace(']', '')}"
