"""MaskingPreview as a user means it: a typed [MASK] is masked and predicted where it was typed; a click (or a front
end writing `chosen`) masks and unmasks a token; the predicting model is chosen explicitly (the one given, a Hub name
from an offline cache, back again); the chips say their fate in text, not only in colour."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import torch
from hub_cache import add_folder, commit, offline_cache
from test_widgets_masking import tiny_trainer_for
from widgets_testlib import tiny_config

from bertviz_lab.model import BERTForMaskedLM
from bertviz_lab.model.pretraining import IGNORE_INDEX, sample_masking
from bertviz_lab.widgets import MaskingPreview, Workbench
from bertviz_lab.widgets.panels import models as named_models
from bertviz_lab.widgets.panels.masking import format_probability

CAPITAL = "The capital of France is [MASK]."
TYPED = 6  # [CLS] the capital of france is [MASK] . [SEP]
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(autouse=True)
def forget_named_models():
    """Models loaded by name from this module's temporary caches are not kept for other tests."""
    yield
    named_models._load_once.cache_clear()


@pytest.fixture(scope="module")
def paris_model(minilm_tokenizer) -> BERTForMaskedLM:
    """A tiny masked LM whose decoder bias makes "paris" certain at every position: the answer is known."""
    torch.manual_seed(7)
    model = BERTForMaskedLM(tiny_config(minilm_tokenizer.vocab_size)).eval()
    with torch.no_grad():
        model.cls.predictions.decoder.bias[minilm_tokenizer.convert_tokens_to_ids("paris")] += 60.0
    return model


def softmax_top(model, preview, position: int, k: int = 5) -> tuple[list[str], list[float]]:
    """The model's own top-k at `position` of the preview's masked ids: the reference for what the panel shows."""
    with torch.inference_mode():
        out = model(input_ids=preview.masked_ids, attention_mask=preview.inputs["attention_mask"],
                    token_type_ids=preview.inputs["token_type_ids"])
    logits = out[0] if isinstance(out, tuple) else out
    probs, ids = torch.softmax(logits[0, position].float(), dim=-1).topk(k)
    return preview.tokenizer.convert_ids_to_tokens(ids.tolist()), probs.tolist()


def assert_predictions_are_the_models(model, preview) -> None:
    for position, top in preview.predictions():
        tokens, probs = softmax_top(model, preview, position)
        assert [token for token, _ in top] == tokens
        assert [p for _, p in top] == pytest.approx(probs, abs=1e-6)


def chips_of(svg: str) -> dict[int, ET.Element]:
    root = ET.fromstring(svg)
    return {int(g.get("data-position")): g for g in root.iter(f"{SVG}g") if g.get("data-position") is not None}


def test_a_typed_mask_is_predicted_at_exactly_its_position(minilm_tokenizer, paris_model):
    preview = MaskingPreview(minilm_tokenizer, CAPITAL, model=paris_model)
    tokens = minilm_tokenizer.convert_ids_to_tokens(preview.inputs["input_ids"][0].tolist())
    assert tokens[TYPED] == "[MASK]" and preview.typed_positions == [TYPED]
    assert preview.mode.value == "choose"  # a typed [MASK] says which token is meant: nothing else is masked
    predictions = preview.predictions()
    assert [position for position, _ in predictions] == [TYPED]
    token, p = predictions[0][1][0]
    assert token == "paris" and p == pytest.approx(1.0, abs=1e-6)
    assert len(predictions[0][1]) == 5
    assert_predictions_are_the_models(paris_model, preview)
    assert torch.equal(preview.masked_ids, preview.inputs["input_ids"])  # already [MASK]: nothing replaced
    assert preview.labels[0].tolist() == [IGNORE_INDEX] * len(tokens)  # no original token to learn there
    root = ET.fromstring(preview.view.svg)
    assert root.get("data-mode") == "choose" and root.get("data-masked") == str(TYPED)
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    assert "1 masked: 1 typed [MASK], 0 clicked of 6 tokens" in texts
    row = ", ".join(f"{t} {format_probability(p)}" for t, p in predictions[0][1])
    assert texts[-3:] == ["6", "(typed [MASK])", row]  # the table shows what predictions() returns
    chip = chips_of(preview.view.svg)[TYPED]
    assert chip.get("data-toggle") is None  # a typed [MASK] is the text's: a click does not unmask it
    assert "typed [MASK]" in chip.find(f"{SVG}title").text


