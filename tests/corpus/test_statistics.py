"""head_stats() and the per-text values equal the statistics computed independently, in NumPy, from transformers'
`output_attentions=True` on the same texts (each text alone, no padding), on the packaged MiniLM."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
import torch
import transformers

from bertviz_lab.corpus import STATISTICS
from bertviz_lab.model import BERT_Weights


def punct(token: str) -> bool:
    return token not in ("[CLS]", "[SEP]") and bool(token) and all(
        unicodedata.category(ch).startswith("P") for ch in token)


def reference_sums(attentions: list[np.ndarray], tokens: list[str]) -> np.ndarray:
    """(layers, heads, 7) sums over the queries of one text, from its (heads, T, T) maps."""
    T = len(tokens)
    sep = np.array([t == "[SEP]" for t in tokens], dtype=float)
    pun = np.array([punct(t) for t in tokens], dtype=float)
    out = []
    for a in attentions:  # (H, T, T)
        a = a.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            entropy = -np.where(a > 0, a * np.log(a), 0.0).sum(-1)
        prev = np.zeros(a.shape[:2])
        nxt = np.zeros(a.shape[:2])
        for i in range(T):
            prev[:, i] = a[:, i, i - 1] if i > 0 else 0.0
            nxt[:, i] = a[:, i, i + 1] if i + 1 < T else 0.0
        own = np.stack([a[:, i, i] for i in range(T)], axis=1)
        per_query = np.stack([entropy, a[:, :, 0], a @ sep, own, prev, nxt, a @ pun], axis=-1)  # (H, T, 7)
        out.append(per_query.sum(1))
    return np.stack(out)


@pytest.fixture(scope="module")
def reference(small_texts, minilm):
    """Per text: (layers, heads, 7) sums and the query count, from transformers' eager attention on the ids the
    package's tokenizer gives (the tokenizer itself is checked against transformers in tests/model)."""
    _, tokenizer = minilm
    model = transformers.BertModel.from_pretrained(str(BERT_Weights.DEFAULT.path), attn_implementation="eager").eval()
    sums, counts = [], []
    for item in small_texts:
        a, b = (item, None) if isinstance(item, str) else item
        enc = tokenizer(a, b, truncation=True, max_length=128, return_tensors="pt")
        with torch.no_grad():
            attentions = model(input_ids=enc["input_ids"], token_type_ids=enc["token_type_ids"],
                               output_attentions=True).attentions
        tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0].tolist())
        sums.append(reference_sums([x[0].numpy() for x in attentions], tokens))
        counts.append(len(tokens))
    return np.stack(sums), np.array(counts)


def test_head_stats_equal_transformers_output_attentions(small_corpus, reference):
    sums, counts = reference
    table = small_corpus.head_stats()
    assert list(table.columns) == ["layer", "head", *STATISTICS, "queries"]
    assert len(table) == 6 * 12 and (table["queries"] == counts.sum()).all()
    expected = sums.sum(0) / counts.sum()  # (layers, heads, 7): token-weighted means
    got = table.sort_values(["layer", "head"])[list(STATISTICS)].to_numpy().reshape(6, 12, 7)
    assert np.abs(got - expected).max() <= 1e-4
    assert expected[..., 1].max() > 0.5 and expected[..., 6].max() > 0.1  # heads that do look at [CLS], punctuation


def test_per_text_values_equal_the_reference(small_corpus, reference):
    sums, counts = reference
    rows = small_corpus.sql("select * from text_stats order by text_id, layer, head")
    got = rows[list(STATISTICS)].to_numpy().reshape(len(counts), 6, 12, 7)
    assert np.abs(got - sums / counts[:, None, None, None]).max() <= 1e-4
    assert (rows["queries"].to_numpy().reshape(len(counts), 72)[:, 0] == counts).all()


def test_top_texts_ranks_the_per_text_values(small_corpus, reference):
    sums, counts = reference
    values = sums[:, 2, 5, STATISTICS.index("punct")] / counts
    top = small_corpus.top_texts(2, 5, "punct", k=4)
    assert list(top.columns) == ["text_id", "text", "value", "queries"]
    assert top["value"].to_numpy() == pytest.approx(np.sort(values)[::-1][:4], abs=1e-5)
    bottom = small_corpus.top_texts(2, 5, "punct", k=3, largest=False)
    assert bottom["value"].to_numpy() == pytest.approx(np.sort(values)[:3], abs=1e-5)
    first = int(top["text_id"][0])
    a, b = small_corpus.text(first)
    assert top["text"][0] == (a if b is None else f"{a} [SEP] {b}")


