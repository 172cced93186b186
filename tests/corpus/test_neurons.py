"""analyze(..., neurons=k): each feed-forward neuron's top k texts equal a brute-force run of the model on every text
alone (its max over the text's real tokens, texts ranked by it), also where the top k spans shards; an interrupted
run resumes to the table of an uninterrupted one; neurons=0 writes the folder it always wrote; every bad request is
one line; the CLI takes --neurons."""

from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from test_folder import assert_same_tables, counting_forwards
from tiny_models import tiny_config

from bertviz_lab.cli import main
from bertviz_lab.corpus import SENTENCES, Corpus, analyze
from bertviz_lab.corpus.analyze import ShardWriter
from bertviz_lab.corpus.neurons import TopTexts, best, text_maxima
from bertviz_lab.kernels import machine
from bertviz_lab.model import BERT
from bertviz_lab.trace import run_with_cache
from bertviz_lab.util.files import WRITER_LOCK, WRITER_NOTE

LINES = SENTENCES.read_text(encoding="utf-8").splitlines()
TEXTS = LINES[:11] + [("Is it raining?", "No, it is sunny.")]  # 12 texts: shards of 5, 5 and 2
K = 3
RUN = dict(neurons=K, shard_size=5, batch_size=4, progress=False)


@pytest.fixture(scope="module")
def tiny(minilm):
    """(model, tokenizer): a 2-layer BERT of 128 feed-forward neurons, seeded, with the packaged tokenizer."""
    _, tokenizer = minilm
    torch.manual_seed(0)
    config = tiny_config(vocab_size=tokenizer.vocab_size, max_position_embeddings=128, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0)
    return BERT(config).eval(), tokenizer


@pytest.fixture(scope="module")
def tiny_corpus(tiny, tmp_path_factory) -> Corpus:
    model, tokenizer = tiny
    return analyze(model, tokenizer, TEXTS, tmp_path_factory.mktemp("neurons") / "c", **RUN)


def brute_force(model, tokenizer, texts) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """{layer: ((texts, I) max activation of each neuron over the text's tokens, (texts, I) its position)}, each
    text run alone, so no padding."""
    names = [f"encoder.layer.{layer}.intermediate.act" for layer in range(model.config.num_hidden_layers)]
    maxima: dict[int, list] = {layer: [] for layer in range(len(names))}
    with torch.inference_mode():
        for text in texts:
            a, b = (text, None) if isinstance(text, str) else text
            enc = tokenizer(a, text_pair=b, truncation=True, max_length=128, return_tensors="pt")
            _, cache = run_with_cache(model, input_ids=enc["input_ids"], token_type_ids=enc["token_type_ids"],
                                      attention_mask=enc["attention_mask"], names_filter=names)
            for layer, name in enumerate(names):
                maxima[layer].append(cache[name][0].float().max(dim=0))
    return {layer: (torch.stack([m.values for m in rows]).numpy(), torch.stack([m.indices for m in rows]).numpy())
            for layer, rows in maxima.items()}


def shard_of(corpus: Corpus) -> dict[int, int]:
    """{text id: the shard that holds it}."""
    tables = [pq.read_table(corpus.path / "shards" / entry["name"] / "texts.parquet") for entry in
              corpus.manifest["shards"]]
    return {text_id: index for index, table in enumerate(tables) for text_id in table["text_id"].to_pylist()}


