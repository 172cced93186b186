"""The seven task heads: parity with their transformers twins both ways (logits and losses), weight tying,
the pretraining / causal-LM / QA helper APIs, the *_from_text helpers, the 14 factories and create_bert_model."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F
import transformers
from tiny_models import tiny_config, tiny_fields

from bertviz_lab.model import factory as factory_module
from bertviz_lab.model import pretraining as P
from bertviz_lab.model.config import BERTConfig
from bertviz_lab.model.heads import (
    BERTForCausalLM,
    BERTForMaskedLM,
    BERTForNextSentencePrediction,
    BERTForPreTraining,
    BERTForQuestionAnswering,
    BERTForSequenceClassification,
    BERTForTokenClassification,
)

transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()

ATOL = 1e-5
# The heads' overrides of the shared tiny config: 99 tokens, 32 wide, a 37-wide feed-forward, 64 positions.
SIZES = dict(vocab_size=99, hidden_size=32, intermediate_size=37, max_position_embeddings=64)
B, T = 3, 11


# the seven twins -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    name: str
    ours: type
    hf: type
    config: dict[str, Any]
    hf_outputs: Callable[[Any], tuple[torch.Tensor, ...]]  # HF output -> logits in our order


def _as_tuple(out: Any) -> tuple[torch.Tensor, ...]:
    return out if isinstance(out, tuple) else (out,)


CASES = [
    Case("pretraining", BERTForPreTraining, transformers.BertForPreTraining, {},
         lambda o: (o.prediction_logits, o.seq_relationship_logits)),
    Case("masked_lm", BERTForMaskedLM, transformers.BertForMaskedLM, {}, lambda o: (o.logits,)),
    Case("causal_lm", BERTForCausalLM, transformers.BertLMHeadModel, {"is_decoder": True}, lambda o: (o.logits,)),
    Case("nsp", BERTForNextSentencePrediction, transformers.BertForNextSentencePrediction, {}, lambda o: (o.logits,)),
    Case("seq_cls", BERTForSequenceClassification, transformers.BertForSequenceClassification, {"num_labels": 3},
         lambda o: (o.logits,)),
    Case("seq_regression", BERTForSequenceClassification, transformers.BertForSequenceClassification,
         {"num_labels": 1}, lambda o: (o.logits,)),
    Case("token_cls", BERTForTokenClassification, transformers.BertForTokenClassification, {"num_labels": 5},
         lambda o: (o.logits,)),
    Case("qa", BERTForQuestionAnswering, transformers.BertForQuestionAnswering, {"num_labels": 2},
         lambda o: (o.start_logits, o.end_logits)),
]
CASE_IDS = [case.name for case in CASES]


def _perturb(model: torch.nn.Module, seed: int) -> None:
    """Move every parameter away from its initial value (zero biases, unit LayerNorms) so parity means something."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():  # tied parameters appear once
            parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.05)