def test_a_typed_mask_is_also_predicted_in_the_sample_mode(minilm_tokenizer, paris_model):
    preview = MaskingPreview(minilm_tokenizer, CAPITAL, model=paris_model, mode="sample", mlm_probability=0.5, seed=3)
    inputs = minilm_tokenizer.encode_pretraining_inputs(CAPITAL)
    plan = sample_masking(inputs["input_ids"], vocab_size=minilm_tokenizer.vocab_size,
                          special_token_ids=minilm_tokenizer.all_special_ids, attention_mask=inputs["attention_mask"],
                          special_tokens_mask=inputs["special_tokens_mask"], mlm_probability=0.5, seed=3)
    sampled = plan.selected[0].nonzero().squeeze(1).tolist()
    assert sampled and TYPED not in sampled
    assert [position for position, _ in preview.predictions()] == sorted(sampled + [TYPED])
    assert preview.counts["selected"] == len(sampled)  # the 80/10/10 statistics count the sampled tokens only
    assert preview.summary().endswith("; 1 typed [MASK]")
    assert_predictions_are_the_models(paris_model, preview)


def test_a_click_masks_and_unmasks_a_token(minilm_tokenizer, paris_model):
    preview = MaskingPreview(minilm_tokenizer, CAPITAL, model=paris_model)
    ids = preview.inputs["input_ids"][0].tolist()
    capital = 2
    preview.toggle(capital)
    assert preview.chosen == [capital] and preview.view.chosen == [capital]
    assert preview.masked_ids[0, capital] == minilm_tokenizer.mask_token_id
    assert preview.labels[0, capital] == ids[capital]  # the original id, as BERT's labels hold
    assert [position for position, _ in preview.predictions()] == [capital, TYPED]
    assert_predictions_are_the_models(paris_model, preview)
    assert ET.fromstring(preview.view.svg).get("data-masked") == f"{capital},{TYPED}"
    chip = chips_of(preview.view.svg)[capital]
    assert "bvl-mask" in chip.get("class") and chip.get("data-toggle") == "true" and chip.get("data-token") == "capital"
    preview.toggle(capital)
    assert preview.chosen == [] and [position for position, _ in preview.predictions()] == [TYPED]
    assert "bvl-untouched" in chips_of(preview.view.svg)[capital].get("class")
    with pytest.raises(ValueError, match="position 0 is not a token a click masks"):
        preview.toggle(0)  # [CLS]
    with pytest.raises(ValueError, match="position 6 is not"):
        preview.toggle(TYPED)


def test_a_front_end_writes_the_chosen_tokens(minilm_tokenizer, paris_model):
    """What the browser sends on a click: the toggled position list. Only tokens a click may mask are taken; a click
    in the sample mode chooses the tokens from then on."""
    preview = MaskingPreview(minilm_tokenizer, "The cat sat on the mat.", model=paris_model, mode="sample", seed=1)
    assert preview.mode.value == "sample" and all(chip.get("data-toggle") == "true"
                                                  for p, chip in chips_of(preview.view.svg).items() if 0 < p < 7)
    preview.view.chosen = [0, 3, 5, 99]  # [CLS] and a position past the end are dropped
    assert preview.mode.value == "choose" and preview.chosen == [3, 5] and preview.view.chosen == [3, 5]
    assert [position for position, _ in preview.predictions()] == [3, 5]
    assert (preview.masked_ids[0] == minilm_tokenizer.mask_token_id).nonzero().squeeze(1).tolist() == [3, 5]
    assert all(control.disabled for control in (preview.probability, preview.seed, preview.resample))
    preview.mode.value = "sample"  # back to BERT's sampling; the choice is kept for the choose mode
    assert not preview.probability.disabled and preview.chosen == [3, 5]
    assert "select p 0.15" in preview.view.svg
    preview.mode.value = "choose"
    assert [position for position, _ in preview.predictions()] == [3, 5]


