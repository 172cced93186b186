"""The documentation site, built once per session for the tests that read it."""

from __future__ import annotations

import pytest
from site_build import build_site


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """The folder of a site `mkdocs build --strict` wrote; the build's failure or warnings fail the test using it."""
    folder, done, seconds = build_site(tmp_path_factory.mktemp("site") / "site")
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    assert not warnings, "\n".join(warnings)
    print(f"\nmkdocs build --strict: {seconds:.0f} s")
    return folder
