"""BERT's relatives loaded natively: for RoBERTa, XLM-RoBERTa, DistilBERT and ELECTRA, a tiny random checkpoint saved
by transformers loads through bertviz_lab.load with the family's own names, and computes what transformers computes
(hidden states, attentions, MLM logits within 1e-5 in fp32); save_pretrained writes what transformers loads back; the
tokenizer gives AutoTokenizer's ids; traces, ablation and saliency run on each."""

from __future__ import annotations

import json

import pytest
import torch
import transformers
from family_models import FAMILIES, build_family_checkpoint, family_config, transformers_model
from hub_cache import perturbed
from safetensors.torch import load_file

import bertviz_lab
from bertviz_lab.model import (
    BERT,
    BERTConfig,
    BERTForMaskedLM,
    BERTForQuestionAnswering,
    BERTForTokenClassification,
)
from bertviz_lab.model.families import family_of
from bertviz_lab.model.family_tokenizer import TokenizerFast, load_tokenizer
from bertviz_lab.model.heads import BERTForReplacedTokenDetection
from bertviz_lab.model.tokenizer import BERTTokenizerFast
from bertviz_lab.trace import ablate, saliency, trace

TOLERANCE = 1e-5
TEXTS = ["The cat sat on the mat because it was warm.", "A dog barked."]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict:
    """One tiny masked-LM checkpoint per family, written by transformers."""
    root = tmp_path_factory.mktemp("families")
    return {family: build_family_checkpoint(family, root / family, seed=i) for i, family in enumerate(FAMILIES)}


def mask_text(tokenizer) -> str:
    return f"The cat sat on the {tokenizer.mask_token} because it was warm."


def padded_batch(tokenizer) -> dict[str, torch.Tensor]:
    """Two texts of different lengths, padded: padding changes RoBERTa's positions, so it is part of the check."""
    encoded = tokenizer([mask_text(tokenizer), TEXTS[1]], padding=True, return_tensors="pt")
    return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}


@pytest.mark.parametrize("family", FAMILIES)
def test_load_picks_the_family_and_matches_transformers(checkpoints, family):
    model, tokenizer = bertviz_lab.load(checkpoints[family])
    assert type(model) is BERTForMaskedLM and model.config.model_type == family
    assert model.load_report.missing == [] and model.load_report.unexpected == []
    reference = transformers_model(checkpoints[family])
    batch = padded_batch(tokenizer)
    with torch.no_grad(), trace(model, hidden_states=True) as recorded:
        logits = model(**batch)
        theirs = reference(**batch, output_hidden_states=True, output_attentions=True)
    assert len(recorded.hidden_states) == len(theirs.hidden_states) == 3
    for ours, expected in zip(recorded.hidden_states, theirs.hidden_states):
        assert (ours - expected).abs().max() <= TOLERANCE
    for ours, expected in zip(recorded.attentions, theirs.attentions):
        assert ours.shape == expected.shape and (ours - expected).abs().max() <= TOLERANCE
    assert (logits - theirs.logits).abs().max() <= TOLERANCE


@pytest.mark.parametrize("family", FAMILIES)
def test_save_pretrained_is_loaded_back_by_transformers(checkpoints, family, tmp_path):
    model, tokenizer = bertviz_lab.load(checkpoints[family])
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == family
    assert config["architectures"] == [family_of(family).architecture("BertForMaskedLM")]
    written = set(load_file(tmp_path / "model.safetensors"))
    assert written == set(load_file(checkpoints[family] / "model.safetensors"))  # the family's own names, all of them
    theirs = transformers.AutoModelForMaskedLM.from_pretrained(str(tmp_path)).eval()
    assert type(theirs).__name__ == config["architectures"][0]
    batch = padded_batch(tokenizer)
    with torch.no_grad():
        assert (theirs(**batch).logits - model(**batch)).abs().max() <= TOLERANCE


@pytest.mark.parametrize("family", FAMILIES)
def test_tokenizer_ids_equal_autotokenizer(checkpoints, family):
    _, ours = bertviz_lab.load(checkpoints[family])
    theirs = transformers.AutoTokenizer.from_pretrained(str(checkpoints[family]))
    assert isinstance(ours, TokenizerFast if family in ("roberta", "xlm-roberta") else BERTTokenizerFast)
    assert ours.mask_token == theirs.mask_token and ours.mask_token_id == theirs.mask_token_id
    assert (ours.cls_token_id, ours.sep_token_id, ours.pad_token_id) == \
        (theirs.cls_token_id, theirs.sep_token_id, theirs.pad_token_id)
    for text in [*TEXTS, mask_text(ours), "  Spaces,  twice!  Ünïcode too. "]:
        assert ours(text)["input_ids"] == theirs(text)["input_ids"], text
    assert ours(TEXTS[0], TEXTS[1])["input_ids"] == theirs(TEXTS[0], TEXTS[1])["input_ids"]
    ids = theirs(TEXTS[0])["input_ids"]
    assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=True)


