"""The corpus folder: a rerun recomputes nothing, a folder with a missing shard or a half-written one is not read
as complete and is resumed to the same tables, other settings into the same folder are refused, and bad input is
one clear line."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from bertviz_lab.corpus import SENTENCES, Corpus, analyze
from bertviz_lab.util.files import WRITER_LOCK

TEXTS = SENTENCES.read_text(encoding="utf-8").splitlines()[:20]


def counting_forwards(model) -> list[int]:
    """A list whose length is the number of forwards the model ran since."""
    calls: list[int] = []
    model.register_forward_pre_hook(lambda module, args: calls.append(1))
    return calls


def tables(corpus: Corpus) -> dict[str, pd.DataFrame]:
    return {"head_stats": corpus.head_stats(),
            "text_stats": corpus.sql("select * from text_stats order by text_id, layer, head"),
            "texts": corpus.sql("select * from texts order by text_id"),
            "tokens": corpus.sql("select * from tokens order by text_id, position")}


def assert_same_tables(a: Corpus, b: Corpus) -> None:
    for name, table in tables(a).items():
        pd.testing.assert_frame_equal(table, tables(b)[name], check_exact=False, rtol=1e-6, obj=name)


def modified(out) -> dict:
    """{path: mtime} of everything in a corpus folder but the writer lock file (each run opens it to lock it)."""
    return {path: path.stat().st_mtime_ns for path in out.rglob("*") if path.name != WRITER_LOCK}


@pytest.fixture
def fresh_model():
    """A model of its own (hooks added by a test stay with it)."""
    import bertviz_lab

    return bertviz_lab.load_default()


def test_a_rerun_with_the_same_settings_recomputes_nothing(tmp_path, fresh_model):
    model, tokenizer = fresh_model
    first = analyze(model, tokenizer, TEXTS, tmp_path / "c", layers=[0, 2], vectors="hidden", shard_size=6,
                    progress=False)
    stamps = modified(tmp_path / "c")
    calls = counting_forwards(model)
    again = analyze(model, tokenizer, TEXTS, tmp_path / "c", layers=[0, 2], vectors="hidden", shard_size=6,
                    batch_size=7, progress=False)
    assert calls == [] and modified(tmp_path / "c") == stamps
    assert_same_tables(first, again)


def test_a_missing_or_half_written_shard_is_resumed_to_the_same_tables(tmp_path, fresh_model):
    model, tokenizer = fresh_model
    whole = analyze(model, tokenizer, TEXTS, tmp_path / "whole", vectors="hidden", layers=[1], shard_size=6,
                    batch_size=4, progress=False)
    shutil.copytree(tmp_path / "whole", tmp_path / "cut")
    cut = tmp_path / "cut"
    (cut / "manifest.json").unlink()
    shutil.rmtree(cut / "shards" / "00002")
    (cut / "shards" / ".00002.tmp").mkdir()  # what a process killed while writing shard 2 leaves
    (cut / "shards" / ".00002.tmp" / "texts.parquet").write_bytes(b"half")
    with pytest.raises(ValueError, match="is not a complete corpus: its analysis did not finish"):
        Corpus.open(cut)
    calls = counting_forwards(model)
    resumed = analyze(model, tokenizer, TEXTS, cut, vectors="hidden", layers=[1], shard_size=6, batch_size=4,
                      progress=False)
    assert len(calls) == 2  # shard 2 alone: 6 texts in batches of 4
    assert not (cut / "shards" / ".00002.tmp").exists()
    assert_same_tables(whole, resumed)
    assert resumed.nearest(3, 2, 1, k=5).equals(whole.nearest(3, 2, 1, k=5))


def test_other_settings_into_the_same_folder_are_refused(tmp_path, minilm):
    model, tokenizer = minilm
    analyze(model, tokenizer, TEXTS[:4], tmp_path / "c", layers=[0], progress=False)
    with pytest.raises(ValueError, match=r"holds a corpus analysed with other settings \(layers differ\)"):
        analyze(model, tokenizer, TEXTS[:4], tmp_path / "c", layers=[1], progress=False)
    with pytest.raises(ValueError, match=r"\(data, num_texts differ\)"):
        analyze(model, tokenizer, TEXTS[:5], tmp_path / "c", layers=[0], progress=False)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.md").write_text("mine", encoding="utf-8")
    with pytest.raises(ValueError, match="holds other files and no corpus"):
        analyze(model, tokenizer, TEXTS[:4], tmp_path / "other", progress=False)


def test_bad_input_is_one_clear_line(tmp_path, minilm):
    model, tokenizer = minilm
    (tmp_path / "c.csv").write_text("sentence\nhello\n", encoding="utf-8")
    (tmp_path / "plain").mkdir()
    cases = [
        (lambda: analyze(model, tokenizer, [], tmp_path / "a"), ValueError, "the corpus is empty"),
        (lambda: analyze(model, tokenizer, tmp_path / "c.csv", tmp_path / "a"), ValueError,
         "has no column 'text'; its columns are: sentence"),
        (lambda: analyze(model, tokenizer, ["ok", None], tmp_path / "a"), TypeError, "row 1 of data is not text"),
        (lambda: analyze(model, tokenizer, ["ok"], tmp_path / "a", layers=[6]), ValueError,
         "layer 6 does not exist: the model has 6 layers (0-5)"),
        (lambda: analyze(model, tokenizer, ["ok"], tmp_path / "a", heads=[12]), ValueError,
         "head 12 does not exist: the model has 12 heads (0-11)"),
        (lambda: analyze(model, tokenizer, ["ok"], tmp_path / "a", vectors=["keys"]), ValueError,
         "vectors='keys' is not a kind of vector"),
        (lambda: Corpus.open(tmp_path / "plain"), ValueError, "is not a complete corpus: it has no manifest.json"),
        (lambda: Corpus.open(tmp_path / "nowhere"), ValueError, "is not a corpus folder: it does not exist"),
    ]
    for call, error, words in cases:
        with pytest.raises(error) as raised:
            call()
        assert words in str(raised.value) and "\n" not in str(raised.value), words
    assert not (tmp_path / "a").exists()  # nothing written for bad input


def test_bad_queries_are_one_clear_line(small_corpus):
    cases = [
        (lambda: small_corpus.top_texts(9, 0, "cls"), "layer 9 is not in this corpus; it holds layers [0, 1, 2"),
        (lambda: small_corpus.top_texts(0, 0, "attention"), "stat='attention' is not a statistic"),
        (lambda: small_corpus.top_texts(0, 0, "cls", k=-1), "k must be a positive int, got -1"),
        (lambda: small_corpus.top_texts(0, 0, "cls", k=2.5), "k must be a positive int, got 2.5"),
        (lambda: small_corpus.text(10 ** 6), "text id 1000000 is not in this corpus of 34 texts"),
        (lambda: small_corpus.nearest(0, 99, 1), "position 99 is not in text 0"),
        (lambda: small_corpus.nearest("Hello there.", 0, 3, k=0), "k must be a positive int"),
        (lambda: small_corpus.qk_map(0, 12), "head (0, 12) has no stored queries and keys"),
    ]
    for call, words in cases:
        with pytest.raises(ValueError) as raised:
            call()
        assert words in str(raised.value) and "\n" not in str(raised.value), words


def test_nearest_on_new_text_never_loads_a_model_the_folder_names_but_takes_the_one_given(tmp_path, minilm,
                                                                                         monkeypatch):
    from bertviz_lab.model import auto

    model, tokenizer = minilm
    analyze(model, tokenizer, TEXTS[:3], tmp_path / "named", layers=[0], vectors="hidden", progress=False,
            model_name="attacker-org/tracking-bert")
    loads: list = []
    monkeypatch.setattr(auto, "load", lambda *args, **kwargs: loads.append(args))
    with pytest.raises(ValueError) as raised:
        Corpus.open(tmp_path / "named").nearest("Hello there.", 1, 0)
    assert loads == []
    assert "needs the model this corpus was analysed with ('attacker-org/tracking-bert')" in str(raised.value)
    assert "\n" not in str(raised.value)
    reopened = Corpus.open(tmp_path / "named", model=model, tokenizer=tokenizer)
    assert len(reopened.nearest("Hello there.", 1, 0, k=2)) == 2