def _inputs(vocab_size: int = SIZES["vocab_size"], seed: int = 0) -> dict[str, torch.Tensor]:
    """A padded batch: row 1 has 4 padding positions, row 2 has 7."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, vocab_size, (B, T), generator=generator)
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1, -4:] = 0
    attention_mask[2, -7:] = 0
    input_ids = input_ids.masked_fill(attention_mask == 0, 0)
    token_type_ids = torch.zeros(B, T, dtype=torch.long)
    token_type_ids[:, 3:6] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}


def _ours_outputs(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        return _as_tuple(model(**inputs))


def _hf_outputs(case: Case, model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        return case.hf_outputs(model(**inputs))


def _assert_close(ours: tuple[torch.Tensor, ...], theirs: tuple[torch.Tensor, ...]) -> None:
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


@pytest.fixture(scope="module", params=CASES, ids=CASE_IDS)
def hf_pair(request, tmp_path_factory):
    """(case, HF model with perturbed weights, our model loaded from the HF checkpoint)."""
    case: Case = request.param
    torch.manual_seed(1)
    hf = case.hf(transformers.BertConfig(**tiny_fields(**SIZES, **case.config)))
    _perturb(hf, seed=2)
    hf.eval()
    directory = tmp_path_factory.mktemp(f"hf_{case.name}")
    hf.save_pretrained(directory)
    ours = case.ours.from_pretrained(directory)
    return case, hf, ours


@pytest.fixture(scope="module", params=CASES, ids=CASE_IDS)
def ours_saved(request, tmp_path_factory):
    """(case, our model with perturbed weights, the HF model loaded from our checkpoint, HF loading info)."""
    case: Case = request.param
    torch.manual_seed(3)
    ours = case.ours(tiny_config(**SIZES, **case.config))
    _perturb(ours, seed=4)
    ours.eval()
    directory = tmp_path_factory.mktemp(f"ours_{case.name}")
    ours.save_pretrained(directory)
    hf, info = case.hf.from_pretrained(directory, output_loading_info=True)
    return case, ours, hf.eval(), info


# parity: HF checkpoint -> ours -------------------------------------------------------------------------
def test_hf_checkpoint_loads_into_ours_completely(hf_pair):
    _, _, ours = hf_pair
    assert ours.load_report.missing == [] and ours.load_report.unexpected == []
    assert not ours.training


def test_logits_match_hf_from_hf_checkpoint(hf_pair):
    case, hf, ours = hf_pair
    inputs = _inputs()
    _assert_close(_ours_outputs(ours, inputs), _hf_outputs(case, hf, inputs))


# parity: our checkpoint -> HF ------------------------------------------------------------------------
def test_our_checkpoint_loads_in_transformers_without_missing_keys(ours_saved):
    case, _, hf, info = ours_saved
    assert type(hf) is case.hf
    assert not info["missing_keys"], info
    assert not info["unexpected_keys"], info
    assert not info["mismatched_keys"], info
    assert not info.get("error_msgs"), info


def test_logits_match_hf_from_our_checkpoint(ours_saved):
    case, ours, hf, _ = ours_saved
    inputs = _inputs(seed=5)
    _assert_close(_ours_outputs(ours, inputs), _hf_outputs(case, hf, inputs))


def test_saved_config_names_the_transformers_architecture(ours_saved):
    case, ours, hf, _ = ours_saved
    assert hf.config.architectures == [case.hf.__name__] == [ours.hf_architecture]


# losses equal HF's labels= losses ----------------------------------------------------------------------
def _labels_for(case: Case, inputs: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], Callable]:
    """(HF keyword labels, function computing our loss) for one case."""
    generator = torch.Generator().manual_seed(7)
    mask = inputs["attention_mask"]
    token_labels = torch.randint(0, SIZES["vocab_size"], (B, T), generator=generator)
    token_labels = token_labels.masked_fill(torch.rand(B, T, generator=generator) < 0.5, P.IGNORE_INDEX)
    token_labels = token_labels.masked_fill(mask == 0, P.IGNORE_INDEX)
    token_labels[0, 1] = 5  # at least one labelled token
    if case.name == "pretraining":
        nsp = torch.tensor([0, 1, 1])
        return ({"labels": token_labels, "next_sentence_label": nsp},
                lambda m: m.get_loss(token_labels, nsp, **inputs))
    if case.name == "masked_lm":
        return {"labels": token_labels}, lambda m: m.get_loss(token_labels, **inputs)
    if case.name == "causal_lm":
        labels = inputs["input_ids"].masked_fill(mask == 0, P.IGNORE_INDEX)
        return {"labels": labels}, lambda m: m.get_loss(labels, **inputs)
    if case.name == "nsp":
        nsp = torch.tensor([1, 0, 1])
        return {"labels": nsp}, lambda m: m.get_loss(nsp, **inputs)
    if case.name == "seq_cls":
        labels = torch.tensor([2, 0, 1])
        return {"labels": labels}, lambda m: m.get_loss(labels, **inputs)
    if case.name == "seq_regression":
        labels = torch.tensor([0.5, -1.25, 2.0])
        return {"labels": labels}, lambda m: m.get_loss(labels, **inputs)
    if case.name == "token_cls":
        labels = torch.randint(0, 5, (B, T), generator=generator).masked_fill(mask == 0, P.IGNORE_INDEX)
        return {"labels": labels}, lambda m: m.get_loss(labels, **inputs)
    if case.name == "qa":
        # the last example's end lies outside the sequence: clamped and ignored, as in transformers
        start, end = torch.tensor([1, 0, 2]), torch.tensor([4, 3, T + 5])
        return ({"start_positions": start, "end_positions": end},
                lambda m: m.get_loss(start, end, **inputs))
    raise AssertionError(case.name)


def test_loss_matches_hf_labels_loss(hf_pair):
    case, hf, ours = hf_pair
    inputs = _inputs(seed=11)
    hf_labels, our_loss = _labels_for(case, inputs)
    with torch.no_grad():
        expected = hf(**inputs, **hf_labels).loss
        got = our_loss(ours)
    assert torch.isfinite(got)
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)


# tied weights ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [BERTForPreTraining, BERTForMaskedLM])
def test_decoder_is_the_word_embedding_when_tied(cls, tmp_path):
    model = cls(tiny_config(**SIZES))
    predictions = model.cls.predictions
    assert predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert predictions.decoder.bias is predictions.bias
    assert model.get_output_embeddings() is predictions.decoder
    model.save_pretrained(tmp_path)
    loaded = cls.from_pretrained(tmp_path)
    assert loaded.cls.predictions.decoder.weight is loaded.bert.embeddings.word_embeddings.weight
    assert loaded.cls.predictions.decoder.bias is loaded.cls.predictions.bias
    torch.testing.assert_close(loaded.cls.predictions.decoder.weight, predictions.decoder.weight)


def test_causal_lm_decoder_is_tied_too():
    model = BERTForCausalLM(tiny_config(**SIZES, is_decoder=True))
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert model.cls.predictions.decoder.bias is model.cls.predictions.bias


def test_untied_decoder_is_separate_and_survives_round_trips(tmp_path):
    model = BERTForMaskedLM(tiny_config(**SIZES, tie_word_embedding=False))
    _perturb(model, seed=8)
    model.eval()
    decoder, embedding = model.cls.predictions.decoder.weight, model.bert.embeddings.word_embeddings.weight
    assert decoder is not embedding
    assert not torch.equal(decoder, embedding)
    assert model.cls.predictions.decoder.bias is model.cls.predictions.bias
    # a training step moves only the one it reaches
    before = embedding.detach().clone()
    with torch.no_grad():
        decoder.add_(1.0)
    assert torch.equal(embedding, before)

    model.save_pretrained(tmp_path / "ours")
    loaded = BERTForMaskedLM.from_pretrained(tmp_path / "ours")
    assert loaded.config.tie_word_embedding is False
    assert loaded.load_report.missing == [] and loaded.load_report.unexpected == []
    assert loaded.cls.predictions.decoder.weight is not loaded.bert.embeddings.word_embeddings.weight
    torch.testing.assert_close(loaded.cls.predictions.decoder.weight, decoder)
    torch.testing.assert_close(loaded.bert.embeddings.word_embeddings.weight, embedding)
    inputs = _inputs()
    _assert_close(_ours_outputs(loaded, inputs), _ours_outputs(model, inputs))



def test_untied_hf_checkpoint_loads_into_ours(tmp_path):
    """transformers 5 keeps decoder.bias apart from cls.predictions.bias when untied; the one it uses must win."""
    torch.manual_seed(9)
    hf = transformers.BertForMaskedLM(transformers.BertConfig(**tiny_fields(**SIZES, tie_word_embeddings=False)))
    _perturb(hf, seed=10)
    hf.eval()
    predictions = hf.cls.predictions
    assert not torch.equal(predictions.decoder.bias, predictions.bias)  # distinct values: a wrong pick shows
    hf.save_pretrained(tmp_path)
    ours = BERTForMaskedLM.from_pretrained(tmp_path)
    assert ours.config.tie_word_embedding is False
    assert ours.cls.predictions.decoder.weight is not ours.bert.embeddings.word_embeddings.weight
    inputs = _inputs()
    _assert_close(_ours_outputs(ours, inputs), (hf(**inputs).logits.detach(),))


def test_untied_checkpoint_loads_in_transformers(tmp_path):
    model = BERTForMaskedLM(tiny_config(**SIZES, tie_word_embedding=False))
    _perturb(model, seed=12)
    model.eval()
    model.save_pretrained(tmp_path)
    hf, info = transformers.BertForMaskedLM.from_pretrained(tmp_path, output_loading_info=True)
    assert hf.cls.predictions.decoder.weight is not hf.bert.embeddings.word_embeddings.weight
    inputs = _inputs()
    _assert_close(_ours_outputs(model, inputs), (hf.eval()(**inputs).logits.detach(),))
    assert not info["missing_keys"] and not info["unexpected_keys"], info


# BERTForPreTraining API ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_pretraining_model():
    torch.manual_seed(21)
    model = BERTForPreTraining(tiny_config(**SIZES))
    _perturb(model, seed=22)
    return model.eval()


def _mlm_labels(input_ids: torch.Tensor) -> torch.Tensor:
    labels = torch.full_like(input_ids, P.IGNORE_INDEX)
    labels[0, 2], labels[1, 1], labels[2, 3] = 17, 42, 7
    return labels


def test_pretraining_forward_shapes(tiny_pretraining_model):
    inputs = _inputs()
    scores, nsp = tiny_pretraining_model(**inputs)
    assert scores.shape == (B, T, SIZES["vocab_size"])
    assert nsp.shape == (B, 2)


def test_pretraining_losses_are_the_weighted_sum_of_the_parts(tiny_pretraining_model):
    inputs = _inputs()
    mlm_labels, nsp_labels = _mlm_labels(inputs["input_ids"]), torch.tensor([0, 1, 0])
    with torch.no_grad():
        scores, nsp = tiny_pretraining_model(**inputs)
        mlm = tiny_pretraining_model.get_mlm_loss(mlm_labels, **inputs)
        nsp_loss = tiny_pretraining_model.get_nsp_loss(nsp_labels, **inputs)
        total = tiny_pretraining_model.get_loss(mlm_labels, nsp_labels, **inputs)
        weighted = tiny_pretraining_model.get_loss(mlm_labels, nsp_labels, **inputs, mlm_weight=0.3, nsp_weight=2.5)
    expected_mlm = F.cross_entropy(scores.reshape(-1, scores.shape[-1]), mlm_labels.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(mlm, expected_mlm, atol=ATOL, rtol=0)
    torch.testing.assert_close(nsp_loss, F.cross_entropy(nsp, nsp_labels), atol=ATOL, rtol=0)
    torch.testing.assert_close(total, mlm + nsp_loss, atol=ATOL, rtol=0)
    torch.testing.assert_close(weighted, 0.3 * mlm + 2.5 * nsp_loss, atol=ATOL, rtol=0)


def test_pretraining_predictions(tiny_pretraining_model):
    inputs = _inputs()
    with torch.no_grad():
        scores, nsp = tiny_pretraining_model(**inputs)
        mlm_ids = tiny_pretraining_model.predict_mlm_token_ids(**inputs)
        nsp_labels = tiny_pretraining_model.predict_nsp_labels(**inputs)
    assert mlm_ids.shape == (B, T) and mlm_ids.dtype == torch.long
    assert nsp_labels.shape == (B,) and nsp_labels.dtype == torch.long
    assert torch.equal(mlm_ids, scores.argmax(-1))
    assert torch.equal(nsp_labels, nsp.argmax(-1))


def test_mlm_accuracy_counts_only_labelled_positions(tiny_pretraining_model):
    inputs = _inputs()
    V = SIZES["vocab_size"]
    with torch.no_grad():
        predictions = tiny_pretraining_model.predict_mlm_token_ids(**inputs)
    labels = torch.full_like(predictions, P.IGNORE_INDEX)
    right = [(0, 0), (0, 4), (1, 2), (2, 1), (2, 3)]
    wrong = [(0, 7), (1, 5), (2, 0)]
    for b, t in right:
        labels[b, t] = predictions[b, t]
    for b, t in wrong:
        labels[b, t] = (predictions[b, t] + 1) % V
    with torch.no_grad():
        accuracy = tiny_pretraining_model.get_mlm_accuracy(labels, **inputs)
        assert accuracy.item() == pytest.approx(5 / 8)
        # unlabelled positions never count, whatever they hold
        all_wrong = torch.where(labels == P.IGNORE_INDEX, labels, (predictions + 1) % V)
        assert tiny_pretraining_model.get_mlm_accuracy(all_wrong, **inputs).item() == 0.0
        all_right = torch.where(labels == P.IGNORE_INDEX, labels, predictions)
        assert tiny_pretraining_model.get_mlm_accuracy(all_right, **inputs).item() == 1.0
        nothing = torch.full_like(labels, P.IGNORE_INDEX)
        assert tiny_pretraining_model.get_mlm_accuracy(nothing, **inputs).item() == 0.0


def test_nsp_accuracy_and_weighted_accuracy(tiny_pretraining_model):
    inputs = _inputs()
    V = SIZES["vocab_size"]
    with torch.no_grad():
        mlm_pred = tiny_pretraining_model.predict_mlm_token_ids(**inputs)
        nsp_pred = tiny_pretraining_model.predict_nsp_labels(**inputs)
    nsp_labels = nsp_pred.clone()
    nsp_labels[1] = 1 - nsp_labels[1]  # 2 of 3 right
    mlm_labels = torch.full_like(mlm_pred, P.IGNORE_INDEX)
    mlm_labels[0, 1], mlm_labels[1, 2] = mlm_pred[0, 1], mlm_pred[1, 2]
    mlm_labels[2, 4], mlm_labels[0, 6] = (mlm_pred[2, 4] + 3) % V, (mlm_pred[0, 6] + 1) % V  # 2 of 4 right
    with torch.no_grad():
        assert tiny_pretraining_model.get_nsp_accuracy(nsp_labels, **inputs).item() == pytest.approx(2 / 3)
        mlm, nsp, weighted = tiny_pretraining_model.get_accuracy(mlm_labels, nsp_labels, **inputs)
        assert mlm.item() == pytest.approx(0.5)
        assert nsp.item() == pytest.approx(2 / 3)
        assert weighted.item() == pytest.approx((0.5 + 2 / 3) / 2)
        _, _, weighted = tiny_pretraining_model.get_accuracy(mlm_labels, nsp_labels, **inputs, mlm_weight=1.0,
                                                        nsp_weight=3.0)
        assert weighted.item() == pytest.approx((0.5 + 3 * 2 / 3) / 4)


# causal LM -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def causal_model():
    torch.manual_seed(31)
    model = BERTForCausalLM(tiny_config(**SIZES, is_decoder=True))
    _perturb(model, seed=32)
    return model.eval()


def test_perplexity_is_exp_loss(causal_model):
    inputs = _inputs()
    labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, P.IGNORE_INDEX)
    with torch.no_grad():
        loss = causal_model.get_loss(labels, **inputs)
        perplexity = causal_model.get_perplexity(labels, **inputs)
        logits = causal_model(**inputs)
    expected = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                               ignore_index=-100)
    torch.testing.assert_close(loss, expected, atol=ATOL, rtol=0)
    torch.testing.assert_close(perplexity, loss.exp(), atol=ATOL, rtol=1e-6)


def test_predict_next_token_is_argmax_of_last_logits(causal_model):
    input_ids = _inputs()["input_ids"][:1, :6]
    with torch.no_grad():
        logits = causal_model(input_ids)
        predicted = causal_model.predict_next_token_id(input_ids)
    assert predicted.shape == (1,)
    assert torch.equal(predicted, logits[:, -1].argmax(-1))


def test_causal_lm_needs_a_decoder_config():
    with pytest.raises(ValueError, match="is_decoder"):
        BERTForCausalLM(tiny_config(**SIZES))


# QA span decoding ------------------------------------------------------------------------------------
def _brute_force_span(start_logits: torch.Tensor, end_logits: torch.Tensor, max_len: int,
                      allowed: torch.Tensor | None = None) -> tuple[int, int, float]:
    p_start = torch.softmax(start_logits.double(), -1).tolist()
    p_end = torch.softmax(end_logits.double(), -1).tolist()
    best = (-1, -1, -1.0)
    n = len(p_start)
    for s in range(n):
        for e in range(s, min(n, s + max_len)):  # end - start < max_len
            if allowed is not None and not (allowed[s] and allowed[e]):
                continue
            if p_start[s] * p_end[e] > best[2]:
                best = (s, e, p_start[s] * p_end[e])
    return best


def _check_against_brute_force(start: torch.Tensor, end: torch.Tensor, max_len: int,
                               allowed: torch.Tensor | None = None) -> None:
    got_start, got_end, got_p = P.best_spans(start, end, max_len, allowed)
    for i in range(start.shape[0]):
        s, e, p = _brute_force_span(start[i], end[i], max_len, None if allowed is None else allowed[i].tolist())
        assert (int(got_start[i]), int(got_end[i])) == (s, e)
        assert float(got_p[i]) == pytest.approx(p, rel=1e-5)
        assert got_start[i] <= got_end[i] and got_end[i] - got_start[i] < max_len


def test_best_spans_matches_brute_force_on_random_logits():
    generator = torch.Generator().manual_seed(41)
    start, end = torch.randn(6, 45, generator=generator) * 3, torch.randn(6, 45, generator=generator) * 3
    _check_against_brute_force(start, end, 30)
    _check_against_brute_force(start, end, 4)
    _check_against_brute_force(start, end, 1)


def test_best_spans_when_the_argmaxes_are_in_the_wrong_order():
    start, end = torch.zeros(1, 40), torch.zeros(1, 40)
    start[0, 20], end[0, 5] = 8.0, 8.0  # unconstrained: end 5 < start 20
    start[0, 8], end[0, 12] = 3.0, 3.0
    assert int(start.argmax()) > int(end.argmax())
    _check_against_brute_force(start, end, 30)
    best_start, best_end, _ = P.best_spans(start, end, 30)
    assert int(best_start) <= int(best_end)
    # a span longer than max_answer_length is never chosen
    start, end = torch.zeros(1, 40), torch.zeros(1, 40)
    start[0, 0], end[0, 35] = 10.0, 10.0
    best_start, best_end, _ = P.best_spans(start, end, 30)
    assert int(best_end) - int(best_start) < 30
    _check_against_brute_force(start, end, 30)


def test_best_spans_respects_allowed_positions():
    generator = torch.Generator().manual_seed(42)
    start, end = torch.randn(4, 35, generator=generator) * 3, torch.randn(4, 35, generator=generator) * 3
    allowed = torch.zeros(4, 35, dtype=torch.bool)
    allowed[:, 10:33] = True
    _check_against_brute_force(start, end, 30, allowed)
    _check_against_brute_force(start, end, 5, allowed)
    with pytest.raises(ValueError, match="max_answer_length"):
        P.best_spans(start, end, 0)


def test_predict_spans_stay_inside_the_attention_mask():
    torch.manual_seed(43)
    model = BERTForQuestionAnswering(tiny_config(**SIZES))
    _perturb(model, seed=44)
    model.eval()
    inputs = _inputs()
    with torch.no_grad():
        start, end = model.predict_spans(**inputs)
        start_logits, end_logits = model(**inputs)
    lengths = inputs["attention_mask"].sum(1)
    assert (start <= end).all() and (end < lengths).all()
    expected = P.best_spans(start_logits, end_logits, 30, inputs["attention_mask"].bool())
    assert torch.equal(start, expected[0]) and torch.equal(end, expected[1])
    with torch.no_grad():
        assert model.get_accuracy(start, end, **inputs).item() == 1.0


# factories -------------------------------------------------------------------------------------------
HEAD_OF_FACTORY = {
    "pre_training": BERTForPreTraining, "masked_lm": BERTForMaskedLM, "causal_lm": BERTForCausalLM,
    "next_sentence_prediction": BERTForNextSentencePrediction,
    "sequence_classification": BERTForSequenceClassification,
    "token_classification": BERTForTokenClassification, "question_answering": BERTForQuestionAnswering,
}
FACTORY_NAMES = [f"bert_for_{task}_{size}" for task in HEAD_OF_FACTORY for size in ("base", "large")]


def test_fourteen_factories_are_public():
    import bertviz_lab.model as model_package

    assert len(FACTORY_NAMES) == 14
    for name in FACTORY_NAMES:
        assert callable(getattr(model_package, name)), name
        assert name in model_package.__all__, name


@pytest.mark.parametrize("name", FACTORY_NAMES)
def test_factory_builds_its_head_with_the_preset_config(name, monkeypatch):
    """Every factory passes the base/large preset to the right class (recorded, not built: large is 340M)."""
    task = name[len("bert_for_"):].rsplit("_", 1)[0]
    size = name.rsplit("_", 1)[1]
    cls = HEAD_OF_FACTORY[task]
    built: list[BERTConfig] = []
    monkeypatch.setattr(cls, "__init__", lambda self, config: built.append(config))
    getattr(factory_module, name)()
    (config,) = built
    preset = BERTConfig.base() if size == "base" else BERTConfig.large()
    sizes = ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size", "vocab_size",
             "max_position_embeddings")
    assert {k: getattr(config, k) for k in sizes} == {k: getattr(preset, k) for k in sizes}
    assert config.is_decoder == (task == "causal_lm")
    # overrides pass through
    built.clear()
    getattr(factory_module, name)(num_hidden_layers=1)
    assert built[0].num_hidden_layers == 1


def test_large_preset_sizes():
    config = BERTConfig.large()
    assert (config.hidden_size, config.num_attention_heads, config.num_hidden_layers, config.intermediate_size) == \
        (1024, 16, 24, 4096)
    with torch.device("meta"):  # no memory, no initialisation cost
        model = factory_module.bert_for_pre_training_large()
        hf = transformers.BertForPreTraining(transformers.BertConfig(hidden_size=1024, num_attention_heads=16,
                                                                     num_hidden_layers=24, intermediate_size=4096))
    assert model.num_parameters() == hf.num_parameters()
    assert 330e6 < model.num_parameters() < 345e6


def test_pre_training_base_has_as_many_parameters_as_transformers():
    model = factory_module.bert_for_pre_training_base()
    assert isinstance(model, BERTForPreTraining)
    with torch.device("meta"):
        hf = transformers.BertForPreTraining(transformers.BertConfig())
    assert model.num_parameters() == hf.num_parameters()
    assert 105e6 < model.num_parameters() < 115e6
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    with torch.no_grad():
        scores, nsp = model.eval()(torch.tensor([[101, 7592, 2088, 102]]))
    assert scores.shape == (1, 4, 30522) and nsp.shape == (1, 2)


# create_bert_model -----------------------------------------------------------------------------------
def test_create_bert_model_for_pretraining_returns_the_four_outputs():
    torch.manual_seed(51)
    model = factory_module.create_bert_model(vocab_size=100, max_seq_length=32, d_model=32, num_heads=4, d_ff=64,
                                             num_layers=2, for_pretraining=True).eval()
    input_ids = torch.randint(0, 100, (2, 9))
    attention_mask = torch.ones(2, 9, dtype=torch.long)
    attention_mask[1, 6:] = 0
    with torch.no_grad():
        out = model(input_ids, attention_mask=attention_mask, token_type_ids=torch.zeros_like(input_ids))
    assert set(out) == {"mlm_logits", "nsp_logits", "sequence_output", "pooled_output"}
    assert out["mlm_logits"].shape == (2, 9, 100)
    assert out["nsp_logits"].shape == (2, 2)
    assert out["sequence_output"].shape == (2, 9, 32)
    assert out["pooled_output"].shape == (2, 32)
    assert all(torch.isfinite(v).all() for v in out.values())


def test_create_bert_model_without_heads_returns_only_states():
    model = factory_module.create_bert_model(vocab_size=100, max_seq_length=32, d_model=32, num_heads=4, d_ff=64,
                                             num_layers=2, for_pretraining=False).eval()
    with torch.no_grad():
        out = model(torch.randint(0, 100, (3, 7)))
    assert set(out) == {"sequence_output", "pooled_output"}
    assert out["sequence_output"].shape == (3, 7, 32)
    assert out["pooled_output"].shape == (3, 32)


# *_from_text helpers with the real MiniLM tokenizer --------------------------------------------------------------
@pytest.fixture(scope="module")
def text_models(minilm_tokenizer):
    """The seven heads, tiny but with the tokenizer's vocabulary."""
    config = dict(SIZES, vocab_size=minilm_tokenizer.vocab_size, max_position_embeddings=128)
    torch.manual_seed(61)
    models = {
        "pretraining": BERTForPreTraining(tiny_config(**config)),
        "masked_lm": BERTForMaskedLM(tiny_config(**config)),
        "causal_lm": BERTForCausalLM(tiny_config(**config, is_decoder=True)),
        "nsp": BERTForNextSentencePrediction(tiny_config(**config)),
        "seq_cls": BERTForSequenceClassification(tiny_config(**config, num_labels=3)),
        "token_cls": BERTForTokenClassification(tiny_config(**config, num_labels=4)),
        "qa": BERTForQuestionAnswering(tiny_config(**config)),
    }
    return {name: model.eval() for name, model in models.items()}


