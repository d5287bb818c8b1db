"""Module-scoped servers for oms tests: one standalone broker shared by a test module keeps the run short."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import oms
from tests.conftest import BrokerFactory, BrokerHandle


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerHandle]:
    factory = BrokerFactory(tmp_path_factory.mktemp("oms-broker"))
    try:
        yield factory.broker(options={"transactionTimeOut": "1000", "transactionCheckInterval": "300"})
    finally:
        factory.stop_all()


@pytest.fixture
def access_point(shared_broker: BrokerHandle) -> Iterator[oms.MessagingAccessPoint]:
    with oms.get_messaging_access_point(f"oms:rocketmq://{shared_broker.addr}/") as ap:
        yield ap


@pytest.fixture
def producer(access_point: oms.MessagingAccessPoint) -> Iterator[oms.Producer]:
    with access_point.create_producer(operation_timeout=10_000) as p:
        yield p
