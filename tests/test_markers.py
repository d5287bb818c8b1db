"""The ``integration`` marker is earned: a test without it cannot start a server process, so the fast loop
(``pytest -m "not integration"``) never waits on one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import PROCESS_FIXTURES, _refuse_processes
from tests.procs import ServerProcess


def test_an_unmarked_test_cannot_start_a_server(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    assert request.node.get_closest_marker("integration") is None
    with pytest.raises(RuntimeError, match=r"mark it @pytest\.mark\.integration"):
        ServerProcess([sys.executable, "-c", "pass"], tmp_path / "never.log").start()
    assert not (tmp_path / "never.log").exists(), "nothing was started"


def test_the_refusal_is_undone_after_the_phase(request: pytest.FixtureRequest) -> None:
    before = ServerProcess.start
    patch = _refuse_processes(request.node)
    assert ServerProcess.start is not before
    patch.undo()
    assert ServerProcess.start is before


def test_the_process_fixtures_mark_their_tests(request: pytest.FixtureRequest) -> None:
    assert {"broker_factory", "broker", "shared_broker"} <= PROCESS_FIXTURES
    assert not PROCESS_FIXTURES & set(request.fixturenames)