def test_the_choice_lasts_while_the_tokens_do(minilm_tokenizer, paris_model):
    preview = MaskingPreview(minilm_tokenizer, "The cat sat on the mat.", model=paris_model, mode="choose")
    assert preview.predictions() == [] and "click a token" in preview.view.svg
    preview.toggle(2)
    preview.set_text("The cat sat on the mat.")  # the same tokens (a rerun, a device move): the choice stays
    assert preview.chosen == [2]
    preview.set_text("A dog ran home.")
    assert preview.chosen == [] and preview.view.chosen == [] and preview.predictions() == []
    preview.mode.value = "sample"
    preview.set_text("A dog ran [MASK].")  # a new text with a typed [MASK]: the choose mode, that token predicted
    assert preview.mode.value == "choose" and [p for p, _ in preview.predictions()] == [4]


def test_the_chips_fates_read_without_colour(minilm_tokenizer):
    preview = MaskingPreview(minilm_tokenizer, "the cat sat on the warm mat near an old window", mode="sample",
                             mlm_probability=1.0, mask_replace_prob=0.4, random_replace_prob=0.3, seed=0)
    chips = chips_of(preview.view.svg)
    marks = {}
    for position, chip in chips.items():
        fate = chip.get("class").split()[1].removeprefix("bvl-")
        text = chip.find(f"{SVG}text").text
        marks.setdefault(fate, []).append(text)
    assert {"mask", "random", "kept"} <= set(marks)
    assert all(text == "[MASK]" for text in marks["mask"])
    assert all(" → " in text for text in marks["random"])
    assert all(text.startswith("= ") for text in marks["kept"])
    legend = [g.find(f"{SVG}text").text for g in ET.fromstring(preview.view.svg).iter(f"{SVG}g")
              if "bvl-chip" in (g.get("class") or "") and g.get("data-position") is None]
    assert legend[:3] == ["[MASK]", "→ random", "= kept"]


# the model, chosen explicitly --------------------------------------------------------------------------------
@pytest.fixture
def hub(tmp_path, monkeypatch, pretraining_model, minilm_tokenizer):
    """The tests' tiny BERTForPreTraining as the Hub repo org/tiny-pretraining, in an offline Hub cache."""
    pretraining_model.save_pretrained(tmp_path / "folder")
    minilm_tokenizer.save_pretrained(tmp_path / "folder")
    add_folder(tmp_path / "hub", "org/tiny-pretraining", tmp_path / "folder", commit(3))
    offline_cache(monkeypatch, tmp_path / "hub")
    return tmp_path / "hub"


def test_the_model_switches_to_a_hub_name_and_back(minilm_tokenizer, paris_model, pretraining_model, hub):
    preview = MaskingPreview(minilm_tokenizer, CAPITAL, model=paris_model)
    preview.toggle(2)
    assert preview.model_choice.value == "current" and preview.model_name.layout.display == "none"
    preview.model_choice.value = "name"  # the name box shows; nothing is loaded yet
    assert preview.model_name.layout.display is None and preview.model is paris_model
    preview.model_name.value = "org/tiny-pretraining"
    preview.load_button.click()
    assert preview.model_message.value == "" and preview.source == "org/tiny-pretraining"
    assert type(preview.model).__name__ == "BERTForPreTraining" and preview.model is not pretraining_model
    assert preview.chosen == [2]  # the same vocabulary: the same tokens stay masked
    assert [position for position, _ in preview.predictions()] == [2, TYPED]
    assert_predictions_are_the_models(pretraining_model, preview)  # the checkpoint's weights predict
    assert "predictions by org/tiny-pretraining" in preview.view.svg
    preview.model_choice.value = "current"
    assert preview.model is paris_model and preview.source == "current" and preview.model_name.layout.display == "none"
    assert preview.predictions()[-1][1][0][0] == "paris"
    assert_predictions_are_the_models(paris_model, preview)
    preview.use_model("org/tiny-pretraining")  # the same from code, loaded once per session
    assert preview.model_choice.value == "name" and preview.model_name.value == "org/tiny-pretraining"
    assert_predictions_are_the_models(pretraining_model, preview)
    preview.use_model("current")
    assert preview.model is paris_model


