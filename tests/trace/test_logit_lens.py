"""logit_lens(): every layer's residual stream through the model's own MLM head equals transformers' twin with its
own head applied to each of its hidden_states (BERT, BERT pretraining, RoBERTa, XLM-RoBERTa, DistilBERT, ELECTRA),
the last row is the model's own logits, top() reads the rows, and a model without an MLM head is one clear error."""

from __future__ import annotations

import pytest
import torch
import transformers
from family_models import FAMILIES, build_family_checkpoint, family_tokenizer, transformers_model
from hub_cache import perturbed
from trace_testlib import padded_batch, trace_config

import bertviz_lab
from bertviz_lab.model import BERT, BERTForMaskedLM, BERTForPreTraining, BERTForSequenceClassification
from bertviz_lab.trace import LayerTop, logit_lens

TOLERANCE = 1e-4

# transformers' own MLM head of each family, applied to one hidden state
HF_HEADS = {
    "bert": lambda hf, h: hf.cls.predictions(h),
    "roberta": lambda hf, h: hf.lm_head(h),
    "xlm-roberta": lambda hf, h: hf.lm_head(h),
    "distilbert": lambda hf, h: hf.vocab_projector(hf.vocab_layer_norm(hf.activation(hf.vocab_transform(h)))),
    "electra": lambda hf, h: hf.generator_lm_head(hf.generator_predictions(h)),
}


def reference_lens(hf: torch.nn.Module, head, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """(layers + 1, seq, vocab) of the batch's first row, computed by transformers alone."""
    with torch.no_grad():
        states = hf(**batch, output_hidden_states=True).hidden_states
        return torch.stack([head(hf, state)[0] for state in states])


@pytest.mark.parametrize(("ours", "theirs"), [(BERTForMaskedLM, transformers.BertForMaskedLM),
                                              (BERTForPreTraining, transformers.BertForPreTraining)])
def test_bert_lens_equals_transformers_head_on_its_hidden_states(ours, theirs, tmp_path):
    torch.manual_seed(0)
    model = perturbed(ours(trace_config()), seed=1)
    model.save_pretrained(tmp_path)
    hf = theirs.from_pretrained(tmp_path, attn_implementation="eager").eval()
    ids, mask, types = padded_batch()
    batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    lens = logit_lens(model, batch)
    expected = reference_lens(hf, HF_HEADS["bert"], batch)
    assert lens.logits.shape == (model.config.num_hidden_layers + 1, ids.shape[1], model.config.vocab_size)
    assert (lens.logits - expected).abs().max() <= TOLERANCE


@pytest.mark.parametrize("family", FAMILIES)
def test_family_lens_equals_transformers_head_on_its_hidden_states(family, tmp_path):
    folder = build_family_checkpoint(family, tmp_path, seed=5)
    model, tokenizer = bertviz_lab.load(folder)
    hf = transformers_model(folder)
    batch = dict(tokenizer([f"The cat sat on the {tokenizer.mask_token}.", "A dog."], padding=True,
                           return_tensors="pt"))
    lens = logit_lens(model, batch, tokenizer=tokenizer)
    expected = reference_lens(hf, HF_HEADS[family], {k: v for k, v in batch.items() if k != "token_type_ids"})
    assert lens.logits.shape == expected.shape == (3, batch["input_ids"].shape[1], len(family_tokenizer(family)))
    assert (lens.logits - expected).abs().max() <= TOLERANCE


def test_last_row_is_the_models_prediction_for_the_first_row_only():
    torch.manual_seed(2)
    model = perturbed(BERTForMaskedLM(trace_config()), seed=3)
    ids, mask, types = padded_batch(lengths=(5, 8, 3))  # the first row padded: its logits are still the model's
    batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    lens = logit_lens(model, batch)
    with torch.no_grad():
        logits = model(**batch)
    assert torch.equal(lens.input_ids, ids[0])
    assert (lens.logits[-1] - logits[0]).abs().max() <= 1e-6
    assert not torch.allclose(lens.logits[0], lens.logits[-1])  # the rows are different layers, not one copied
    assert torch.equal(logit_lens(model, {k: v[:1] for k, v in batch.items()}).logits, lens.logits)


def test_top_ranks_each_layer_by_probability_with_token_strings():
    model = perturbed(BERTForMaskedLM(trace_config()), seed=4)
    ids, mask, _ = padded_batch()

    class Tokens:  # what top() needs of a tokenizer
        def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
            return [f"tok{i}" for i in ids]

    lens = logit_lens(model, {"input_ids": ids, "attention_mask": mask}, tokenizer=Tokens())
    rows = lens.top(3, k=4)
    assert [row.layer for row in rows] == list(range(lens.num_layers + 1))
    probs = torch.softmax(lens.logits[:, 3], dim=-1)
    for row in rows:
        assert isinstance(row, LayerTop) and len(row.ids) == len(row.probs) == 4
        assert row.ids == probs[row.layer].topk(4).indices.tolist()
        assert row.probs == pytest.approx(probs[row.layer].topk(4).values.tolist())
        assert row.tokens == [f"tok{i}" for i in row.ids]
    assert lens.top(-1, k=1)[0].ids == [int(lens.logits[0, -1].argmax())]
    assert logit_lens(model, {"input_ids": ids}).top(0)[0].tokens is None
    with pytest.raises(ValueError, match=r"position must be an int in 0\.\.7"):
        lens.top(8)
    with pytest.raises(ValueError, match="k must be an int in 1..100"):
        lens.top(0, k=0)


@pytest.mark.parametrize("cls", [BERT, BERTForSequenceClassification])
def test_a_model_without_an_mlm_head_is_one_clear_error(cls):
    model = cls(trace_config()).eval()
    ids, mask, _ = padded_batch()
    with pytest.raises(ValueError, match=rf"{cls.__name__} has none: .*BERTForMaskedLM\.from_pretrained"):
        logit_lens(model, {"input_ids": ids, "attention_mask": mask})
