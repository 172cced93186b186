"""The activation-patching figures draw what their numbers say (cells, exact tips, escaped tokens, theme inks), and
the Patching panel shows exactly what trace.patch computes, says bad input in one line, computes once per set(),
and tells on_open listeners which layer, head and position a cell is."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch
from widgets_testlib import XSS, assert_safe_html

from bertviz_lab.model import BERTConfig, BERTForMaskedLM
from bertviz_lab.trace import patch
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.contrast import contrast_ratio
from bertviz_lab.widgets.figures.patching import exact, head_grid_svg, patching_svg
from bertviz_lab.widgets.panels.patching import CLEAN, CORRUPTED, PatchingPanel

SVG = "{http://www.w3.org/2000/svg}"
INK = {"bvl-ink-black": "#000000", "bvl-ink-white": "#ffffff"}


def cells(svg: str) -> list[ET.Element]:
    return [e for e in ET.fromstring(svg).iter() if "bvl-cell" in e.get("class", "").split()]


def tip_numbers(tip: str) -> dict[str, float]:
    """restores / metric / clean / corrupted of a tip, as floats."""
    return {name: float(value) for name, value in re.findall(r"(restores|metric|clean|corrupted) (-?[0-9.]+|nan)",
                                                             tip)}


@pytest.fixture(scope="module")
def tiny(minilm_tokenizer):
    """The tiny random BERT of docs/guides/causal.md (2 layers, 2 heads) with MiniLM's tokenizer."""
    torch.manual_seed(0)
    return BERTForMaskedLM(BERTConfig.tiny(vocab_size=len(minilm_tokenizer))).eval(), minilm_tokenizer


# the figures ------------------------------------------------------------------------------------------------
VALUES = np.array([[0.8123, -0.25, 1.5], [0.0, 1.0, -1.75]], dtype=np.float32)
EFFECT = np.array([[2.4170, 0.4, 4.9], [-0.5, 3.1, -6.8]], dtype=np.float32)


def test_the_map_has_a_cell_per_layer_and_token_whose_tip_holds_the_exact_values():
    svg = patching_svg(VALUES, ["[CLS]", "france", "is"], title="t", note="n",
                       corrupted_tokens=["[CLS]", "italy", "is"], effect=EFFECT, clean=3.1, corrupted=-0.5)
    found = cells(svg)
    assert len(found) == 6
    for cell in found:
        row, col = int(cell.get("data-row")), int(cell.get("data-col"))
        tip = cell.get("data-tip")
        assert cell.find(f"{SVG}title").text == tip
        assert tip.startswith(f"layer {row} · {col}·")
        numbers = tip_numbers(tip)
        assert np.float32(numbers["restores"]) == VALUES[row, col]
        assert np.float32(numbers["metric"]) == EFFECT[row, col]
        assert numbers["clean"] == 3.1 and numbers["corrupted"] == -0.5
    first = next(c for c in found if c.get("data-row") == "0" and c.get("data-col") == "1")
    assert first.get("data-tip") == ("layer 0 · 1·france (corrupted: italy) · restores -0.2500 "
                                     "(metric 0.4000; clean 3.1000, corrupted -0.5000)")
    assert found[0].get("data-tip") == ("layer 0 · 0·[CLS] · restores 0.8123 "
                                        "(metric 2.4170; clean 3.1000, corrupted -0.5000)")
    labels = [e for e in ET.fromstring(svg).iter(f"{SVG}text") if "bvl-token" in e.get("class", "")]
    assert [label.text for label in labels] == ["[CLS]", "france*", "is"]
    assert "1·france → italy" in svg


def test_exact_keeps_every_digit_a_value_needs():
    for value in (0.1, 1 / 3, 2.5e-7, -123.456, 7.0):  # float64: read back as float64
        assert float(exact(value)) == value
        assert len(exact(value).split(".")[1]) >= 4
    single = np.float32(1 / 3)  # a float32 (what patch() returns): its shortest text that reads back as it
    assert exact(float(single)) == "0.33333334" and np.float32(exact(float(single))) == single
    assert exact(float("nan")) == "nan"


