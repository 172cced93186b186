"""What the corpus needs beyond the core install (the `corpus` extra, which `lab` includes): checked before a run
writes anything or a folder is read, so a missing package is one line naming it and the install, not a traceback
halfway through a run that left a folder behind."""

from __future__ import annotations

import importlib.util

PACKAGES = ("pyarrow", "duckdb", "pandas", "usearch")  # the `corpus` extra of pyproject.toml, by import name


def require_corpus_extra() -> None:
    """An ImportError of one line naming the missing packages and the install that brings them."""
    missing = [name for name in PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise ImportError(f"the corpus needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not "
                          "installed: pip install 'bertviz_lab[corpus]' (the 'lab' extra includes it).")