def test_roberta_positions_start_after_the_padding_index(checkpoints):
    model, tokenizer = bertviz_lab.load(checkpoints["roberta"])
    assert model.config.pad_token_id == 1 and model.config.max_positions == model.config.max_position_embeddings - 2
    batch = padded_batch(tokenizer)
    ids = batch["input_ids"]
    positions = model.bert.embeddings.position_ids(ids, *ids.shape, past_length=0, device=ids.device)
    real = batch["attention_mask"].bool()
    expected = torch.where(real, real.long().cumsum(1) + 1, torch.ones_like(positions))
    assert torch.equal(positions, expected)


@pytest.mark.parametrize(("family", "head", "cls", "architecture"), [
    ("roberta", "model", BERT, "RobertaModel"),
    ("distilbert", "model", BERT, "DistilBertModel"),
    ("electra", "discriminator", BERTForReplacedTokenDetection, "ElectraForPreTraining"),
    ("xlm-roberta", "token", BERTForTokenClassification, "XLMRobertaForTokenClassification"),
    ("distilbert", "qa", BERTForQuestionAnswering, "DistilBertForQuestionAnswering"),
])
def test_backbones_and_the_electra_discriminator(family, head, cls, architecture, tmp_path):
    folder = build_family_checkpoint(family, tmp_path / "in", head=head, seed=3)
    model, tokenizer = bertviz_lab.load(folder)
    assert type(model) is cls and model.load_report.missing == []
    reference = transformers_model(folder, head)
    batch = padded_batch(tokenizer)
    with torch.no_grad():
        ours, theirs = model(**batch), reference(**batch)
    if cls is BERT:
        assert (ours.last_hidden_state - theirs.last_hidden_state).abs().max() <= TOLERANCE
        has_pooler = family == "roberta"
        assert (ours.pooler_output is not None) == has_pooler
        if has_pooler:
            assert (ours.pooler_output - theirs.pooler_output).abs().max() <= TOLERANCE
    elif cls is BERTForQuestionAnswering:
        assert (ours[0] - theirs.start_logits).abs().max() <= TOLERANCE
        assert (ours[1] - theirs.end_logits).abs().max() <= TOLERANCE
    else:
        assert ours.shape[:2] == batch["input_ids"].shape and (ours - theirs.logits).abs().max() <= TOLERANCE
    model.save_pretrained(tmp_path / "out")
    assert json.loads((tmp_path / "out" / "config.json").read_text())["architectures"] == [architecture]
    assert set(load_file(tmp_path / "out" / "model.safetensors")) == set(load_file(folder / "model.safetensors"))


@pytest.mark.parametrize("family", ["roberta", "distilbert", "electra"])
def test_a_relatives_text_classifier_loads_as_the_backbone(family, tmp_path):
    """Their text classifiers are shaped unlike BERT's: the backbone loads, the head is reported unused."""
    folder = build_family_checkpoint(family, tmp_path, head="sequence", seed=4)
    with pytest.warns(UserWarning, match="ignored"):
        model, tokenizer = bertviz_lab.load(folder)
    assert type(model) is BERT and model.load_report.missing == []
    assert all(name.startswith(("classifier.", "pre_classifier.")) for name in model.load_report.unexpected)
    reference = transformers.AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    batch = padded_batch(tokenizer)
    with torch.no_grad():
        assert (model(**batch).last_hidden_state - reference(**batch).last_hidden_state).abs().max() <= TOLERANCE


def test_distilbert_config_keys_both_ways(checkpoints):
    config = BERTConfig.from_pretrained(checkpoints["distilbert"])
    theirs = transformers.DistilBertConfig.from_pretrained(str(checkpoints["distilbert"]))
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.intermediate_size) == \
        (theirs.dim, theirs.n_layers, theirs.n_heads, theirs.hidden_dim)
    assert config.hidden_act == theirs.activation and config.add_pooling_layer is False
    data = config.to_dict()
    assert {"dim", "n_layers", "n_heads", "hidden_dim", "activation"} <= set(data)
    assert data["sinusoidal_pos_embds"] is False and "hidden_size" not in data
    assert BERTConfig.from_dict(data) == config


def test_electra_embeddings_are_projected_to_the_hidden_size(checkpoints):
    model, _ = bertviz_lab.load(checkpoints["electra"])
    embeddings = model.bert.embeddings
    assert embeddings.word_embeddings.embedding_dim == model.config.embedding_size == 16
    assert (embeddings.project.in_features, embeddings.project.out_features) == (16, model.config.hidden_size)