TEXT_A = "the quick brown fox jumps over the lazy dog near the river bank"
TEXT_B = "a small bird sang in the old oak tree all morning long"
QUESTION = "where does the fox jump"


def _from_text_calls(tokenizer) -> list[tuple[str, str, Callable]]:
    """(model name, helper name, call(model, device)) for every *_from_text helper."""
    return [
        ("pretraining", "get_loss_from_text",
         lambda m, d: m.get_loss_from_text(tokenizer, TEXT_A, TEXT_B, nsp_label=1, device=d, seed=0)),
        ("pretraining", "predict_nsp_labels_from_text",
         lambda m, d: m.predict_nsp_labels_from_text(tokenizer, TEXT_A, TEXT_B, device=d)),
        ("masked_lm", "get_loss_from_text", lambda m, d: m.get_loss_from_text(tokenizer, TEXT_A, device=d, seed=0)),
        ("masked_lm", "predict_token_ids_from_text",
         lambda m, d: m.predict_token_ids_from_text(tokenizer, TEXT_A, device=d)),
        ("causal_lm", "get_loss_from_text", lambda m, d: m.get_loss_from_text(tokenizer, TEXT_A, device=d)),
        ("causal_lm", "get_perplexity_from_text",
         lambda m, d: m.get_perplexity_from_text(tokenizer, TEXT_A, device=d)),
        ("causal_lm", "predict_next_token_id_from_text",
         lambda m, d: m.predict_next_token_id_from_text(tokenizer, TEXT_A, device=d)),
        ("nsp", "get_loss_from_text", lambda m, d: m.get_loss_from_text(tokenizer, TEXT_A, TEXT_B, 1, device=d)),
        ("nsp", "predict_labels_from_text",
         lambda m, d: m.predict_labels_from_text(tokenizer, TEXT_A, TEXT_B, device=d)),
        ("seq_cls", "get_loss_from_text", lambda m, d: m.get_loss_from_text(tokenizer, TEXT_A, label=2, device=d)),
        ("seq_cls", "predict_labels_from_text", lambda m, d: m.predict_labels_from_text(tokenizer, TEXT_A, device=d)),
        ("token_cls", "predict_labels_from_text",
         lambda m, d: m.predict_labels_from_text(tokenizer, TEXT_A, TEXT_B, device=d)),
        ("qa", "predict_answer_from_text",
         lambda m, d: m.predict_answer_from_text(tokenizer, QUESTION, TEXT_A, device=d)),
    ]


