"""Corpus readers: every accepted form of `data` becomes one list of (text_a, text_b | None) items, or one clear
error naming what is wrong (an empty corpus, a missing column, a row that is not text)."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

Item = tuple[str, "str | None"]
FILE_KINDS = (".txt", ".jsonl", ".csv", ".parquet")


def read_items(data: Any, text_column: str = "text") -> list[Item]:
    """(text_a, text_b) pairs of `data`: an iterable of str or pairs, a .txt/.jsonl/.csv/.parquet file, or a
    Hugging Face `datasets` dataset; raises a one-line ValueError/TypeError/FileNotFoundError on bad input."""
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        items = list(_read_file(path, text_column))
        where = f"{path}"
    elif _is_hf_dataset(data):
        items = list(_read_columns(data.column_names, lambda name: list(data[name]), text_column, "the dataset"))
        where = "the dataset"
    elif isinstance(data, Iterable) and not isinstance(data, (bytes, dict)):
        items = [_as_item(row, i, "data") for i, row in enumerate(data)]
        where = "data"
    else:
        raise TypeError(f"data must be an iterable of str or (text_a, text_b) pairs, a file ({', '.join(FILE_KINDS)})"
                        f" or a datasets.Dataset, got {type(data).__name__}.")
    if not items:
        raise ValueError(f"the corpus is empty: {where} holds no text.")
    return items


def _is_hf_dataset(data: Any) -> bool:
    """A `datasets.Dataset` (checked by name so the library is imported only where it is used)."""
    return type(data).__module__.startswith("datasets.") and hasattr(data, "column_names")


def _as_item(row: Any, index: int, where: str) -> Item:
    """One row as (text_a, text_b); a row that is not a str or a pair of str is an error naming its index."""
    if isinstance(row, str):
        return row, None
    if isinstance(row, (tuple, list)) and len(row) == 2 and isinstance(row[0], str) and isinstance(row[1], str):
        return row[0], row[1]
    if isinstance(row, (tuple, list)) and len(row) == 2 and isinstance(row[0], str) and row[1] is None:
        return row[0], None
    shown = repr(row)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    raise TypeError(f"row {index} of {where} is not text: expected a str or a (text_a, text_b) pair of str, "
                    f"got {type(row).__name__} {shown}.")


def _read_file(path: Path, text_column: str) -> Iterator[Item]:
    """The items of a .txt (one text per non-blank line), .jsonl, .csv or .parquet file."""
    if not path.is_file():
        raise FileNotFoundError(f"corpus file {path} does not exist." if not path.exists() else
                                f"corpus file {path} is not a file.")
    suffix = path.suffix.lower()
    if suffix == ".txt":
        with path.open(encoding="utf-8") as lines:
            yield from ((line.rstrip("\r\n"), None) for line in lines if line.strip())
    elif suffix == ".jsonl":
        yield from _read_jsonl(path, text_column)
    elif suffix == ".csv":
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            rows = list(reader)
            yield from _read_columns(reader.fieldnames or [], lambda name: [row[name] for row in rows], text_column,
                                     str(path))
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        yield from _read_columns(table.column_names, lambda name: table.column(name).to_pylist(), text_column,
                                 str(path))
    else:
        raise ValueError(f"corpus file {path} has suffix {path.suffix or '(none)'!r}; expected one of "
                         f"{', '.join(FILE_KINDS)}.")


def _read_jsonl(path: Path, text_column: str) -> Iterator[Item]:
    """One JSON object per non-blank line with a `text_column` field (and `text_b` optionally)."""
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path} line {number} is not JSON: {error.msg}.") from None
            if not isinstance(record, dict) or text_column not in record:
                present = ", ".join(record) if isinstance(record, dict) else type(record).__name__
                raise ValueError(f"{path} line {number} has no {text_column!r} field (it has: {present}).")
            yield _as_item((record[text_column], record.get("text_b")), number - 1, str(path))


def _read_columns(names: list[str], column: Any, text_column: str, where: str) -> Iterator[Item]:
    """Rows of a table given by its column names and a column reader: `text_column` and `text_b` if present."""
    if text_column not in names:
        raise ValueError(f"{where} has no column {text_column!r}; its columns are: {', '.join(map(str, names))}.")
    texts = column(text_column)
    pairs = column("text_b") if "text_b" in names else [None] * len(texts)
    for i, (a, b) in enumerate(zip(texts, pairs)):
        yield _as_item((a, b if b not in ("",) else None), i, where)