def test_tokens_and_texts_are_what_the_model_saw(small_corpus, small_texts, minilm):
    _, tokenizer = minilm
    for text_id in (0, 31):
        item = small_texts[text_id]
        a, b = (item, None) if isinstance(item, str) else item
        assert small_corpus.text(text_id) == (a, b)
        ids = tokenizer.encode(a, b)
        assert small_corpus.tokens(text_id) == tokenizer.convert_ids_to_tokens(ids)
    assert small_corpus.num_texts == len(small_texts) and small_corpus.num_heads == 12
    assert small_corpus.layers == list(range(6)) and small_corpus.model_name == "default"


@pytest.mark.usefixtures("avx2_kernels")
def test_statistics_from_the_attention_pass_equal_those_from_the_probabilities(minilm, small_texts, tmp_path,
                                                                              monkeypatch):
    """On the AVX2 kernels a layer answers the statistics request from its attention pass, and the last analysed
    layer from its queries and keys alone (no layer after it runs); with the written-out attention and the
    reductions in PyTorch, from the probabilities: the same numbers every way, and the model's backends as they
    were."""
    from bertviz_lab import kernels
    from bertviz_lab.corpus import analyze
    from bertviz_lab.kernels import avx2

    model, tokenizer = minilm
    calls = []
    for name in ("attention_statistics", "attention_with_statistics"):
        def spy(*args, kernel=getattr(avx2, name), name=name):
            calls.append((name, args[0].shape[1]))
            return kernel(*args)

        monkeypatch.setattr(avx2, name, spy)
    options = dict(layers=[1, 3], heads=[0, 5, 11], batch_size=7, progress=False)
    backends = [layer.attention.self.attention_backend for layer in model.encoder.layer]
    ran = []
    watch = model.encoder.layer[4].register_forward_pre_hook(lambda module, args: ran.append(module))
    try:
        with kernels.override(model, attention="avx2", cpu_gemm="avx2"):
            fused = analyze(model, tokenizer, small_texts, tmp_path / "fused", **options).head_stats()
    finally:
        watch.remove()
    # 5 batches: layer 1 in its attention pass, layer 3 from q and k; every head, the three kept afterwards
    assert sorted(set(calls)) == [("attention_statistics", 12), ("attention_with_statistics", 12)]
    assert len(calls) == 10 and ran == []
    calls.clear()
    with kernels.override(model, attention="eager"), kernels.disabled():
        plain = analyze(model, tokenizer, small_texts, tmp_path / "plain", **options).head_stats()
    assert calls == []
    assert list(fused["head"][:3]) == [0, 5, 11] and (fused["queries"] == plain["queries"]).all()
    assert np.abs(fused[list(STATISTICS)].to_numpy() - plain[list(STATISTICS)].to_numpy()).max() <= 1e-5
    assert [layer.attention.self.attention_backend for layer in model.encoder.layer] == backends


def test_the_punctuation_table_is_is_punctuation_token_by_token(minilm):
    """The whole-vocabulary pass gives what `is_punctuation` gives each token, on the real vocabulary and on tokens
    made to trip a regular expression (class metacharacters, line breaks, empty and special tokens)."""
    from bertviz_lab.corpus.statistics import is_punctuation, punctuation_table

    _, tokenizer = minilm
    vocab = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    table = punctuation_table(vocab, tokenizer.all_special_ids)
    expected = [is_punctuation(t) and i not in tokenizer.all_special_ids for i, t in enumerate(vocab)]
    assert table.tolist() == expected and 100 < sum(expected) < 1000
    odd = ["]", "^", "-", "\\", "[-]", "a-b", "", "##.", "...", "«»", "x", "[CLS]", "¿?", "\u2014"]
    assert punctuation_table(odd, [11]).tolist() == [is_punctuation(t) and i != 11 for i, t in enumerate(odd)]
    broken = ["!", "a\nb", "?\n!", "c"]  # a line break inside a token: token by token
    assert punctuation_table(broken, []).tolist() == [True, False, False, False]
    assert punctuation_table([], []).tolist() == []
