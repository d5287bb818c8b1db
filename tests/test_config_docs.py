"""The configuration reference cannot drift: every key of every config dataclass has a meaning (its comment) and
``docs/configuration.md`` holds exactly what ``make docs-config`` generates; unknown keys are reported by name."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from broker.config import load_broker_settings

ROOT = Path(__file__).resolve().parent.parent


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_config_docs", ROOT / "scripts" / "gen_config_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_config_docs"] = module
    spec.loader.exec_module(module)
    return module


def test_every_config_key_has_a_meaning_and_the_page_is_current() -> None:
    gen = _generator()
    assert gen.undocumented() == [], "give these keys a comment in their dataclass, then run make docs-config"
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert gen.updated(page) == page, "docs/configuration.md is stale: run make docs-config"
    for key in ("flushDiskType", "diskSpaceWarningLevelRatio", "aclEnable", "brokerRole", "popInitMode", "tlsEnable"):
        assert f"| `{key}` |" in page


def test_unknown_keys_are_named(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b1\nflushDiskTyp=SYNC_FLUSH\nnamesrvAddr=127.0.0.1:9876\n")
    settings = load_broker_settings(conf, {"listenPort": "1234", "noSuchFlag": "x"})
    assert settings.unknown_keys == ("flushDiskTyp", "noSuchFlag")
    assert settings.broker.brokerName == "b1"
