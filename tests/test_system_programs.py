"""A test that needs a missing system program is skipped with the install command, and is an error in CI."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

TESTS = Path(__file__).parent
NEEDS_CHROMIUM = """
import pytest

@pytest.mark.needs_program("chromium")
def test_in_the_browser():
    assert False, "must not run without its program"

def test_without_programs():
    pass
"""


@pytest.fixture
def suite(pytester, monkeypatch):
    """This suite's conftest and the helpers it imports, copied to a fresh folder, with a Chromium that is not there."""
    for name in ("conftest.py", "system_programs.py", "tiny_models.py"):
        shutil.copy(TESTS / name, pytester.path / name)
    pytester.makeini("[pytest]\nmarkers =\n    needs_program(name): needs a system program\n")
    pytester.makepyfile(test_needs=NEEDS_CHROMIUM)
    monkeypatch.setenv("BERTVIZ_LAB_CHROMIUM", str(pytester.path / "no-such-chromium"))
    monkeypatch.delenv("BERTVIZ_LAB_REQUIRE_PROGRAMS", raising=False)
    return pytester


@pytest.mark.slow
def test_a_missing_program_skips_with_its_install_command(suite):
    result = suite.runpytest_subprocess("-ra", "-p", "no:random_order")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*chromium is missing (Chromium*`sudo apt-get install chromium`*"])


@pytest.mark.slow
def test_a_missing_program_stops_the_run_where_programs_are_required(suite, monkeypatch):
    monkeypatch.setenv("BERTVIZ_LAB_REQUIRE_PROGRAMS", "1")
    result = suite.runpytest_subprocess("-p", "no:random_order")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*a system program is missing*", "*chromium is missing*1 test(s) need it"])
