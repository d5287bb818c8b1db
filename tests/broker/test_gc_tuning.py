"""``gcFreezeAfterStartup`` / ``gcThresholds``: the broker's collector settings, applied once it has started."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from broker.cli import tune_gc
from broker.config import load_broker_settings
from orbitmq.config import ConfigError


@pytest.fixture
def restore_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_defaults_freeze_the_startup_heap_and_keep_python_thresholds(restore_gc):
    config = load_broker_settings(None, {}).broker
    assert config.gcFreezeAfterStartup is True and config.gc_thresholds() is None
    before = gc.get_threshold()
    tune_gc(config)
    assert gc.get_freeze_count() > 0  # the test process's own heap, as a broker's startup heap would be
    assert gc.get_threshold() == before


def test_thresholds_applied_and_freeze_can_be_turned_off(restore_gc):
    config = load_broker_settings(None, {"gcThresholds": " 5000, 20,10 ", "gcFreezeAfterStartup": "false"}).broker
    gc.unfreeze()
    tune_gc(config)
    assert gc.get_threshold() == (5000, 20, 10)
    assert gc.get_freeze_count() == 0


@pytest.mark.parametrize("bad", ["700,10", "0,10,10", "a,b,c", "700,-1,10", "700,10,10,10"])
def test_malformed_thresholds_refused_at_load(bad):
    with pytest.raises(ConfigError, match="gcThresholds"):
        load_broker_settings(None, {"gcThresholds": bad})