def test_every_head_has_from_text_helpers(minilm_tokenizer, text_models):
    covered = {name for name, _, _ in _from_text_calls(minilm_tokenizer)}
    assert covered == set(text_models)


FROM_TEXT_IDS = ["pretraining.get_loss", "pretraining.predict_nsp_labels", "masked_lm.get_loss",
                 "masked_lm.predict_token_ids", "causal_lm.get_loss", "causal_lm.get_perplexity",
                 "causal_lm.predict_next_token_id", "nsp.get_loss", "nsp.predict_labels", "seq_cls.get_loss",
                 "seq_cls.predict_labels", "token_cls.predict_labels", "qa.predict_answer"]


@pytest.mark.parametrize("index", range(len(FROM_TEXT_IDS)), ids=FROM_TEXT_IDS)
def test_from_text_helpers_run_on_cpu_and_reject_missing_devices(index, minilm_tokenizer, text_models):
    name, helper, call = _from_text_calls(minilm_tokenizer)[index]
    assert FROM_TEXT_IDS[index] == f"{name}.{helper[:-len('_from_text')]}"
    model = text_models[name]
    with torch.no_grad():
        result = call(model, "cpu")
        default = call(model, None)
    if isinstance(result, torch.Tensor):
        assert result.device.type == "cpu"
        assert torch.isfinite(result.float()).all(), helper
        assert torch.equal(result, default), helper
    else:
        assert isinstance(result, str) and result == default
    with pytest.raises(ValueError, match="cuda:5"):
        call(model, "cuda:5")


