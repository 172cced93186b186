"""Fixtures of the browser tests: one JupyterLab server and one headless Chromium for the whole session."""

from __future__ import annotations

import pytest
from browser_lab import CHROMIUM_ARGS, LabServer, delete_sessions, recording_context
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


@pytest.fixture
def page(lab_context, lab_server):
    """A page with no kernel session left from another test; the page's uncaught errors are kept in `.errors`."""
    delete_sessions(lab_context, lab_server)
    page = lab_context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(f"{error} {error.stack or ''}"[:600]))
    page.errors = errors
    yield page
    page.close()
    delete_sessions(lab_context, lab_server)
