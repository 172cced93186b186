"""Fixtures of the browser tests: one JupyterLab server and one headless Chromium for the whole session."""

from __future__ import annotations

import pytest
from browser_lab import CHROMIUM_ARGS, LabServer, recording_context
from system_programs import CHROMIUM


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory):
    server = LabServer(tmp_path_factory.mktemp("jupyterlab"))
    server.start()
    try:
        yield server
    finally:
        code = server.stop()
        print(f"\nJupyterLab stopped (exit {code}); its log: {server.log_path}")


@pytest.fixture(scope="session")
def chromium():
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
    finally:
        playwright.stop()


@pytest.fixture(scope="session")
def lab_context(chromium, lab_server):
    """One browser context for all notebooks (shared HTTP cache); every request and websocket it makes is kept."""
    with recording_context(chromium, lab_server) as context:
        yield context