def test_from_text_results_have_the_expected_shapes(minilm_tokenizer, text_models):
    encoded = minilm_tokenizer.encode_pretraining_inputs(TEXT_A, TEXT_B)
    n = encoded["input_ids"].shape[1]
    with torch.no_grad():
        assert text_models["masked_lm"].predict_token_ids_from_text(minilm_tokenizer, TEXT_A, TEXT_B).shape == (1, n)
        assert text_models["token_cls"].predict_labels_from_text(minilm_tokenizer, TEXT_A, TEXT_B).shape == (1, n)
        assert text_models["nsp"].predict_labels_from_text(minilm_tokenizer, TEXT_A, TEXT_B).shape == (1,)
        assert text_models["pretraining"].predict_nsp_labels_from_text(minilm_tokenizer, TEXT_A, TEXT_B).shape == (1,)
        next_id = text_models["causal_lm"].predict_next_token_id_from_text(minilm_tokenizer, TEXT_A)
        assert next_id.shape == (1,) and 0 <= int(next_id) < minilm_tokenizer.vocab_size
        loss = text_models["causal_lm"].get_loss_from_text(minilm_tokenizer, TEXT_A)
        perplexity = text_models["causal_lm"].get_perplexity_from_text(minilm_tokenizer, TEXT_A)
        torch.testing.assert_close(perplexity, loss.exp())


