"""MaskingPreview: the plan is exactly the masking functions' plan for the same seed and settings; sliders, seed and
resample change it; the [MASK]/random split stays valid; top-5 predictions equal the model's own softmax."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from html import unescape

import pytest
import torch
from widgets_testlib import XSS, assert_safe_html, tiny_config

from bertviz_lab.model import BERT, BERTForCausalLM, BERTForNextSentencePrediction, BERTForPreTraining
from bertviz_lab.model.encoding import encode_text
from bertviz_lab.model.pretraining import create_masked_lm_inputs, sample_masking
from bertviz_lab.train import TrainConfig, Trainer, generate_synthetic_bert_batches, synthetic_to_training_batch
from bertviz_lab.widgets import MaskingPreview
from bertviz_lab.widgets.figures.contrast import INKS, contrast_ratio, ink_on
from bertviz_lab.widgets.figures.masking import FATES, OUTLINES, Chip, MaskingState, masking_figure
from bertviz_lab.widgets.figures.palette import COLORS, HEAD_COLORS
from bertviz_lab.widgets.panels.masking import format_probability
from bertviz_lab.widgets.views.front_end import FOLDER, all_css, chip_css

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
def test_counts_and_plan_match_the_masking_functions(minilm_tokenizer, seed, p, mask, random):
    preview = MaskingPreview(minilm_tokenizer, TEXT, text_b=TEXT_B, mlm_probability=p, mask_replace_prob=mask,
                             random_replace_prob=random, seed=seed)
    assert_matches(preview, minilm_tokenizer, seed, p, mask, random)
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
    html = preview.view.svg  # the live view shows the figure: the same document as the static copy and the export
    assert html == preview.to_svg() and html in preview.static_copy.html()
    assert (f"{counts['selected']} of {counts['eligible']} eligible tokens selected: {counts['mask']} → [MASK], "
            f"{counts['random']} → random, {counts['kept']} kept") in html
    assert html.count('class="bvl-chip bvl-mask"') == counts["mask"] + 1  # + the legend's swatch
    assert "style=" not in html  # colours come from the stylesheets' classes, which follow the theme


def test_random_replacements_show_both_tokens(minilm_tokenizer):
    preview = MaskingPreview(minilm_tokenizer, TEXT, mlm_probability=1.0, mask_replace_prob=0.0,
                             random_replace_prob=1.0)
    original = minilm_tokenizer.convert_ids_to_tokens(preview.inputs["input_ids"][0].tolist())
    replaced = minilm_tokenizer.convert_ids_to_tokens(preview.masked_ids[0].tolist())
    position = int(preview.plan.to_random[0].nonzero()[0])
    assert f"{original[position]} → {replaced[position]}" in preview.view.svg
    random_ids = preview.plan.random_ids[preview.plan.to_random].tolist()
    assert all(i not in minilm_tokenizer.all_special_ids for i in random_ids)


def test_sliders_seed_and_resample_change_the_plan(minilm_tokenizer):
    preview = MaskingPreview(minilm_tokenizer, TEXT, text_b=TEXT_B, seed=5)
    first = preview.plan.selected.clone()
    preview.probability.value = 0.6
    assert_matches(preview, minilm_tokenizer, 5, 0.6, 0.8, 0.1)
    assert not torch.equal(first, preview.plan.selected)
    preview.seed.value = 6
    assert_matches(preview, minilm_tokenizer, 6, 0.6, 0.8, 0.1)
    before = preview.plan.selected.clone()
    preview.resample.click()
    assert preview.seed.value == 7
    assert_matches(preview, minilm_tokenizer, 7, 0.6, 0.8, 0.1)
    assert not torch.equal(before, preview.plan.selected)
    preview.mask_share.value, preview.random_share.value = 0.0, 0.0
    assert_matches(preview, minilm_tokenizer, 7, 0.6, 0.0, 0.0)
    assert preview.counts["kept"] == preview.counts["selected"] > 0
    preview.probability.value = 0.0
    assert preview.counts["selected"] == 0 and torch.equal(preview.masked_ids, preview.inputs["input_ids"])
    preview.set_text("A new and different text.")
    expected = minilm_tokenizer.encode_pretraining_inputs("A new and different text.")["input_ids"][0]
    assert preview.counts["tokens"] == len(expected)


def test_mask_and_random_shares_never_exceed_one(minilm_tokenizer):
    preview = MaskingPreview(minilm_tokenizer, TEXT, seed=1, mlm_probability=0.8)
    for control, value in [("mask_share", 0.95), ("random_share", 0.5), ("random_share", 1.0), ("mask_share", 0.3),
                           ("mask_share", 1.0), ("random_share", 0.05), ("mask_share", 0.7), ("random_share", 0.3)]:
        getattr(preview, control).value = value
        total = preview.mask_share.value + preview.random_share.value
        assert total <= 1.0 + 1e-9, (control, value, total)
        assert getattr(preview, control).value == value  # the slider moved wins; the other one gives way
        mask, random = preview.mask_share.value, preview.random_share.value
        assert_matches(preview, minilm_tokenizer, 1, 0.8, mask, min(random, 1.0 - mask), text_b=None)
        counts = preview.counts
        assert counts["mask"] + counts["random"] <= counts["selected"]
    assert (preview.mask_share.value, preview.random_share.value) == pytest.approx((0.7, 0.3))


@pytest.mark.parametrize("model_fixture", ["mlm_model", "pretraining_model"])
def test_top5_predictions_are_the_models_softmax_on_the_masked_ids(request, minilm_tokenizer, model_fixture):
    model = request.getfixturevalue(model_fixture)
    preview = MaskingPreview(minilm_tokenizer, TEXT, model=model, text_b=TEXT_B, mlm_probability=0.3, seed=2)
    selected = preview.plan.selected[0].nonzero().squeeze(1).tolist()
    assert [position for position, _ in preview.predictions()] == selected and len(selected) > 3
    with torch.inference_mode():
        out = model(input_ids=preview.masked_ids, attention_mask=preview.inputs["attention_mask"],
                    token_type_ids=preview.inputs["token_type_ids"])
    logits = out[0] if isinstance(out, tuple) else out
    for position, top in preview.predictions():
        probs, ids = torch.softmax(logits[0, position].float(), dim=-1).topk(5)
        assert [token for token, _ in top] == minilm_tokenizer.convert_ids_to_tokens(ids.tolist())
        assert [p for _, p in top] == pytest.approx(probs.tolist(), abs=1e-6)
    html = preview.view.svg
    assert "top-5 predictions" in html
    first_position, first_top = preview.predictions()[0]
    assert f"{first_top[0][0]} {format_probability(first_top[0][1])}" in html


def test_the_hint_names_what_the_menu_offers_and_a_checkpoint_folder_predicts(minilm_tokenizer, backbone, tmp_path):
    """Without an MLM head the note names the choices "predict with" really lists (the Training tab's model only
    where there is one); a checkpoint folder typed there (a checkpoint_dir: its newest checkpoint) predicts."""
    preview = MaskingPreview(minilm_tokenizer, "The cat sat on the [MASK].", model=backbone)
    labels = [label for label, _ in preview.model_choice.options]
    assert labels[-1] == "a checkpoint folder or Hub name…" and not any("Training" in label for label in labels)
    note = preview.model_note()
    assert "Training tab" not in note and "a checkpoint folder" in note and "a Hub name" in note
    preview.offer_model_from(lambda: None)
    assert "the Training tab's model" in preview.model_note()
    assert any("Training" in label for label, _ in preview.model_choice.options)
    torch.manual_seed(0)
    trained = BERTForPreTraining(tiny_config(minilm_tokenizer.vocab_size))
    trained.save_pretrained(tmp_path / "checkpoints" / "step-00000004")
    minilm_tokenizer.save_pretrained(tmp_path / "checkpoints" / "step-00000004")
    (tmp_path / "checkpoints" / "latest").write_text("step-00000004\n", encoding="utf-8")
    preview.use_model(str(tmp_path / "checkpoints"))
    assert preview.source == str(tmp_path / "checkpoints") and len(preview.predictions()) == 1
    assert "predictions by" in preview.model_note() and "initialised at random" not in preview.model_note()


def test_no_predictions_without_an_mlm_head(minilm_tokenizer, backbone):
    preview = MaskingPreview(minilm_tokenizer, TEXT, model=backbone, mlm_probability=0.5)
    assert preview.counts["selected"] > 0 and preview.predictions() == []
    assert "top-5 predictions" not in preview.view.svg
    assert "No predictions: BERT has no masked-LM head" in preview.view.svg  # says why, not just nothing
    without_model = MaskingPreview(minilm_tokenizer, TEXT)
    assert without_model.predictions() == [] and "predictions" not in without_model.view.svg
    # a causal LM's head scores the next token, not the masked one: no "MLM" predictions either
    torch.manual_seed(0)
    causal = BERTForCausalLM(tiny_config(minilm_tokenizer.vocab_size, is_decoder=True))
    assert MaskingPreview(minilm_tokenizer, TEXT, model=causal, mlm_probability=0.5).predictions() == []
    nsp = BERTForNextSentencePrediction(tiny_config(minilm_tokenizer.vocab_size))
    assert MaskingPreview(minilm_tokenizer, TEXT, model=nsp, text_b=TEXT_B, mlm_probability=0.5).predictions() == []


def test_static_fallback_in_the_mimebundle(minilm_tokenizer):
    preview = MaskingPreview(minilm_tokenizer, TEXT)
    bundle = preview._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and bundle["text/html"] == preview.static_html()


# two significant digits, long texts, the Training tab's model, NSP, export ------------------------------------
def test_probabilities_keep_two_significant_digits():
    assert [format_probability(p) for p in (0.0031, 0.5, 0.999, 0.12345, 1.0, 0.00031, 3.14e-05, 0.0)] == [
        "0.0031", "0.50", "1.0", "0.12", "1.0", "0.00031", "3.1e-05", "0.0"]


def long_text(words: int) -> str:
    return " ".join(["word"] * words)


def test_a_long_text_is_cut_to_the_models_positions_with_a_notice(minilm_tokenizer, pretraining_model):
    limit = pretraining_model.config.max_position_embeddings  # 128
    preview = MaskingPreview(minilm_tokenizer, long_text(300), model=pretraining_model)
    assert preview.counts["tokens"] == limit
    truncation = preview.truncation
    assert (truncation.kept, truncation.total, truncation.kept_a, truncation.total_a) == (limit, 302, limit - 2, 300)
    assert truncation.notice == f"kept {limit} of 302 tokens (the model reads at most {limit})"
    assert "bvl-truncation-notice" in preview.view.svg and truncation.notice in preview.view.svg
    assert preview.predictions()  # the cut text runs through the model
    # a pair: the longer sentence is cut first, as Hugging Face's longest_first
    pair = MaskingPreview(minilm_tokenizer, long_text(200), model=pretraining_model, text_b=long_text(40))
    cut = pair.truncation
    assert (cut.kept, cut.total) == (limit, 243) and cut.kept_a + cut.kept_b + 3 == limit
    assert (cut.total_a, cut.total_b) == (200, 40) and cut.kept_b == 40 and cut.kept_a == limit - 43
    assert "sentence A 85 of 200, sentence B 40 of 40" in cut.notice
    both_long = encode_text(pretraining_model, minilm_tokenizer, long_text(100), long_text(90)).truncation
    assert (both_long.kept_a, both_long.kept_b) == (63, 62)  # trimmed from the longer until they fit
    # a text that fits: no notice
    short = MaskingPreview(minilm_tokenizer, TEXT, model=pretraining_model)
    assert not short.truncation.cut and short.truncation.notice == ""
    assert "bvl-truncation-notice" not in short.view.svg


def test_encode_text_still_unpacks_and_without_a_model_uses_the_tokenizers_limit(minilm_tokenizer, backbone):
    encoded, inputs = encode_text(backbone, minilm_tokenizer, "A short text.")
    assert inputs["input_ids"].shape == encoded["input_ids"].shape == (1, 6)
    short = encode_text(backbone, minilm_tokenizer, "A short text.")
    assert short[1]["input_ids"].tolist() == inputs["input_ids"].tolist()
    alone = encode_text(None, minilm_tokenizer, long_text(600))
    assert alone.truncation.limit == minilm_tokenizer.model_max_length == 512
    assert alone[1]["input_ids"].shape == (1, 512)
    assert alone.truncation.notice.startswith("kept 512 of 602 tokens")
    with pytest.raises(ValueError, match="empty"):
        encode_text(backbone, minilm_tokenizer, "  ")


def tiny_trainer_for(tokenizer, steps: int = 4) -> Trainer:
    """A BERTForPreTraining over `tokenizer`'s vocabulary, trained on synthetic batches, knowing its tokenizer."""
    torch.manual_seed(4)
    vocab = len(tokenizer)
    model = BERTForPreTraining(tiny_config(vocab, hidden_size=32, num_attention_heads=2,
                                               intermediate_size=64, num_hidden_layers=1, max_position_embeddings=64))
    batches = [synthetic_to_training_batch(b) for b in generate_synthetic_bert_batches(4, 8, 16, vocab, random_seed=0)]
    config = TrainConfig(max_steps=steps, batch_size=8, eval_interval=0, progress=False, device="cpu", log_interval=0)
    return Trainer(model, batches, None, config, tokenizer=tokenizer)