def test_cells_beyond_the_scale_are_hatched_in_the_ink_that_reads_on_them():
    svg = patching_svg(VALUES, ["a", "b", "c"])
    marks = re.findall(r'<path class="bvl-clipped-mark ([\w-]+)" data-cells="(\d+)"', svg)
    assert sum(int(count) for _, count in marks) == 2  # 1.5 and -1.75
    for ink, _ in marks:
        for end in (D.DIVERGING[0], D.DIVERGING[D.TOP_CODE]):
            assert contrast_ratio(INK[ink], "#%02x%02x%02x" % tuple(end)) >= 4.5
    assert "min −1.75, max 1.5" in svg
    assert "clipped" not in patching_svg(np.zeros((2, 3)), ["a", "b", "c"])


def test_tokens_are_escaped_everywhere():
    svg = patching_svg(VALUES, [XSS, "&", '"'], corrupted_tokens=["<b>", "&", '"'], title=XSS, note=XSS)
    ET.fromstring(svg)
    assert "<img" not in svg and "<b>" not in svg
    assert any(XSS in c.get("data-tip") for c in cells(svg))


def test_the_figures_take_text_colours_from_the_theme_and_inks_that_read_on_their_cells():
    values = np.array([[-1.0, -0.4, 0.0, 0.4, 1.0]])
    for svg in (patching_svg(values, list("abcde")), head_grid_svg(values)):
        root = ET.fromstring(svg)
        for text in root.iter(f"{SVG}text"):
            assert text.get("fill") is None and "fill" not in (text.get("style") or "")
    grid = ET.fromstring(head_grid_svg(values))
    fills = {(c.get("data-row"), c.get("data-col")): c.get("fill") for c in cells(head_grid_svg(values))}
    labels = [t for t in grid.iter(f"{SVG}text") if t.get("class", "").startswith("bvl-ink-")]
    assert len(labels) == 5
    for col, label in enumerate(labels):
        assert contrast_ratio(INK[label.get("class").split()[0]], fills[("0", str(col))]) >= 4.5


def test_the_head_grid_has_a_cell_per_head_and_marks_the_selected_one():
    values = np.arange(6, dtype=np.float32).reshape(2, 3) / 10
    svg = head_grid_svg(values, effect=values * 3, clean=1.0, corrupted=0.25, selected=(1, 2))
    found = cells(svg)
    assert len(found) == 6
    for cell in found:
        row, col = int(cell.get("data-row")), int(cell.get("data-col"))
        assert cell.get("data-tip").startswith(f"layer {row} · head {col} · restores ")
        assert np.float32(tip_numbers(cell.get("data-tip"))["restores"]) == values[row, col]
    assert '<g class="bvl-selected-cell" data-row="1" data-col="2">' in svg


def test_a_cell_without_a_value_opens_nothing():
    svg = patching_svg(np.array([[np.nan, 0.5]]), ["a", "b"])
    first, second = cells(svg)
    assert first.get("data-opens") == "false" and "restores nan" in first.get("data-tip")
    assert second.get("data-opens") is None


# the panel --------------------------------------------------------------------------------------------------
def direct(model, tokenizer, target, foil, metric, point):
    """patch() called by hand, with the metric written out."""
    clean, corrupted = tokenizer([CLEAN], return_tensors="pt"), tokenizer([CORRUPTED], return_tensors="pt")
    mask = clean["input_ids"][0].tolist().index(tokenizer.mask_token_id)
    t, f = tokenizer.convert_tokens_to_ids([target, foil])
    if metric == "logit difference":
        def score(logits):
            return logits[0, mask, t] - logits[0, mask, f]
    else:
        def score(logits):
            return torch.softmax(logits[0, mask].float(), dim=-1)[t]
    return patch(model, clean, corrupted, score, point=point)