def test_every_neurons_top_texts_equal_a_brute_force_run_of_each_text_alone(tiny, tiny_corpus):
    model, tokenizer = tiny
    reference = brute_force(model, tokenizer, TEXTS)
    shards = shard_of(tiny_corpus)
    assert tiny_corpus.neuron_layers == [0, 1] and tiny_corpus.neurons_kept == K
    assert tiny_corpus.manifest["intermediate_size"] == 128
    spanning = 0
    for layer in (0, 1):
        values, positions = reference[layer]
        for neuron in range(128):
            ranked = sorted(range(len(TEXTS)), key=lambda t: (-values[t, neuron], t))[:K]
            got = tiny_corpus.top_neuron_texts(layer, neuron, k=K)
            assert list(got.columns) == ["text_id", "position", "token", "activation", "left", "right", "text"]
            np.testing.assert_allclose(got["activation"], values[ranked, neuron], rtol=0, atol=1e-6)
            assert got["text_id"].tolist() == ranked, (layer, neuron)
            assert got["position"].tolist() == positions[ranked, neuron].tolist()
            spanning += len({shards[t] for t in ranked}) > 1
    assert spanning > 100  # most neurons' top 3 come from more than one shard


def test_the_token_and_its_context_are_those_of_the_text(tiny_corpus):
    got = tiny_corpus.top_neuron_texts(1, 5, k=2)
    for row in got.itertuples():
        tokens = tiny_corpus.tokens(row.text_id)
        assert row.token == tokens[row.position]
        assert row.left == " ".join(tokens[max(0, row.position - 5):row.position])
        assert row.right == " ".join(tokens[row.position + 1:row.position + 6])
        a, b = tiny_corpus.text(row.text_id)
        assert row.text == (a if b is None else f"{a} [SEP] {b}")
    pair = TEXTS.index(("Is it raining?", "No, it is sunny."))
    assert tiny_corpus.sql("select count(*) as n from neuron_maxima where text_id = ?", [pair])["n"][0] > 0


def test_equal_activations_rank_by_text_id_whatever_order_they_come_in():
    values = torch.tensor([[1.0, 2.0, 2.0, 0.5, 2.0]])
    ids = torch.tensor([[9, 7, 3, 1, 5]])
    kept_values, kept_ids, kept_positions = best(values, ids, ids * 10, 3)
    assert kept_ids.tolist() == [[3, 5, 7]] and kept_values.tolist() == [[2.0, 2.0, 2.0]]
    assert kept_positions.tolist() == [[30, 50, 70]]


def test_the_maximum_is_float32_over_real_tokens_only_at_the_first_position_of_equals():
    act = torch.tensor([[[0.5, -1.0, 2.0], [0.25, 3.0, 2.0], [9.0, 9.0, 9.0]],  # text 0: 2 tokens and padding
                        [[0.5, -1.0, 2.0], [0.25, 3.0, 1.0], [0.75, 3.0, 2.0]]], dtype=torch.bfloat16)
    lengths = torch.tensor([2, 3])
    assert text_maxima(act, lengths, shortest=2).dtype == torch.float32
    top = TopTexts(k=2)
    top.add_batch(act, lengths, 2, torch.tensor([7, 4]))
    assert top.values.tolist() == [[0.75, 0.5], [3.0, 3.0], [2.0, 2.0]]
    assert top.text_ids.tolist() == [[4, 7], [4, 7], [4, 7]] and top.positions.tolist() == [[2, 0], [1, 1], [0, 0]]
    random = torch.randn(4, 9, 16)
    lengths = torch.tensor([9, 3, 5, 7])
    top = TopTexts(k=4)
    top.add_batch(random, lengths, 3, torch.arange(4))
    for b, n in enumerate(lengths.tolist()):
        want = random[b, :n].max(dim=0)
        kept = top.text_ids == b
        assert torch.equal(top.values[kept], want.values) and torch.equal(top.positions[kept], want.indices)


