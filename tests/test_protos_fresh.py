"""The committed generated modules of the internal protocols match their .proto files."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import gen_protos  # noqa: E402


def test_generated_modules_are_fresh(tmp_path: Path) -> None:
    protos = gen_protos.generate(tmp_path)
    if not protos:
        pytest.skip("no internal .proto files yet")
    generated = sorted(p for p in (tmp_path / "orbitmq" / "proto").iterdir() if p.is_file())
    assert generated, "protoc produced nothing"
    for fresh in generated:
        committed = ROOT / "orbitmq" / "proto" / fresh.name
        assert committed.exists(), f"{committed} is missing: run `make protos`"
        assert committed.read_bytes() == fresh.read_bytes(), f"{committed} is stale: run `make protos`"
