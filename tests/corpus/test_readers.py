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


def test_bytes_not_in_the_encoding_name_the_file_and_line_and_can_be_read_anyway(tmp_path):
    text = tmp_path / "latin.txt"
    text.write_bytes("first line\nSão Paulo à noite\nlast line\n".encode("latin-1"))
    jsonl = tmp_path / "latin.jsonl"
    jsonl.write_bytes(b'{"text": "fine"}\n{"text": "caf\xe9"}\n')
    csv_file = tmp_path / "latin.csv"
    csv_file.write_bytes(b'text\n"fine"\n"also fine"\n"na\xefve"\n')
    for path, line in ((text, 2), (jsonl, 2), (csv_file, 4)):
        with pytest.raises(ValueError) as raised:
            read_items(path)
        message = str(raised.value)
        assert message.startswith(f"{path} line {line} is not utf-8: byte 0x") and "\n" not in message, message
        assert "--encoding" in message and "errors='replace'" in message
    assert read_items(text, encoding="latin-1")[1] == ("São Paulo à noite", None)
    assert read_items(jsonl, errors="replace")[1] == ("caf\ufffd", None)
    assert read_items(csv_file, encoding="cp1252")[2] == ("naïve", None)
    utf16 = tmp_path / "wide.txt"
    utf16.write_text("one\ntwo\n", encoding="utf-16")
    assert read_items(utf16, encoding="utf-16") == [("one", None), ("two", None)]
    with pytest.raises(ValueError, match="unknown encoding: klingon"):
        read_items(text, encoding="klingon")
    with pytest.raises(ValueError, match="unknown error handler name 'sometimes'"):
        read_items(text, errors="sometimes")


def test_a_deeply_nested_json_line_and_a_huge_csv_field_are_one_line(tmp_path):
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"text": "ok"}\n' + '{"text": ' + "[" * 100_000 + "]" * 100_000 + "}\n", encoding="utf-8")
    with pytest.raises(ValueError) as raised:
        read_items(deep)
    assert str(raised.value).startswith(f"{deep} line 2 nests deeper than JSON is read here")
    wide = tmp_path / "wide.csv"
    wide.write_text("text\n" + "a" * 200_000 + "\nshort\n", encoding="utf-8")  # over the csv module's 131,072
    assert [len(a) for a, _ in read_items(wide)] == [200_000, 5]
    from bertviz_lab.corpus import readers

    before = readers.CSV_FIELD_LIMIT
    readers.CSV_FIELD_LIMIT = 1000
    try:
        with pytest.raises(ValueError) as raised:
            read_items(wide)
    finally:
        readers.CSV_FIELD_LIMIT = before
    assert str(raised.value) == (f"{wide} line 2: field larger than field limit (1000) (a field may hold up to 1,000 "
                                 "characters).")
    import csv

    assert csv.field_size_limit() == 131_072  # the module's limit is given back


def test_the_tokenizer_sees_a_bounded_prefix_of_a_huge_line_and_normal_texts_are_unchanged(minilm_tokenizer,
                                                                                             monkeypatch):
    import importlib

    analyze_module = importlib.import_module("bertviz_lab.corpus.analyze")  # the module, not the function

    seen: list[int] = []
    tokenizer = minilm_tokenizer

    def spying(texts, text_pair=None, **kwargs):
        seen.extend(len(t) for t in texts + (text_pair or []))
        return tokenizer(texts, text_pair=text_pair, **kwargs)

    huge = "word " * 2_000_000  # 10 MB in one line
    normal = ["The river bank was flooded after the storm.", ("Is it raining?", "No, it is sunny.")]
    items = [(huge, None), (normal[0], None), normal[1]]
    encoded = analyze_module.encode(spying, items, max_length=32)
    assert max(seen) == analyze_module.CHARS_PER_TOKEN * 32
    whole = analyze_module.encode(tokenizer, items, max_length=32)  # the tokenizer given everything
    assert (encoded.ids == whole.ids).all() and (encoded.offsets == whole.offsets).all()