def test_an_interrupted_run_resumes_to_the_neuron_table_of_an_uninterrupted_one(tiny, tiny_corpus, tmp_path,
                                                                                   monkeypatch):
    model, tokenizer = tiny
    real_write = ShardWriter.write

    def stopped_at_shard_2(self, out, index, *args, **kwargs):
        if index == 2:
            raise KeyboardInterrupt
        return real_write(self, out, index, *args, **kwargs)

    monkeypatch.setattr(ShardWriter, "write", stopped_at_shard_2)
    with pytest.raises(KeyboardInterrupt):
        analyze(model, tokenizer, TEXTS, tmp_path / "cut", **RUN)
    monkeypatch.setattr(ShardWriter, "write", real_write)
    assert not (tmp_path / "cut" / "neuron_maxima.parquet").exists()
    calls = counting_forwards(model)
    try:
        resumed = analyze(model, tokenizer, TEXTS, tmp_path / "cut", **RUN)
    finally:
        model._forward_pre_hooks.clear()
    assert len(calls) == 1  # shard 2 alone: 2 texts in one batch
    table = "select * from neuron_maxima order by layer, neuron, activation desc, text_id"
    pd.testing.assert_frame_equal(resumed.sql(table), tiny_corpus.sql(table), check_exact=True)
    assert resumed.manifest == tiny_corpus.manifest
    assert_same_tables(resumed, tiny_corpus)


def test_neurons_0_writes_the_folder_it_always_wrote_and_neurons_change_no_other_table(tiny, tiny_corpus,
                                                                                         tmp_path):
    model, tokenizer = tiny
    corpus = analyze(model, tokenizer, TEXTS, tmp_path / "c", shard_size=5, batch_size=4, progress=False)
    assert_same_tables(corpus, tiny_corpus)
    listing = sorted(str(p.relative_to(tmp_path / "c")) for p in (tmp_path / "c").rglob("*")
                     if p.name not in (WRITER_LOCK, WRITER_NOTE))
    tables = ["texts.parquet", "tokens.parquet", "text_stats.parquet"]
    assert listing == sorted(["head_stats.parquet", "manifest.json", "settings.json", "shards"]
                             + [f"shards/{s}" for s in ("00000", "00001", "00002")]
                             + [f"shards/{s}/{t}" for s in ("00000", "00001", "00002") for t in tables])
    assert set(corpus.manifest) == {"format", "complete", "hash", "model_name", "layers", "heads", "num_heads",
                                    "vectors", "vector_layers", "qk_heads", "index_segment_rows", "precision",
                                    "num_texts", "max_length", "shards"}
    settings = json.loads((tmp_path / "c" / "settings.json").read_text(encoding="utf-8"))["settings"]
    assert "neurons" not in settings  # so the hash of a folder from before is the hash of this one
    assert corpus.neuron_layers == [] and corpus.neurons_kept == 0


def test_bad_requests_are_one_line(tiny, tiny_corpus, tmp_path):
    model, tokenizer = tiny
    plain = analyze(model, tokenizer, TEXTS[:3], tmp_path / "plain", progress=False)
    one_layer = analyze(model, tokenizer, TEXTS[:3], tmp_path / "one", layers=[1], neurons=2, progress=False)
    cases = [
        (lambda: plain.top_neuron_texts(0, 0), "this corpus keeps no neuron maxima; run analyze(..., neurons=K) or "
                                               "bertviz-lab corpus --neurons K"),
        (lambda: one_layer.top_neuron_texts(0, 0), "layer 0 has no neuron maxima; this corpus keeps them for "
                                                   "layers [1]"),
        (lambda: tiny_corpus.top_neuron_texts(1, 128), "neuron 128 does not exist: layer 1 has 128 feed-forward "
                                                       "neurons (0-127)"),
        (lambda: tiny_corpus.top_neuron_texts(1, -1), "neuron -1 does not exist"),
        (lambda: tiny_corpus.top_neuron_texts(1, 3, k=4), "k=4 is more than the 3 texts this corpus keeps per "
                                                          "neuron; analyze with neurons=4 or more"),
        (lambda: one_layer.top_neuron_texts(1, 3, k=3), "k=3 is more than the 2 texts"),
        (lambda: tiny_corpus.top_neuron_texts(1, 3, k=0), "k must be a positive int, got 0"),
        (lambda: analyze(model, tokenizer, TEXTS[:3], tmp_path / "a", neurons=-1), "neurons must be an int of 0 "
                                                                                   "(keep none) to 10,000"),
        (lambda: analyze(model, tokenizer, TEXTS[:3], tmp_path / "a", neurons=True), "got True"),
        (lambda: analyze(model, tokenizer, TEXTS[:3], tmp_path / "a", neurons="3"), "got '3'"),
    ]
    for call, words in cases:
        with pytest.raises(ValueError) as raised:
            call()
        assert words in str(raised.value) and "\n" not in str(raised.value), (words, str(raised.value))
    assert not (tmp_path / "a").exists()
    assert len(one_layer.top_neuron_texts(1, 3, k=2)) == 2  # three texts, two kept


