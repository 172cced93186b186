"""The tables the corpus figures draw from (pandas frames from a Corpus), checked before anything is drawn."""

from __future__ import annotations

from typing import Any, Sequence


def require_columns(table: Any, columns: Sequence[str], what: str, expected: str) -> None:
    """A one-line ValueError naming the first of `columns` that `table` lacks: "the {what} table has no column
    'x'; {expected}." (expected says where such a table comes from or what it needs)."""
    missing = [column for column in columns if column not in getattr(table, "columns", ())]
    if missing:
        raise ValueError(f"the {what} table has no column {missing[0]!r}; {expected}.")