@pytest.mark.parametrize("family", FAMILIES)
def test_trace_ablation_and_saliency_run_on_each_family(checkpoints, family):
    model, tokenizer = bertviz_lab.load(checkpoints[family])
    encoded = tokenizer(mask_text(tokenizer), return_tensors="pt")
    inputs = {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}
    T = inputs["input_ids"].shape[1]
    with torch.no_grad(), trace(model, qkv=True) as recorded:
        before = model(**inputs)
    assert [a.shape for a in recorded.attentions] == [(1, 4, T, T)] * 2 and recorded.q[0].shape == (1, 4, T, 8)
    with torch.no_grad(), ablate(model, heads={(0, 1)}), trace(model, context=True) as ablated:
        after = model(**inputs)
    assert ablated.context[0][:, 1].abs().max() == 0 and not torch.allclose(before, after)
    position = inputs["input_ids"][0].tolist().index(tokenizer.mask_token_id)
    token = int(before[0, position].argmax())
    scores = saliency(model, inputs, ("mlm", position, token), method="integrated_gradients", steps=8,
                      baseline="mask", tokenizer=tokenizer)
    assert scores.shape == (1, T) and torch.isfinite(scores).all() and scores.abs().sum() > 0


def test_a_model_type_that_is_not_a_relative_is_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_embd": 64}))
    with pytest.raises(ValueError, match=r"model_type is 'gpt2'.*'roberta'.*bertviz_lab.views"):
        BERTConfig.from_pretrained(tmp_path)


def test_distilbert_with_sinusoidal_positions_both_ways(checkpoints, tmp_path):
    """sinusoidal_pos_embds: transformers stores the fixed sin/cos table as a weight; ours computes it."""
    _, tokenizer = bertviz_lab.load(checkpoints["distilbert"])  # its vocabulary
    config = family_config("distilbert", len(tokenizer), sinusoidal_pos_embds=True)
    torch.manual_seed(5)
    reference = transformers.DistilBertForMaskedLM(config).eval()
    table = reference.distilbert.embeddings.position_embeddings.weight.detach().clone()
    perturbed(reference, 5)
    with torch.no_grad():
        reference.distilbert.embeddings.position_embeddings.weight.copy_(table)  # fixed, as in a real checkpoint
    reference.save_pretrained(tmp_path / "in")
    model = BERTForMaskedLM.from_pretrained(tmp_path / "in")
    assert model.config.position_embedding_type == "sinusoidal" and model.load_report.unexpected == []
    batch = padded_batch(tokenizer)
    with torch.no_grad():
        assert (model(**batch) - reference(**batch).logits).abs().max() <= TOLERANCE
    model.save_pretrained(tmp_path / "out")
    assert json.loads((tmp_path / "out" / "config.json").read_text())["sinusoidal_pos_embds"] is True
    again = transformers.AutoModelForMaskedLM.from_pretrained(str(tmp_path / "out")).eval()
    with torch.no_grad():
        assert (again(**batch).logits - model(**batch)).abs().max() <= TOLERANCE


@pytest.mark.parametrize("family", ["roberta", "xlm-roberta"])
def test_tokenizer_save_pretrained_is_read_by_autotokenizer(checkpoints, family, tmp_path):
    _, ours = bertviz_lab.load(checkpoints[family])
    ours.save_pretrained(tmp_path)
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    again = load_tokenizer(tmp_path)
    assert type(again) is TokenizerFast and again.mask_token == theirs.mask_token == "<mask>"
    for text in [*TEXTS, mask_text(ours)]:
        assert again(text)["input_ids"] == theirs(text)["input_ids"] == ours(text)["input_ids"], text


@pytest.mark.parametrize("family", FAMILIES)
def test_a_corpus_run_on_each_family_equals_transformers_attentions(checkpoints, family, tmp_path):
    """The corpus's weight on the first token (<s> or [CLS]) and its self weight, from the family's own attentions."""
    from bertviz_lab.corpus import analyze

    model, tokenizer = bertviz_lab.load(checkpoints[family])
    corpus = analyze(model, tokenizer, TEXTS, tmp_path / "corpus", max_length=32, progress=False)
    stats = corpus.head_stats().set_index(["layer", "head"])
    reference = transformers_model(checkpoints[family])
    sums, queries = torch.zeros(2, 4, 2, dtype=torch.float64), 0
    for text in TEXTS:
        encoded = tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            out = reference(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"],
                            output_attentions=True)
        for layer, probs in enumerate(out.attentions):  # (1, heads, T, T)
            p = probs[0].double()
            sums[layer, :, 0] += p[:, :, 0].sum(-1)
            sums[layer, :, 1] += p.diagonal(0, -2, -1).sum(-1)
        queries += encoded["input_ids"].shape[1]
    for layer in range(2):
        for head in range(4):
            row = stats.loc[(layer, head)]
            assert row["queries"] == queries
            assert abs(row["cls"] - sums[layer, head, 0] / queries) <= 1e-4
            assert abs(row["self"] - sums[layer, head, 1] / queries) <= 1e-4
    with pytest.raises(ValueError, match=f"more than the {model.config.max_positions} tokens"):
        analyze(model, tokenizer, TEXTS, tmp_path / "too_long", max_length=model.config.max_positions + 1)