def test_without_an_mlm_head_the_training_tabs_model_can_be_chosen_and_left(minilm_tokenizer, backbone, xss_tokenizer):
    preview = MaskingPreview(minilm_tokenizer, TEXT, model=backbone, text_b=TEXT_B, mlm_probability=0.5)
    assert preview.predictions() == [] and "No predictions: BERT has no masked-LM head" in preview.view.svg
    assert [value for _, value in preview.model_choice.options] == ["current", "name"]  # no Training tab wired
    trainer = tiny_trainer_for(xss_tokenizer)
    asked: list[int] = []
    preview.offer_model_from(lambda: asked.append(1) or trainer)
    assert [value for _, value in preview.model_choice.options] == ["current", "training", "name"]
    assert asked == [] and preview.model_choice.value == "current"  # built only when it is chosen
    preview.set_text(f"the {XSS} cat sat on the mat", "the dog ran home")
    preview.model_choice.value = "training"  # what a person picking it in the list does
    assert asked == [1] and preview.trainer is trainer and preview.source == "training"
    assert preview.tokenizer is xss_tokenizer and preview.model is not trainer.model  # a copy: training undisturbed
    assert isinstance(preview.model, BERTForPreTraining) and not preview.model.training
    assert preview.predictions() and preview.next_sentence is not None
    shown = unescape(preview.view.svg)
    assert "top-5 predictions" in shown and "Training tab's model (step 0 of 4)" in shown
    assert "No predictions" not in shown
    assert_safe_html(preview.view.svg)
    before = [p for _, top in preview.predictions() for _, p in top]
    trainer.fit()  # the preview refreshes between steps (at most every 2 s) and when the run ends
    assert trainer.step == 4 and "Training tab's model (step 4 of 4)" in unescape(preview.view.svg)
    for name, value in trainer.model.state_dict().items():
        assert torch.equal(preview.model.state_dict()[name], value), name
    assert [p for _, top in preview.predictions() for _, p in top] != before
    assert_safe_html(preview.view.svg)
    # and back to the model it was given: its tokenizer again, no predictions, no longer following the trainer
    preview.model_choice.value = "current"
    assert preview.model is backbone and preview.tokenizer is minilm_tokenizer and preview.trainer is None
    assert preview.follower is None and not [c for c in trainer.callbacks if getattr(c, "preview", None) is preview]
    assert preview.predictions() == [] and "No predictions: BERT has no masked-LM head" in preview.view.svg
    assert preview.inputs["input_ids"].tolist() == minilm_tokenizer.encode_pretraining_inputs(
        f"the {XSS} cat sat on the mat", "the dog ran home")["input_ids"].tolist()
    # a bad source says why beside the list, which still names the model in use
    other = MaskingPreview(minilm_tokenizer, TEXT, model=backbone)
    other.offer_model_from(lambda: (_ for _ in ()).throw(ValueError("training.steps must be positive")))
    other.model_choice.value = "training"
    assert "training.steps must be positive" in other.model_message.value and other.trainer is None
    assert other.model_choice.value == "current" and other.model is backbone