@pytest.mark.parametrize("damage, words", [
    (lambda c: (c / "neuron_maxima.parquet").unlink(), "neuron_maxima.parquet is missing"),
    (lambda c: pq.write_table(pa.table({"x": ["'; copy"] * (2 * 128 * K)}), c / "neuron_maxima.parquet"),
     "neuron_maxima.parquet holds the columns {'x': 'string'}"),
    (lambda c: pq.write_table(pq.read_table(c / "neuron_maxima.parquet").slice(1), c / "neuron_maxima.parquet"),
     f"holds {2 * 128 * K - 1} rows"),
    (lambda c: edit(c, neurons="3"), "field 'neurons'"),
    (lambda c: edit(c, intermediate_size=0), "field 'intermediate_size'"),
    (lambda c: edit(c, intermediate_size=64), "holds 768 rows where the manifest says 384"),
])
def test_a_damaged_neuron_table_or_field_is_one_line(tiny_corpus, tmp_path, damage, words):
    copy = tmp_path / "c"
    shutil.copytree(tiny_corpus.path, copy)
    damage(copy)
    with pytest.raises(ValueError) as raised:
        Corpus.open(copy).top_neuron_texts(0, 0)
    assert words in str(raised.value) and "\n" not in str(raised.value), str(raised.value)


def edit(corpus, **fields) -> None:
    manifest = json.loads((corpus / "manifest.json").read_text(encoding="utf-8"))
    (corpus / "manifest.json").write_text(json.dumps({**manifest, **fields}), encoding="utf-8")


def test_bf16_keeps_the_maxima_in_float32_near_those_of_fp32(tiny, tiny_corpus, tmp_path):
    model, tokenizer = tiny
    if machine.native_bf16() is None:  # refused in one line here (tests/corpus/test_precision.py checks it)
        with pytest.raises(ValueError, match="bf16 needs a CPU that computes it natively"):
            analyze(model, tokenizer, TEXTS, tmp_path / "bf16", precision="bf16", **RUN)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bf16 = analyze(model, tokenizer, TEXTS, tmp_path / "bf16", precision="bf16", **RUN)
    query = "select layer, neuron, activation from neuron_maxima order by layer, neuron, activation desc"
    got, want = bf16.sql(query), tiny_corpus.sql(query)
    assert got["activation"].dtype == np.float32
    assert 0 < np.abs(got["activation"] - want["activation"]).max() < 0.05


def test_the_cli_keeps_neuron_maxima_with_neurons(tmp_path, capsys):
    data = tmp_path / "texts.txt"
    data.write_text("\n".join(LINES[:6]) + "\n", encoding="utf-8")
    out = tmp_path / "c"
    assert main(["corpus", "--model", "default", "--data", str(data), "--out", str(out), "--layers", "5",
                 "--neurons", "2", "--no-progress"]) == 0
    assert "top 2 texts per neuron" in capsys.readouterr().out
    corpus = Corpus.open(out)
    assert corpus.neuron_layers == [5] and corpus.manifest["neurons"] == 2
    assert len(corpus.top_neuron_texts(5, 1000, k=2)) == 2
    assert main(["corpus", "--model", "default", "--data", str(data), "--out", str(tmp_path / "bad"),
                 "--neurons", "-2", "--no-progress"]) == 2
    line, = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("bertviz-lab corpus: error: neurons must be an int of 0 (keep none) to 10,000")
