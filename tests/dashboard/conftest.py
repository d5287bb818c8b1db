"""One browser for the dashboard tests: Debian's Chromium (installed by scripts/install_browser.sh when missing)
driven by Playwright through ``executable_path``, since Playwright's own browser download is not reachable here.

Module-scoped, not session-scoped: Playwright's sync API runs an event loop in the main thread while it lives, and
the tests after these call ``asyncio.run``."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.procs import ROOT

CHROMIUM = "/usr/bin/chromium"
# no background traffic: this machine's closed network refuses it, many connections at a time
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    subprocess.run(["bash", str(ROOT / "scripts" / "install_browser.sh")], check=True, timeout=900)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