def test_next_sentence_probability_for_a_pair_with_an_nsp_head(minilm_tokenizer, pretraining_model):
    preview = MaskingPreview(minilm_tokenizer, TEXT, model=pretraining_model, text_b=TEXT_B)
    encoded, inputs = encode_text(pretraining_model, minilm_tokenizer, TEXT, TEXT_B)
    with torch.inference_mode():
        expected = torch.softmax(pretraining_model(**inputs)[1][0], dim=-1)[0].item()
    assert preview.next_sentence == pytest.approx(expected, abs=1e-6)
    assert f"P(B follows A) = {format_probability(expected)}" in preview.view.svg
    assert MaskingPreview(minilm_tokenizer, TEXT, model=pretraining_model).next_sentence is None  # no pair
    torch.manual_seed(0)
    nsp = BERTForNextSentencePrediction(tiny_config(minilm_tokenizer.vocab_size)).eval()
    only_nsp = MaskingPreview(minilm_tokenizer, TEXT, model=nsp, text_b=TEXT_B)
    assert only_nsp.predictions() == [] and 0 < only_nsp.next_sentence < 1 and "P(B follows A)" in only_nsp.view.svg
    assert MaskingPreview(minilm_tokenizer, TEXT, model=BERT(tiny_config(minilm_tokenizer.vocab_size)),
                          text_b=TEXT_B).next_sentence is None


