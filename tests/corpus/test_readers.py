"""Every accepted form of corpus data gives the same items; bad data is one clear line naming the problem."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bertviz_lab.corpus.readers import read_items

ITEMS = [("The cat sat.", None), ("Is it late?", "No, it is early."), ("Commas, dots; colons: all here.", None)]


def write_all(tmp_path):
    """The same three items as .txt (single texts only), .jsonl, .csv and .parquet."""
    (tmp_path / "c.txt").write_text("The cat sat.\n\n  \nCommas, dots; colons: all here.\n", encoding="utf-8")
    (tmp_path / "c.jsonl").write_text("\n".join(json.dumps({"text": a, **({"text_b": b} if b else {}), "n": 1})
                                                for a, b in ITEMS) + "\n", encoding="utf-8")
    rows = ["text,text_b,label"] + [f'"{a}","{b or ""}",1' for a, b in ITEMS]
    (tmp_path / "c.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    pq.write_table(pa.table({"sentence": [a for a, _ in ITEMS], "text_b": [b for _, b in ITEMS]}),
                   tmp_path / "c.parquet")


def test_files_iterables_and_datasets_give_the_same_items(tmp_path):
    write_all(tmp_path)
    assert read_items(tmp_path / "c.txt") == [ITEMS[0], ITEMS[2]]
    assert read_items(str(tmp_path / "c.jsonl")) == ITEMS
    assert read_items(tmp_path / "c.csv") == ITEMS
    assert read_items(tmp_path / "c.parquet", text_column="sentence") == ITEMS
    assert read_items([a if b is None else (a, b) for a, b in ITEMS]) == ITEMS
    assert read_items(iter(["one", ["two", "three"]])) == [("one", None), ("two", "three")]
    datasets = pytest.importorskip("datasets")
    dataset = datasets.Dataset.from_dict({"text": [a for a, _ in ITEMS], "text_b": [b for _, b in ITEMS]})
    assert read_items(dataset) == ITEMS


@pytest.mark.parametrize("data, error, words", [
    ([], ValueError, "the corpus is empty"),
    (["fine", 5, "fine"], TypeError, "row 1 of data is not text"),
    ([("a", 3)], TypeError, "row 0 of data is not text"),
    (42, TypeError, "data must be an iterable"),
])
def test_bad_iterables_are_one_line(data, error, words):
    with pytest.raises(error) as raised:
        read_items(data)
    assert words in str(raised.value) and "\n" not in str(raised.value)


def test_bad_files_are_one_line(tmp_path):
    write_all(tmp_path)
    (tmp_path / "empty.txt").write_text("\n \n", encoding="utf-8")
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\n{"text": null}\n', encoding="utf-8")
    (tmp_path / "c.xml").write_text("<a/>", encoding="utf-8")
    cases = [
        (tmp_path / "empty.txt", "text", ValueError, f"the corpus is empty: {tmp_path / 'empty.txt'} holds no text"),
        (tmp_path / "c.csv", "body", ValueError, "has no column 'body'; its columns are: text, text_b, label"),
        (tmp_path / "c.parquet", "text", ValueError, "its columns are: sentence, text_b"),
        (tmp_path / "c.jsonl", "body", ValueError, "line 1 has no 'body' field (it has: text"),
        (tmp_path / "bad.jsonl", "text", TypeError, "row 1 of"),
        (tmp_path / "missing.txt", "text", FileNotFoundError, "does not exist"),
        (tmp_path / "c.xml", "text", ValueError, "expected one of .txt, .jsonl, .csv, .parquet"),
    ]
    for path, column, error, words in cases:
        with pytest.raises(error) as raised:
            read_items(path, column)
        assert words in str(raised.value) and "\n" not in str(raised.value), path