def test_a_name_missing_from_the_offline_cache_says_so_in_one_line(minilm_tokenizer, paris_model, hub):
    preview = MaskingPreview(minilm_tokenizer, CAPITAL, model=paris_model)
    preview.model_choice.value = "name"
    preview.model_name.value = "org/not-downloaded"
    preview.load_button.click()
    message = preview.model_message.value
    assert "org/not-downloaded" in message and str(hub) in message and "HF_HUB_OFFLINE=1" in message
    assert "\n" not in message and "bvl-error" in message
    assert preview.model is paris_model and preview.source == "current"  # nothing changed
    assert preview.model_choice.value == "name"  # the name box stays for another try
    with pytest.raises(FileNotFoundError, match=str(hub)):
        preview.use_model("org/not-downloaded")
    with pytest.raises(ValueError, match="no Training tab"):
        preview.use_model("training")
    with pytest.raises(ValueError, match="which must be"):
        preview.use_model("  ")
    with pytest.raises(ValueError, match="mode must be one of"):
        MaskingPreview(minilm_tokenizer, CAPITAL, mode="random")
    for shares, error, words in (((1.5, 0.8, 0.1), ValueError, r"mlm_probability must be in \[0, 1\], got 1.5"),
                                 ((0.15, -0.1, 0.1), ValueError, r"mask_replace_prob must be in \[0, 1\], got -0.1"),
                                 ((0.15, 0.8, 0.5), ValueError, r"mask_replace_prob \+ random_replace_prob must be"),
                                 (("0.2", 0.8, 0.1), TypeError, r"mlm_probability must be a number in \[0, 1\], "
                                                                r"got str '0.2'")):
        with pytest.raises(error, match=words):  # never clamped by the slider
            MaskingPreview(minilm_tokenizer, CAPITAL, mlm_probability=shares[0], mask_replace_prob=shares[1],
                           random_replace_prob=shares[2])


def test_the_training_tabs_model_predicts_at_the_typed_mask_of_its_own_tokens(minilm_tokenizer, backbone,
                                                                              xss_tokenizer):
    """Another tokenizer reads the text again: the typed [MASK] is still the one masked token, at its new position."""
    preview = MaskingPreview(minilm_tokenizer, "the cat sat on the [MASK] .", model=backbone)
    assert preview.typed_positions == [6] and preview.predictions() == []  # no MLM head here
    trainer = tiny_trainer_for(xss_tokenizer)
    preview.offer_model_from(lambda: trainer)
    preview.model_choice.value = "training"
    assert preview.tokenizer is xss_tokenizer and preview.mode.value == "choose"
    assert xss_tokenizer.convert_ids_to_tokens(preview.inputs["input_ids"][0].tolist())[6] == "[MASK]"
    assert [position for position, _ in preview.predictions()] == [6]
    assert_predictions_are_the_models(preview.model, preview)
    preview.model_choice.value = "current"  # and back
    assert preview.model is backbone and preview.predictions() == [] and preview.typed_positions == [6]


def test_a_workbench_text_with_a_typed_mask_is_predicted_there(minilm_tokenizer, paris_model):
    bench = Workbench(paris_model, minilm_tokenizer, text="The cat sat on the mat.")
    masking = bench.masking
    assert masking.mode.value == "sample" and ("the Training tab's model", "training") in masking.model_choice.options
    bench.text_box.value = CAPITAL
    bench.run()
    assert masking.mode.value == "choose" and masking.text == CAPITAL
    assert [(position, top[0][0]) for position, top in masking.predictions()] == [(TYPED, "paris")]
    masking.toggle(4)  # france
    bench.run()  # the same text again: the choice stays
    assert [position for position, _ in masking.predictions()] == [4, TYPED]