def test_svg_export_parses_escapes_and_has_the_chips(xss_tokenizer, xss_model, tmp_path):
    preview = MaskingPreview(xss_tokenizer, f"the {XSS} cat sat on the mat . it was warm", model=xss_model,
                             mlm_probability=0.5, seed=1)
    svg = preview.to_svg()
    root = ET.fromstring(svg)  # well-formed XML
    texts = ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert any(t.startswith("BERT masking · select p 0.50") for t in texts)
    assert XSS in texts and XSS not in svg  # the token shown as text, escaped in the source
    assert "top-5 predictions" in texts and preview.summary() in texts
    chips = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if "bvl-chip" in g.get("class", "")]
    assert len(chips) == preview.counts["tokens"] + 5  # + the legend's five
    assert sum("bvl-mask" in g.get("class") for g in chips) == preview.counts["mask"] + 1
    png = preview.save(tmp_path / "masking.png", scale=2)
    from bertviz_lab.widgets.figures.export import svg_size

    width, height = svg_size(svg)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import struct

    assert struct.unpack(">II", png.read_bytes()[16:24]) == (round(width * 2), round(height * 2))
    assert ET.parse(preview.save(tmp_path / "masking.svg")).getroot().tag.endswith("svg")


SVG = "{http://www.w3.org/2000/svg}"