@pytest.mark.parametrize("metric", ["logit difference", "probability"])
@pytest.mark.parametrize("point", ["hidden", "attn_out", "mlp_out", "head_out"])
def test_the_panel_shows_what_patch_computes(tiny, metric, point):
    model, tokenizer = tiny
    panel = PatchingPanel(model, tokenizer, metric=metric, point=point)
    assert panel.error == ""
    expected = direct(model, tokenizer, panel.target, panel.foil, metric, point)
    assert torch.allclose(panel.result.effect, expected.effect, atol=1e-6)
    assert abs(panel.result.clean - expected.clean) < 1e-6 and abs(panel.result.corrupted - expected.corrupted) < 1e-6
    found = cells(panel.view.svg)
    assert len(found) == expected.effect.numel()
    normalized = panel.result.normalized.numpy()
    for cell in found:
        row, col = int(cell.get("data-row")), int(cell.get("data-col"))
        assert np.float32(tip_numbers(cell.get("data-tip"))["restores"]) == normalized[row, col]
    assert panel.to_svg() == panel.view.svg
    assert exact(panel.result.clean) in panel.view.svg and exact(panel.result.corrupted) in panel.view.svg


def test_the_defaults_are_the_models_top_predictions_at_the_mask(tiny):
    model, tokenizer = tiny
    panel = PatchingPanel(model, tokenizer)
    inputs = panel.inputs
    with torch.no_grad():
        clean = model(**inputs.clean.inputs)[0, inputs.mask]
        corrupted = model(**inputs.corrupted.inputs)[0, inputs.mask]
    assert panel.target == tokenizer.convert_ids_to_tokens([int(clean.argmax())])[0]
    top_foils = tokenizer.convert_ids_to_tokens(corrupted.topk(2).indices.tolist())
    assert panel.foil == next(t for t in top_foils if t != panel.target)
    assert panel.export_bar.name == "patching-hidden-france-vs-italy"


@pytest.mark.parametrize(("texts", "tokens", "needle"), [
    (("The capital of France is.", "The capital of Italy is."), {}, "the clean text has no [MASK]"),
    ((CLEAN, "The capital of the Netherlands is [MASK]."), {}, "clean has 9, corrupted 10"),
    ((CLEAN, CORRUPTED), {"target": "xyzzyq"}, "the target 'xyzzyq' is not one token of the vocabulary"),
    ((CLEAN, CORRUPTED), {"foil": "two words"}, "the foil 'two words' is not one token of the vocabulary"),
])
def test_bad_input_is_one_line(tiny, texts, tokens, needle):
    model, tokenizer = tiny
    panel = PatchingPanel(model, tokenizer, *texts, **tokens)
    assert needle in panel.error
    assert panel.view.message == panel.error and "\n" not in panel.error
    assert panel.view.svg == ""
    with pytest.raises(ValueError, match=re.escape(panel.error[:20])):
        panel.to_svg()
    assert panel.error in panel.static_html().replace("&#x27;", "'").replace("&quot;", '"')


def test_a_model_without_a_masked_lm_head_is_one_line(backbone, minilm_tokenizer):
    panel = PatchingPanel(backbone, minilm_tokenizer)
    assert panel.error.startswith("activation patching at the mask needs a masked-LM head")
    assert "BERTForMaskedLM.from_pretrained" in panel.error
    assert panel.result is None


def test_same_metric_on_both_texts_is_one_line(tiny):
    model, tokenizer = tiny
    panel = PatchingPanel(model, tokenizer, CLEAN, CLEAN)
    assert "nothing to restore" in panel.error and panel.view.svg == ""


def test_bad_names_raise_at_once(tiny):
    model, tokenizer = tiny
    with pytest.raises(ValueError, match="metric must be one of"):
        PatchingPanel(model, tokenizer, metric="kl")
    panel = PatchingPanel(model, tokenizer)
    with pytest.raises(ValueError, match="point must be one of"):
        panel.set(point="resid_pre")


