"""saliency(): integrated gradients add up to f(x) - f(baseline), both methods agree with Captum, the model is left
as it was (also after an error), and bad arguments get errors that name them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from tiny_models import tiny_config
from trace_testlib import hook_count

from bertviz_lab.model import (
    BERTConfig,
    BERTForMaskedLM,
    BERTForNextSentencePrediction,
    BERTForPreTraining,
    BERTForQuestionAnswering,
    BERTForSequenceClassification,
    BERTForTokenClassification,
    create_bert_model,
)
from bertviz_lab.trace import saliency

captum_attr = pytest.importorskip("captum.attr")

PAD, CLS, SEP, MASK = 0, 1, 2, 3
IDS = dict(special_token_ids=(CLS, SEP), mask_token_id=MASK)
# target, the model class it fits, and how to read the same scores from that model's output
TARGETS = {
    "pretraining-nsp": ("nsp", BERTForPreTraining, lambda out: out[1][:, 0]),
    "pretraining-mlm": (("mlm", 2, 7), BERTForPreTraining, lambda out: out[0][:, 2, 7]),
    "nsp": ("nsp", BERTForNextSentencePrediction, lambda out: out[:, 0]),
    "mlm": (("mlm", 4, 11), BERTForMaskedLM, lambda out: out[:, 4, 11]),
    "class": (("class", 1), BERTForSequenceClassification, lambda out: out[:, 1]),
    "token": (("token", 3, 2), BERTForTokenClassification, lambda out: out[:, 3, 2]),
}


def config(**overrides) -> BERTConfig:
    """Tiny, with dropout (so eval mode matters) and weights wide enough to make the model clearly nonlinear."""
    values = dict(vocab_size=40, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                  max_position_embeddings=16, num_labels=3, initializer_range=0.2)
    return tiny_config(**{**values, **overrides})


def build(cls: type, dtype: torch.dtype = torch.float64, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return cls(config()).to(dtype).eval()


def batch() -> dict[str, torch.Tensor]:
    """A sentence pair and a shorter padded single sentence, [CLS]=1, [SEP]=2, [PAD]=0."""
    ids = torch.tensor([[CLS, 5, 6, 7, SEP, 8, 9, SEP], [CLS, 10, 11, 12, 13, SEP, PAD, PAD]])
    types = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1], [0] * 8])
    return {"input_ids": ids, "attention_mask": (ids != PAD).long(), "token_type_ids": types}


def baseline_ids(ids: torch.Tensor, fill: int) -> torch.Tensor:
    """Every token but [CLS], [SEP] and [PAD] replaced by `fill`."""
    keep = (ids == CLS) | (ids == SEP) | (ids == PAD)
    return torch.where(keep, ids, torch.full_like(ids, fill))


def scores(model: torch.nn.Module, read, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        return read(model(**inputs))


def captum_scores(model: torch.nn.Module, read, inputs: dict[str, torch.Tensor], method: str,
                  fill: int) -> torch.Tensor:
    """The same attribution by Captum on the word embeddings, summed over the hidden dimension."""
    embed = model.get_input_embeddings()

    def forward(embeds, attention_mask, token_type_ids):
        return read(model(inputs_embeds=embeds, attention_mask=attention_mask, token_type_ids=token_type_ids))

    x = embed(inputs["input_ids"]).detach().requires_grad_()
    extra = (inputs["attention_mask"], inputs["token_type_ids"])
    if method == "gradient_x_input":
        attributions = captum_attr.InputXGradient(forward).attribute(x, additional_forward_args=extra)
    else:
        base = embed(baseline_ids(inputs["input_ids"], fill)).detach()
        attributions = captum_attr.IntegratedGradients(forward).attribute(
            x, baselines=base, additional_forward_args=extra, n_steps=64, method="gausslegendre")
    return attributions.sum(-1).detach()


def model_state(model: torch.nn.Module) -> dict:
    return {
        "modes": [m.training for m in model.modules()],
        "hooks": hook_count(model),
        "requires_grad": [p.requires_grad for p in model.parameters()],
        "grads": [None if p.grad is None else p.grad.clone() for p in model.parameters()],
        "values": [p.detach().clone() for p in model.parameters()],
    }


def assert_same_state(before: dict, after: dict) -> None:
    assert after["modes"] == before["modes"]
    assert after["hooks"] == before["hooks"]
    assert after["requires_grad"] == before["requires_grad"]
    for old, new in zip(before["grads"], after["grads"]):
        assert (old is None and new is None) or torch.equal(old, new)
    assert all(torch.equal(old, new) for old, new in zip(before["values"], after["values"]))


# integrated gradients: completeness --------------------------------------------------------------------
@pytest.mark.parametrize("baseline,fill", [("pad", PAD), ("mask", MASK)])
@pytest.mark.parametrize("name", list(TARGETS))
def test_integrated_gradients_add_up_to_the_change_from_the_baseline(name, baseline, fill):
    target, cls, read = TARGETS[name]
    model, inputs = build(cls), batch()
    attributions = saliency(model, inputs, target, steps=64, baseline=baseline, **IDS)
    base_inputs = {**inputs, "input_ids": baseline_ids(inputs["input_ids"], fill)}
    change = scores(model, read, inputs) - scores(model, read, base_inputs)
    assert change.abs().min() > 1e-3  # a test with something to add up
    torch.testing.assert_close(attributions.sum(-1).double(), change, rtol=0.01, atol=1e-6)


def test_special_tokens_and_padding_score_zero_and_the_result_is_a_detached_float32_cpu_tensor():
    model, inputs = build(BERTForPreTraining), batch()
    attributions = saliency(model, inputs, "nsp", **IDS)
    assert attributions.shape == (2, 8) and attributions.dtype == torch.float32
    assert attributions.device.type == "cpu" and not attributions.requires_grad
    kept = baseline_ids(inputs["input_ids"], -1) != -1
    assert torch.all(attributions[kept] == 0) and torch.all(attributions[~kept] != 0)


# agreement with Captum ---------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["integrated_gradients", "gradient_x_input"])
@pytest.mark.parametrize("name", list(TARGETS))
def test_both_methods_equal_captum(name, method):
    target, cls, read = TARGETS[name]
    model, inputs = build(cls), batch()
    ours = saliency(model, inputs, target, method=method, **IDS)
    torch.testing.assert_close(ours.double(), captum_scores(model, read, inputs, method, PAD), rtol=0, atol=1e-4)


@pytest.mark.parametrize("baseline,fill", [("pad", PAD), ("mask", MASK)])
def test_float32_integrated_gradients_equal_captum(baseline, fill):
    model, inputs = build(BERTForPreTraining, torch.float32), batch()
    ours = saliency(model, inputs, ("mlm", 2, 7), baseline=baseline, **IDS)
    expected = captum_scores(model, TARGETS["pretraining-mlm"][2], inputs, "integrated_gradients", fill)
    torch.testing.assert_close(ours, expected.float(), rtol=0, atol=1e-4)


@pytest.mark.parametrize("method", ["integrated_gradients", "gradient_x_input"])
def test_chunking_and_a_callable_target_change_nothing(method):
    model, inputs = build(BERTForPreTraining), batch()
    whole = saliency(model, inputs, "nsp", method=method, steps=16, **IDS)
    chunked = saliency(model, inputs, lambda out: out[1][:, 0], method=method, steps=16, internal_batch_size=5,
                       **IDS)
    torch.testing.assert_close(chunked, whole, rtol=0, atol=1e-6)


def test_token_ids_from_a_tokenizer_or_special_tokens_mask_equal_explicit_ones():
    model, inputs = build(BERTForPreTraining), batch()
    expected = saliency(model, inputs, "nsp", baseline="mask", **IDS)
    tokenizer = SimpleNamespace(cls_token_id=CLS, sep_token_id=SEP, mask_token_id=MASK, pad_token_id=PAD)
    torch.testing.assert_close(saliency(model, inputs, "nsp", baseline="mask", tokenizer=tokenizer), expected)
    marked = {**inputs, "special_tokens_mask": baseline_ids(inputs["input_ids"], -1).ne(-1).long()}
    from_mask = saliency(model, marked, "nsp", baseline="mask", special_token_ids=(), mask_token_id=MASK)
    torch.testing.assert_close(from_mask, expected)


def test_a_callable_target_reads_any_output_such_as_question_answering_spans():
    model, inputs = build(BERTForQuestionAnswering), batch()
    ours = saliency(model, inputs, lambda out: out[0][:, 3], method="gradient_x_input", **IDS)
    expected = captum_scores(model, lambda out: out[0][:, 3], inputs, "gradient_x_input", PAD)
    torch.testing.assert_close(ours.double(), expected, rtol=0, atol=1e-4)


def test_results_do_not_depend_on_the_callers_grad_mode():
    model, inputs = build(BERTForSequenceClassification), batch()
    expected = saliency(model, inputs, ("class", 0), steps=8, **IDS)
    with torch.no_grad():
        torch.testing.assert_close(saliency(model, inputs, ("class", 0), steps=8, **IDS), expected)
    with torch.inference_mode():
        frozen = {k: v.clone() for k, v in batch().items()}
        torch.testing.assert_close(saliency(model, frozen, ("class", 0), steps=8, **IDS), expected)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_runs_on_the_models_device():
    model, inputs = build(BERTForPreTraining), batch()
    expected = saliency(model, inputs, ("mlm", 2, 7), **IDS)
    on_gpu = saliency(model.to("cuda"), {k: v.cuda() for k, v in inputs.items()}, ("mlm", 2, 7), **IDS)
    assert on_gpu.device.type == "cpu"
    torch.testing.assert_close(on_gpu, expected, rtol=0, atol=1e-6)


# the model is left as it was ---------------------------------------------------------------------------
def unusual_state(model: torch.nn.Module) -> torch.nn.Module:
    """Training mode but one module in eval, one frozen parameter, one parameter holding a gradient."""
    model.train()
    model.bert.embeddings.eval()
    model.bert.pooler.dense.weight.requires_grad_(False)
    model.bert.embeddings.word_embeddings.weight.grad = torch.ones_like(model.bert.embeddings.word_embeddings.weight)
    return model


@pytest.mark.parametrize("method", ["integrated_gradients", "gradient_x_input"])
def test_the_model_is_left_as_it_was(method):
    model = unusual_state(build(BERTForPreTraining))
    before = model_state(model)
    first = saliency(model, batch(), "nsp", method=method, steps=4, **IDS)
    assert_same_state(before, model_state(model))
    torch.testing.assert_close(saliency(model, batch(), "nsp", method=method, steps=4, **IDS), first)  # eval inside


@pytest.mark.parametrize("target", [("mlm", 8, 7), ("mlm", 2, 40), lambda out: out[0][:, 0, 0, 0]])
def test_the_model_is_left_as_it_was_after_an_error_inside(target):
    model = unusual_state(build(BERTForPreTraining))
    before = model_state(model)
    with pytest.raises((ValueError, IndexError)):
        saliency(model, batch(), target, steps=4, **IDS)
    assert_same_state(before, model_state(model))


# errors ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,error,words", [
    (dict(method="occlusion"), ValueError, "method must be one of .*'occlusion'"),
    (dict(method=None), TypeError, "method must be one of"),
    (dict(baseline="zero"), ValueError, "baseline must be one of .*'zero'"),
    (dict(steps=0), ValueError, "steps must be a positive int .*got 0"),
    (dict(steps=2.5), TypeError, "steps must be a positive int, got float 2.5"),
    (dict(internal_batch_size=0), ValueError, "internal_batch_size"),
    (dict(target=("mlm", 8, 7)), ValueError, r"position 8 is out of range \[0, 8\)"),
    (dict(target=("mlm", 2, 40)), ValueError, r"token id 40 is out of range \[0, 40\)"),
    (dict(target=("mlm", 2, -1)), ValueError, r"token id -1 is out of range"),
    (dict(target=("mlm", "2", 7)), TypeError, "position must be an int, got str '2'"),
    (dict(target=("mlm", 2)), ValueError, r"target must be .*got \('mlm', 2\)"),
    (dict(target="mlm"), ValueError, "target must be a callable, 'nsp'"),
    (dict(target=3), TypeError, "target must be a callable"),
    (dict(target=("class", 0)), ValueError, "target \\('class', 0\\) needs class_logits, but BERTForPreTraining "
                                            r"returns mlm_logits \(batch, 8, 40\), nsp_logits \(batch, 2\)"),
    (dict(target=lambda out: out[1]), ValueError, r"one score per row .*\(batch,\), got \(\d+, 2\)"),
    (dict(mask_token_id=40, baseline="mask"), ValueError, "mask_token_id 40 is out of range"),
    (dict(special_token_ids=(1, "2")), TypeError, "special_token_ids must hold int token ids"),
])
def test_bad_arguments_are_named(kwargs, error, words):
    arguments = {"target": "nsp", **IDS, **kwargs}
    with pytest.raises(error, match=words):
        saliency(build(BERTForPreTraining), batch(), **arguments)


@pytest.mark.parametrize("cls,target,words", [
    (BERTForMaskedLM, "nsp", r"target 'nsp' needs nsp_logits, but BERTForMaskedLM returns mlm_logits \(batch, 8, 40\)"),
    (BERTForNextSentencePrediction, ("token", 1, 0), r"needs token_logits, .* returns nsp_logits \(batch, 2\)"),
    (BERTForTokenClassification, ("class", 0), r"needs class_logits, .* returns token_logits \(batch, 8, 3\)"),
    (BERTForSequenceClassification, ("class", 3), r"label 3 is out of range \[0, 3\)"),
    (BERTForQuestionAnswering, "nsp", r"returns start_logits \(batch, 8\), end_logits \(batch, 8\)"),
])
def test_a_target_the_model_cannot_give_names_what_it_returns(cls, target, words):
    with pytest.raises(ValueError, match=words):
        saliency(build(cls), batch(), target, **IDS)


@pytest.mark.parametrize("inputs,error,words", [
    ({"attention_mask": torch.ones(1, 3, dtype=torch.long)}, ValueError, r"must hold input_ids .*\['attention_mask'\]"),
    ({"input_ids": [[1, 5, 2]]}, ValueError, "must hold input_ids as a .* tensor, got list"),
    ({"input_ids": torch.tensor([[1.0, 5.0, 2.0]])}, TypeError, "input_ids must be an integer tensor"),
    ({"input_ids": torch.tensor([1, 5, 2])}, ValueError, r"\(batch, seq_len\) tensor, got shape \(3,\)"),
    ({"input_ids": torch.tensor([[1, 45, 2]])}, ValueError, r"ids in \[1, 45\] but the vocabulary has 40"),
    ({"input_ids": torch.tensor([[1, 5, 2]]), "inputs_embeds": torch.zeros(1, 3, 32)}, ValueError, "inputs_embeds"),
    ([[1, 5, 2]], TypeError, "inputs must be the tokenizer's dict"),
])
def test_bad_inputs_are_named(inputs, error, words):
    with pytest.raises(error, match=words):
        saliency(build(BERTForPreTraining), inputs, "nsp", **IDS)


def test_a_model_whose_forward_takes_no_inputs_embeds_is_named():
    torch.manual_seed(0)
    model = create_bert_model(vocab_size=40, max_seq_length=16, d_model=32, num_heads=2, d_ff=64, num_layers=1)
    with pytest.raises(TypeError, match="BERTWithDictOutput.forward takes no inputs_embeds.*its .model"):
        saliency(model, batch(), "nsp", **IDS)
    assert saliency(model.model, batch(), "nsp", steps=2, **IDS).shape == (2, 8)
