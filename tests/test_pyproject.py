"""The project's settings agree with each other: ruff lints for the oldest Python the package says it supports."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_ruffs_target_version_is_the_oldest_python_required():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    settings = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    oldest = re.fullmatch(r">=\s*3\.(\d+)", settings["project"]["requires-python"])
    assert oldest, settings["project"]["requires-python"]
    assert settings["tool"]["ruff"]["target-version"] == f"py3{oldest.group(1)}"


def test_mypy_checks_for_the_oldest_python_required():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    settings = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    oldest = re.fullmatch(r">=\s*(3\.\d+)", settings["project"]["requires-python"])
    assert oldest, settings["project"]["requires-python"]
    assert settings["tool"]["mypy"]["python_version"] == oldest.group(1)