def test_set_computes_once_and_hold_batches_texts_and_controls(tiny, monkeypatch):
    model, tokenizer = tiny
    panel = PatchingPanel(model, tokenizer)
    calls = []
    from bertviz_lab.widgets.panels import patching as module
    monkeypatch.setattr(module, "patch", lambda *a, **k: calls.append(k) or patch(*a, **k))
    before = panel.redraws
    panel.set(target="paris", foil="rome", metric="probability", point="mlp_out")
    assert panel.redraws == before + 1 and len(calls) == 1
    assert (panel.target, panel.foil, panel.metric, panel.point) == ("paris", "rome", "probability", "mlp_out")
    assert panel.result.point == "mlp_out"
    with panel.hold():
        panel.set_texts("The capital of Spain is [MASK].", CORRUPTED)
        panel.set(point="hidden")
        panel.metric_toggle.value = "logit difference"
    assert panel.redraws == before + 2 and len(calls) == 2
    assert panel.export_bar.name == "patching-hidden-spain-vs-italy"
    expected = direct(model, tokenizer, "paris", "rome", "logit difference", "hidden")  # CLEAN's mask, same place
    assert panel.result.effect.shape == expected.effect.shape


def test_the_controls_recompute_and_an_empty_target_is_the_top_prediction_again(tiny):
    model, tokenizer = tiny
    panel = PatchingPanel(model, tokenizer)
    default = panel.target
    panel.target_box.value = "paris"
    assert panel.result is not None and "paris" in panel.metric_line()
    expected = direct(model, tokenizer, "paris", panel.foil, "logit difference", "hidden")
    assert torch.allclose(panel.result.effect, expected.effect, atol=1e-6)
    panel.target_box.value = ""
    assert panel.target == default
    panel.point_toggle.value = "head_out"
    assert panel.result.point == "head_out" and panel.result.effect.shape == (2, 2)


def test_on_open_gives_layer_and_position_or_layer_and_head(tiny):
    model, tokenizer = tiny
    panel = PatchingPanel(model, tokenizer)
    opened = []
    panel.on_open(lambda layer, head, position: opened.append((layer, head, position)))
    panel.view.open_cell(1, 6)
    assert opened == [(1, None, 6)]
    assert '<g class="bvl-selected-cell" data-row="1" data-col="6">' in panel.view.svg
    assert panel.to_svg() == panel.view.svg
    panel.set(point="head_out")
    panel.view.open_cell(0, 1)
    assert opened == [(1, None, 6), (0, 1, None)]
    assert panel.view.selected == [0, 1]


def test_set_model_patches_the_other_model_on_the_same_texts(tiny, pretraining_model):
    model, tokenizer = tiny
    panel = PatchingPanel(model, tokenizer, target="paris", foil="rome")
    panel.set_model(pretraining_model, tokenizer)
    clean, corrupted = tokenizer([CLEAN], return_tensors="pt"), tokenizer([CORRUPTED], return_tensors="pt")
    t, f = tokenizer.convert_tokens_to_ids(["paris", "rome"])
    expected = patch(pretraining_model, clean, corrupted, lambda out: out[0][0, 6, t] - out[0][0, 6, f])
    assert torch.allclose(panel.result.effect, expected.effect, atol=1e-6)
    assert len(cells(panel.to_svg())) == expected.effect.numel()
    panel.release()
    assert panel.result is None and panel.inputs is None


def test_the_panel_escapes_what_the_model_predicts(xss_model, xss_tokenizer):
    panel = PatchingPanel(xss_model, xss_tokenizer, "the cat sat on the [MASK] .", "the dog sat on the [MASK] .",
                          foil="mat")
    assert panel.target == XSS and panel.error == ""
    assert_safe_html(panel.static_html())
    assert "<img" not in panel.to_svg()
