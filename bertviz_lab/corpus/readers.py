"""Corpus readers: every accepted form of `data` becomes one list of (text_a, text_b | None) items, or one clear
error naming what is wrong (an empty corpus, a missing column, a row that is not text, a line that is not in the
file's encoding, a JSON line nested too deeply, a CSV field over its limit), with the file and line.

Limits: text files are decoded as `encoding` (UTF-8 unless told) with Python's `errors` handling ("strict" unless
told: "replace" keeps going past bad bytes); a JSONL line may nest up to Python's recursion limit (about 1,000
levels); a CSV field may hold up to CSV_FIELD_LIMIT characters. A line of any length is read (one huge line costs its
own size once); `analyze` tokenizes only its beginning (see `analyze.encode`)."""

from __future__ import annotations

import codecs
import csv
import io
import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bertviz_lab.util.files import clip

Item = tuple[str, "str | None"]
FILE_KINDS = (".txt", ".jsonl", ".csv", ".parquet")


CSV_FIELD_LIMIT = 64 << 20  # characters in one CSV field (the csv module's own default is 131,072)


def read_items(data: Any, text_column: str = "text", encoding: str = "utf-8", errors: str = "strict") -> list[Item]:
    """(text_a, text_b) pairs of `data`: an iterable of str or pairs, a .txt/.jsonl/.csv/.parquet file (text files
    decoded as `encoding`, bad bytes handled as `errors` says), or a Hugging Face `datasets` dataset; raises a
    one-line ValueError/TypeError/FileNotFoundError on bad input."""
    try:
        codecs.lookup(encoding)
        codecs.lookup_error(errors)
    except LookupError as error:
        raise ValueError(f"{error}: encoding must be a Python codec (e.g. utf-8, latin-1) and errors one of strict, "
                         "replace, ignore, backslashreplace.") from None
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        items = list(_read_file(path, text_column, encoding, errors))
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


def _read_file(path: Path, text_column: str, encoding: str, errors: str) -> Iterator[Item]:
    """The items of a .txt (one text per non-blank line), .jsonl, .csv or .parquet file."""
    if not path.is_file():
        raise FileNotFoundError(f"corpus file {path} does not exist." if not path.exists() else
                                f"corpus file {path} is not a file.")
    suffix = path.suffix.lower()
    if suffix == ".txt":
        yield from ((line.rstrip("\r\n"), None) for _, line in _lines(path, encoding, errors) if line.strip())
    elif suffix == ".jsonl":
        yield from _read_jsonl(path, text_column, encoding, errors)
    elif suffix == ".csv":
        yield from _read_csv(path, text_column, encoding, errors)
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        yield from _read_columns(table.column_names, lambda name: table.column(name).to_pylist(), text_column,
                                 str(path))
    else:
        raise ValueError(f"corpus file {path} has suffix {path.suffix or '(none)'!r}; expected one of "
                         f"{', '.join(FILE_KINDS)}.")


def _lines(path: Path, encoding: str, errors: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of a text file; a line that is not in `encoding` is an error naming the file, the line
    and the byte, and saying how to read it anyway."""
    if "\n".encode(encoding) != b"\n":  # UTF-16 and the like: lines cannot be split before decoding
        with path.open(encoding=encoding, errors=errors, newline="") as handle:
            try:
                yield from enumerate(handle, start=1)
            except UnicodeDecodeError as error:
                raise ValueError(_not_encoded(path, None, error, encoding)) from None
        return
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                yield number, raw.decode(encoding, errors)
            except UnicodeDecodeError as error:
                raise ValueError(_not_encoded(path, number, error, encoding)) from None


def _not_encoded(path: Path, line: int | None, error: UnicodeDecodeError, encoding: str) -> str:
    where = f"{path} line {line}" if line is not None else f"{path}"
    byte = error.object[error.start:error.start + 1].hex()
    return (f"{where} is not {encoding}: byte 0x{byte} at position {error.start} ({error.reason}); name the file's "
            "encoding (encoding=..., --encoding) or let bad bytes be replaced (errors='replace', --errors replace).")


def _read_jsonl(path: Path, text_column: str, encoding: str, errors: str) -> Iterator[Item]:
    """One JSON object per non-blank line with a `text_column` field (and `text_b` optionally)."""
    for number, line in _lines(path, encoding, errors):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} line {number} is not JSON: {error.msg}.") from None
        except RecursionError:
            raise ValueError(f"{path} line {number} nests deeper than JSON is read here (about "
                             f"{sys.getrecursionlimit()} levels); a corpus line is one flat object.") from None
        if not isinstance(record, dict) or text_column not in record:
            present = ", ".join(record) if isinstance(record, dict) else type(record).__name__
            raise ValueError(f"{path} line {number} has no {text_column!r} field (it has: {clip(present, 200)}).")
        yield _as_item((record[text_column], record.get("text_b")), number - 1, str(path))


def _read_csv(path: Path, text_column: str, encoding: str, errors: str) -> Iterator[Item]:
    """A CSV file's `text_column` (and `text_b`), read with fields of up to CSV_FIELD_LIMIT characters."""
    text = "".join(line for _, line in _lines(path, encoding, errors))  # decoded first: a bad byte names its line
    before = csv.field_size_limit(CSV_FIELD_LIMIT)
    try:
        fetched = [0]  # lines handed to the parser: the one it stopped in is the last

        def counted(lines: Iterable[str]) -> Iterator[str]:
            for line in lines:
                fetched[0] += 1
                yield line

        reader = csv.DictReader(counted(io.StringIO(text, newline="")))
        try:
            rows = list(reader)
        except csv.Error as error:
            raise ValueError(f"{path} line {fetched[0]}: {error} (a field may hold up to {CSV_FIELD_LIMIT:,} "
                             "characters).") from None
    finally:
        csv.field_size_limit(before)
    del text
    yield from _read_columns(reader.fieldnames or [], lambda name: [row[name] for row in rows], text_column,
                             str(path))


def _read_columns(names: Sequence[str], column: Any, text_column: str, where: str) -> Iterator[Item]:
    """Rows of a table given by its column names and a column reader: `text_column` and `text_b` if present."""
    if text_column not in names:
        raise ValueError(f"{where} has no column {text_column!r}; its columns are: {', '.join(map(str, names))}.")
    texts = column(text_column)
    pairs = column("text_b") if "text_b" in names else [None] * len(texts)
    for i, (a, b) in enumerate(zip(texts, pairs)):
        yield _as_item((a, b if b not in ("",) else None), i, where)