def test_get_loss_from_text_is_seeded_finite_and_respects_nsp_label(minilm_tokenizer, text_models):
    model = text_models["pretraining"]
    with torch.no_grad():
        first = model.get_loss_from_text(minilm_tokenizer, TEXT_A, TEXT_B, seed=123, device="cpu")
        second = model.get_loss_from_text(minilm_tokenizer, TEXT_A, TEXT_B, seed=123, device="cpu")
        assert torch.isfinite(first) and first.dim() == 0
        assert first.item() == second.item()
        # NSP part only: the probabilities of label 0 and label 1 add up to one, and they differ
        nsp0 = model.get_loss_from_text(minilm_tokenizer, TEXT_A, TEXT_B, nsp_label=0, seed=123, mlm_weight=0.0)
        nsp1 = model.get_loss_from_text(minilm_tokenizer, TEXT_A, TEXT_B, nsp_label=1, seed=123, mlm_weight=0.0)
        assert math.exp(-nsp0.item()) + math.exp(-nsp1.item()) == pytest.approx(1.0, abs=1e-5)
        assert nsp0.item() != nsp1.item()
        # MLM part only: independent of the NSP label
        mlm0 = model.get_loss_from_text(minilm_tokenizer, TEXT_A, TEXT_B, nsp_label=0, seed=123, nsp_weight=0.0)
        mlm1 = model.get_loss_from_text(minilm_tokenizer, TEXT_A, TEXT_B, nsp_label=1, seed=123, nsp_weight=0.0)
        assert mlm0.item() == mlm1.item()
        # the total is the sum of the two parts, for either label
        torch.testing.assert_close(first, mlm0 + nsp0, atol=ATOL, rtol=0)
        total1 = model.get_loss_from_text(minilm_tokenizer, TEXT_A, TEXT_B, nsp_label=1, seed=123)
        torch.testing.assert_close(total1, mlm1 + nsp1, atol=ATOL, rtol=0)


def test_predict_answer_from_text_is_a_span_of_the_context(minilm_tokenizer, text_models):
    model = text_models["qa"]
    with torch.no_grad():
        answer = model.predict_answer_from_text(minilm_tokenizer, QUESTION, TEXT_A, device="cpu")
        short = model.predict_answer_from_text(minilm_tokenizer, QUESTION, TEXT_A, max_answer_length=1)
    assert isinstance(answer, str) and answer.strip()
    assert answer.strip() in TEXT_A
    assert len(answer.split()) <= 30
    assert short.strip() in TEXT_A.split()  # one token of an all-whole-word context is one word