def test_the_figure_is_themed_and_its_chips_read_on_their_fill_and_without_colour():
    chips = [Chip(f"tok{index}", "orig" if fate in ("mask", "random", "kept") else "", fate, fate)
             for index, (_, fate) in enumerate(FATES)]
    svg = masking_figure(MaskingState(title="t", chips=chips, summary="s", notice="cut", note="n",
                                      headers=("a", "b"), rows=[("1", XSS)]))
    root = ET.fromstring(svg)
    assert root.get("class").split() == ["bvl-fig", "bvl-masking"]
    assert root[0].get("class") == "bvl-ground" and root[0].get("width") == "100%"
    assert "font-family" not in svg and 'fill="white"' not in svg and XSS not in svg
    groups = [g for g in root.iter(f"{SVG}g") if "bvl-chip" in g.get("class", "")]
    assert len(groups) == 2 * len(FATES)  # the legend's and the tokens'
    outlines = {}
    for group in groups:
        fate = group.get("class").split()[1].removeprefix("bvl-")
        fill = group.find(f"{SVG}rect").get("fill")
        assert fill == COLORS[fate]
        text = group.find(f"{SVG}text")
        ink = INKS[0] if "bvl-ink-black" in text.get("class") else INKS[1]
        assert "bvl-mono" in text.get("class") and text.get("fill") is None
        assert contrast_ratio(ink, fill) >= 4.5
        outline = [r for r in group.iter(f"{SVG}rect") if r.get("class") == "bvl-chip-outline"]
        outlines[fate] = outline[0].get("stroke-dasharray", "solid") if outline else None
        if outline:
            assert outline[0].get("stroke") == ink  # drawn in the chip's ink: it reads on the fill
    # the three selected fates also differ by outline, so they read without colour
    assert len({outlines["mask"], outlines["random"], outlines["kept"]}) == 3 and None not in (
        outlines["mask"], outlines["random"], outlines["kept"])
    texts = [e for e in root.iter(f"{SVG}text") if "bvl-chip" not in (e.get("class") or "")]
    assert all(e.get("fill") is None for e in texts)  # every other text takes the theme's colours
    assert any("bvl-warn" in (e.get("class") or "") and e.text == "cut" for e in texts)
    with pytest.raises(ValueError, match="'nope'"):
        Chip("x", "", "nope", "")


def test_chip_classes_in_the_stylesheet_carry_the_palette_and_its_ink():
    css = (FOLDER / "panels.css").read_text()
    assert ".bvl-chip.bvl-mask {" in all_css() and ".bvl-kernel-notice" in all_css()  # every copy and panel has it
    assert chip_css() in all_css()  # the chips' fills, made from the palette
    kinds = {fate: COLORS[fate] for _, fate in FATES} | {f"tag-{i}": color for i, color in enumerate(HEAD_COLORS)}
    for kind, color in kinds.items():
        rule = chip_css().split(f".bvl-chip.bvl-{kind} {{", 1)[1].split("}", 1)[0]
        assert f"background: {color};" in rule and f"color: {ink_on(color)};" in rule, kind
        assert contrast_ratio(ink_on(color), color) >= 4.5
    for fate in OUTLINES:
        assert "outline:" in css.split(f".bvl-chip.bvl-{fate} {{", 1)[1].split("}", 1)[0]
    assert len({css.split(f".bvl-chip.bvl-{fate} {{", 1)[1].split("}", 1)[0].split("outline:")[1].split(";")[0]
                for fate in OUTLINES}) == len(OUTLINES)  # solid, dashed, dotted
