"""MaskingPreview: the plan is exactly the masking functions' plan for the same seed and settings; sliders, seed and
resample change it; the [MASK]/random split stays valid; top-5 predictions equal the model's own softmax."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from bertviz_lab.model import BERTConfig, BERTForCausalLM, BERTForNextSentencePrediction
from bertviz_lab.model.pretraining import create_masked_lm_inputs, sample_masking
from bertviz_lab.widgets import MaskingPreview
from bertviz_lab.widgets.common import COLORS

TEXT = ("The quick brown fox jumps over the lazy dog while the cat sleeps on a warm mat near the old "
        "window and the birds sing in the garden outside")
TEXT_B = "Nobody noticed the rain that started later that evening."


def reference_plan(tokenizer, text_b: str | None, seed: int, p: float, mask: float, random: float):
    inputs = tokenizer.encode_pretraining_inputs(TEXT, text_b)
    settings = dict(vocab_size=tokenizer.vocab_size, special_token_ids=tokenizer.all_special_ids,
                    attention_mask=inputs["attention_mask"], special_tokens_mask=inputs["special_tokens_mask"],
                    mlm_probability=p, mask_replace_prob=mask, random_replace_prob=random, seed=seed)
    plan = sample_masking(inputs["input_ids"], **settings)
    masked, labels = create_masked_lm_inputs(inputs["input_ids"], mask_token_id=tokenizer.mask_token_id, **settings)
    return plan, masked, labels


def counts_of(plan) -> dict[str, int]:
    return {"tokens": plan.eligible.numel(), "eligible": int(plan.eligible.sum()), "selected": int(plan.selected.sum()),
            "mask": int(plan.to_mask.sum()), "random": int(plan.to_random.sum()), "kept": int(plan.kept.sum())}


def assert_matches(preview: MaskingPreview, tokenizer, seed: int, p: float, mask: float, random: float,
                   text_b: str | None = TEXT_B) -> None:
    """The preview's plan, masked ids and labels are the masking functions' for TEXT (+ text_b) and these settings."""
    plan, masked, labels = reference_plan(tokenizer, text_b, seed, p, mask, random)
    assert preview.counts == counts_of(plan)
    for name in plan._fields:
        assert torch.equal(getattr(preview.plan, name), getattr(plan, name)), name
    assert torch.equal(preview.masked_ids, masked) and torch.equal(preview.labels, labels)


@pytest.mark.parametrize("seed,p,mask,random", [(0, 0.15, 0.8, 0.1), (7, 0.5, 0.6, 0.3), (3, 1.0, 0.0, 0.0),
                                                (11, 0.4, 0.0, 1.0)])
def test_counts_and_plan_match_the_masking_functions(tokenizer, seed, p, mask, random):
    preview = MaskingPreview(tokenizer, TEXT, text_b=TEXT_B, mlm_probability=p, mask_replace_prob=mask,
                             random_replace_prob=random, seed=seed)
    assert_matches(preview, tokenizer, seed, p, mask, random)
    counts = preview.counts
    assert counts["eligible"] == counts["tokens"] - 3  # [CLS] and two [SEP] never eligible
    assert counts["selected"] == counts["mask"] + counts["random"] + counts["kept"]
    if p == 1.0:
        assert counts["selected"] == counts["eligible"] and counts["kept"] == counts["selected"]
    if random == 1.0:
        assert counts["random"] == counts["selected"] > 0
    # every token's colour is its fate, and the summary line states the counts
    fates = Counter(preview._fate(i)[0] for i in range(counts["tokens"]))
    assert (fates["mask"], fates["random"], fates["kept"], fates["special"]) == (
        counts["mask"], counts["random"], counts["kept"], 3)
    html = preview.view.value
    assert html == preview.static_html()
    assert (f"{counts['selected']} of {counts['eligible']} eligible tokens selected: {counts['mask']} → [MASK], "
            f"{counts['random']} → random, {counts['kept']} kept") in html
    assert html.count(f"background:{COLORS['mask']}") == counts["mask"] + 1  # + the legend's swatch


def test_random_replacements_show_both_tokens(tokenizer):
    preview = MaskingPreview(tokenizer, TEXT, mlm_probability=1.0, mask_replace_prob=0.0, random_replace_prob=1.0)
    original = tokenizer.convert_ids_to_tokens(preview.inputs["input_ids"][0].tolist())
    replaced = tokenizer.convert_ids_to_tokens(preview.masked_ids[0].tolist())
    position = int(preview.plan.to_random[0].nonzero()[0])
    assert f"{original[position]} → {replaced[position]}" in preview.view.value
    assert all(i not in tokenizer.all_special_ids for i in preview.plan.random_ids[preview.plan.to_random].tolist())


def test_sliders_seed_and_resample_change_the_plan(tokenizer):
    preview = MaskingPreview(tokenizer, TEXT, text_b=TEXT_B, seed=5)
    first = preview.plan.selected.clone()
    preview.probability.value = 0.6
    assert_matches(preview, tokenizer, 5, 0.6, 0.8, 0.1)
    assert not torch.equal(first, preview.plan.selected)
    preview.seed.value = 6
    assert_matches(preview, tokenizer, 6, 0.6, 0.8, 0.1)
    before = preview.plan.selected.clone()
    preview.resample.click()
    assert preview.seed.value == 7
    assert_matches(preview, tokenizer, 7, 0.6, 0.8, 0.1)
    assert not torch.equal(before, preview.plan.selected)
    preview.mask_share.value, preview.random_share.value = 0.0, 0.0
    assert_matches(preview, tokenizer, 7, 0.6, 0.0, 0.0)
    assert preview.counts["kept"] == preview.counts["selected"] > 0
    preview.probability.value = 0.0
    assert preview.counts["selected"] == 0 and torch.equal(preview.masked_ids, preview.inputs["input_ids"])
    preview.set_text("A new and different text.")
    assert preview.counts["tokens"] == len(tokenizer.encode_pretraining_inputs("A new and different text.")["input_ids"][0])


def test_mask_and_random_shares_never_exceed_one(tokenizer):
    preview = MaskingPreview(tokenizer, TEXT, seed=1, mlm_probability=0.8)
    for control, value in [("mask_share", 0.95), ("random_share", 0.5), ("random_share", 1.0), ("mask_share", 0.3),
                           ("mask_share", 1.0), ("random_share", 0.05), ("mask_share", 0.7), ("random_share", 0.3)]:
        getattr(preview, control).value = value
        total = preview.mask_share.value + preview.random_share.value
        assert total <= 1.0 + 1e-9, (control, value, total)
        assert getattr(preview, control).value == value  # the slider moved wins; the other one gives way
        mask, random = preview.mask_share.value, preview.random_share.value
        assert_matches(preview, tokenizer, 1, 0.8, mask, min(random, 1.0 - mask), text_b=None)
        counts = preview.counts
        assert counts["mask"] + counts["random"] <= counts["selected"]
    assert (preview.mask_share.value, preview.random_share.value) == pytest.approx((0.7, 0.3))


@pytest.mark.parametrize("model_fixture", ["mlm_model", "pretraining_model"])
def test_top5_predictions_are_the_models_softmax_on_the_masked_ids(request, tokenizer, model_fixture):
    model = request.getfixturevalue(model_fixture)
    preview = MaskingPreview(tokenizer, TEXT, model=model, text_b=TEXT_B, mlm_probability=0.3, seed=2)
    selected = preview.plan.selected[0].nonzero().squeeze(1).tolist()
    assert [position for position, _ in preview.predictions] == selected and len(selected) > 3
    with torch.inference_mode():
        out = model(input_ids=preview.masked_ids, attention_mask=preview.inputs["attention_mask"],
                    token_type_ids=preview.inputs["token_type_ids"])
    logits = out[0] if isinstance(out, tuple) else out
    for position, top in preview.predictions:
        probs, ids = torch.softmax(logits[0, position].float(), dim=-1).topk(5)
        assert [token for token, _ in top] == tokenizer.convert_ids_to_tokens(ids.tolist())
        assert [p for _, p in top] == pytest.approx(probs.tolist(), abs=1e-6)
    html = preview.view.value
    assert "top-5 predictions" in html
    first_position, first_top = preview.predictions[0]
    assert f"{first_top[0][0]} {first_top[0][1]:.2f}" in html


def test_no_predictions_without_an_mlm_head(tokenizer, backbone):
    preview = MaskingPreview(tokenizer, TEXT, model=backbone, mlm_probability=0.5)
    assert preview.counts["selected"] > 0 and preview.predictions == []
    assert "top-5 predictions" not in preview.view.value
    assert "No predictions: BERT has no masked-LM head" in preview.view.value  # says why, not just nothing
    without_model = MaskingPreview(tokenizer, TEXT)
    assert without_model.predictions == [] and "predictions" not in without_model.view.value
    # a causal LM's head scores the next token, not the masked one: no "MLM" predictions either
    torch.manual_seed(0)
    causal = BERTForCausalLM(BERTConfig.tiny(vocab_size=tokenizer.vocab_size, is_decoder=True))
    assert MaskingPreview(tokenizer, TEXT, model=causal, mlm_probability=0.5).predictions == []
    nsp = BERTForNextSentencePrediction(BERTConfig.tiny(vocab_size=tokenizer.vocab_size))
    assert MaskingPreview(tokenizer, TEXT, model=nsp, text_b=TEXT_B, mlm_probability=0.5).predictions == []


def test_static_fallback_in_the_mimebundle(tokenizer):
    preview = MaskingPreview(tokenizer, TEXT)
    bundle = preview._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and bundle["text/html"] == preview.static_html()
