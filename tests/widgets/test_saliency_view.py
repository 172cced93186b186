"""The saliency view: the scores it sends are saliency()'s, its one drawing (live view, static copy and export alike)
shows every token escaped and coloured by the sign of its score, with ink that reads on each box, in the theme's
colours otherwise; a run under way replaces the title; its toolbar offers the targets the model's heads give, and
problems are shown in the panel instead of failing the cell."""

from __future__ import annotations

import re
import threading
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch
from tokenizers import AddedToken
from widgets_testlib import XSS, assert_safe_html, parse_html, tiny_config

from bertviz_lab.model import (
    BERT,
    BERTForCausalLM,
    BERTForMaskedLM,
    BERTForNextSentencePrediction,
    BERTForQuestionAnswering,
    BERTForSequenceClassification,
    BERTForTokenClassification,
    BERTTokenizerFast,
)
from bertviz_lab.trace import saliency
from bertviz_lab.trace import targets as TG
from bertviz_lab.widgets import SaliencyPanel
from bertviz_lab.widgets.figures import saliency as SF
from bertviz_lab.widgets.figures.export import svg_size, themed
from bertviz_lab.widgets.figures.theme import THEMES
from bertviz_lab.widgets.panels import saliency as SV
from bertviz_lab.widgets.panels.text_run import run_text
from bertviz_lab.widgets.views.front_end import all_css, css, esm

SCRIPT = "<script>"
SVG = "{http://www.w3.org/2000/svg}"
MASKED = "the cat sat on the [MASK] ."
PLAIN = "the cat sat on the mat ."


def reference(panel: SaliencyPanel) -> np.ndarray:
    """saliency() itself on the panel's batch, target, method, baseline and steps."""
    return saliency(panel.model, panel.encoded.encoding, panel.target, method=panel.method.value,
                    steps=panel.steps.value, baseline=panel.baseline.value, tokenizer=panel.tokenizer)[0].numpy()


def sent_scores(panel: SaliencyPanel) -> np.ndarray:
    """The float32 scores as the browser receives them (the synced bytes)."""
    return np.frombuffer(bytes(panel.view.get_state()["scores"]), dtype=np.float32)


def drawn_tokens(svg: str) -> list[dict]:
    """Every token box of a drawing, read back from its markup: index, position, box, fill, label, ink."""
    found = []
    for group in ET.fromstring(svg).iter(f"{SVG}g"):
        if group.get("class") != "bvl-token":
            continue
        box = next(r for r in group.iter(f"{SVG}rect") if r.get("class") == "bvl-token-box")
        text = group.find(f"{SVG}text")
        found.append({"index": int(group.get("data-index")), "position": int(group.get("data-position")),
                      "x": float(box.get("x")), "y": float(box.get("y")), "width": float(box.get("width")),
                      "fill": box.get("fill"), "label": text.text, "ink": text.get("fill"),
                      "ink_class": text.get("class")})
    return found


def assert_themed_figure(svg: str) -> ET.Element:
    """The figure contract: one standalone SVG, root classes bvl-fig bvl-saliency, the theme's ground first, no font
    families, no inline styles, and text colours of its own only on a coloured token box."""
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg" and root.get("class") == "bvl-fig bvl-saliency"
    assert float(root.get("width")) > 0 and float(root.get("height")) > 0
    assert root[0].tag == f"{SVG}rect" and root[0].get("class") == "bvl-ground"
    on_boxes = {id(t) for g in root.iter(f"{SVG}g") if g.get("class") == "bvl-token" for t in g.iter(f"{SVG}text")}
    for node in root.iter():
        assert node.get("font-family") is None and node.get("style") is None, node.attrib
        if node.tag == f"{SVG}text" and id(node) not in on_boxes:
            assert node.get("fill") is None, node.attrib
    return root


def css_fill(sheet: str, css_class: str) -> str:
    """The fill a stylesheet gives text of `css_class` in the saliency figure."""
    found = re.search(rf"\.bvl-saliency text\.{css_class}\s*{{\s*fill:\s*(#[0-9a-f]{{6}})", sheet)
    assert found, css_class
    return found.group(1)


@pytest.fixture(scope="module")
def script_tokenizer(tmp_path_factory) -> BERTTokenizerFast:
    """A small vocabulary with `<script>` and the image-injection token kept whole as tokens."""
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", ".", "it", "was",
             "warm", '"', "&", SCRIPT, XSS]
    vocab = tmp_path_factory.mktemp("script_vocab") / "vocab.txt"
    vocab.write_text("\n".join(words) + "\n", encoding="utf-8")
    tokenizer = BERTTokenizerFast(vocab_file=vocab)
    tokenizer.backend_tokenizer.add_tokens([AddedToken(SCRIPT, normalized=False), AddedToken(XSS, normalized=False)])
    assert tokenizer.tokenize(f"the {SCRIPT} cat {XSS}") == ["the", SCRIPT, "cat", XSS]
    return tokenizer


@pytest.fixture(scope="module")
def script_model(script_tokenizer) -> BERTForMaskedLM:
    torch.manual_seed(5)
    return BERTForMaskedLM(tiny_config(script_tokenizer.vocab_size, hidden_size=32, num_attention_heads=2,
                                       intermediate_size=64)).eval()


@pytest.fixture(scope="module")
def nsp_model(minilm_tokenizer) -> BERTForNextSentencePrediction:
    torch.manual_seed(6)
    return BERTForNextSentencePrediction(tiny_config(minilm_tokenizer.vocab_size)).eval()


@pytest.fixture(scope="module")
def classifier(minilm_tokenizer) -> BERTForSequenceClassification:
    torch.manual_seed(7)
    return BERTForSequenceClassification(tiny_config(minilm_tokenizer.vocab_size, num_labels=3,
                                                     id2label={0: "negative", 1: "neutral", 2: "positive"})).eval()


# the scores ----------------------------------------------------------------------------------------------------
def test_the_scores_sent_are_saliencys_for_the_default_mlm_target(mlm_model, minilm_tokenizer):
    panel = SaliencyPanel(mlm_model, minilm_tokenizer, MASKED, steps=16)
    mask = panel.tokens.index("[MASK]")
    logits = mlm_model(**panel.encoded.inputs)[0, mask]
    assert panel.target == ("mlm", mask, int(logits.argmax()))
    assert panel.view.status == "ready"
    np.testing.assert_array_equal(sent_scores(panel), reference(panel))
    assert panel.tokens == minilm_tokenizer.convert_ids_to_tokens(panel.encoded.encoding["input_ids"][0].tolist())


@pytest.mark.parametrize("method, baseline", [("gradient_x_input", "pad"), ("integrated_gradients", "mask")])
def test_the_scores_follow_the_toolbar(pretraining_model, minilm_tokenizer, method, baseline):
    panel = SaliencyPanel(pretraining_model, minilm_tokenizer, MASKED, "it was warm .", steps=8)
    panel.background = False
    panel.method.value, panel.baseline.value = method, baseline
    np.testing.assert_array_equal(sent_scores(panel), reference(panel))
    for key in ("nsp", panel.options()[1][1]):
        panel.target_choice.value = key
        np.testing.assert_array_equal(sent_scores(panel), reference(panel))


def test_a_backbone_scores_a_function_of_its_output_and_one_hidden_unit(backbone, minilm_tokenizer):
    panel = SaliencyPanel(backbone, minilm_tokenizer, PLAIN, steps=8)
    assert panel.target is TG.cls_norm and "[CLS]" in panel.view.subtitle
    assert "no task head" in panel.view.note
    np.testing.assert_array_equal(sent_scores(panel), reference(panel))
    panel.background = False
    panel.target_choice.value = "cls-unit"
    panel.unit.value = 7
    assert panel.target == TG.HiddenUnit(7) and "unit 7" in panel.view.subtitle
    assert panel.unit_box.layout.display is None
    np.testing.assert_array_equal(sent_scores(panel), reference(panel))
    direct = saliency(backbone, panel.encoded.encoding, lambda out: out.last_hidden_state[:, 0, 7], steps=8,
                      tokenizer=minilm_tokenizer)[0].numpy()
    np.testing.assert_allclose(sent_scores(panel), direct, rtol=1e-6, atol=1e-9)


def test_show_run_reuses_the_runs_batch_and_predictions(mlm_model, minilm_tokenizer, monkeypatch):
    panel = SaliencyPanel(mlm_model, minilm_tokenizer, PLAIN, steps=8)
    run = run_text(mlm_model, minilm_tokenizer, MASKED)

    def no_forward(*_, **__):
        raise AssertionError("show_run encoded or ran the model again")

    monkeypatch.setattr(SV, "encode_text", no_forward)
    monkeypatch.setattr(SV, "_forward", no_forward)
    panel.show_run(run)
    assert panel.encoded is run.encoded and panel.text == MASKED
    mask = panel.tokens.index("[MASK]")
    assert panel.target == ("mlm", mask, int(run.output[0, mask].argmax()))
    np.testing.assert_array_equal(sent_scores(panel),
                                  saliency(mlm_model, run.encoded.encoding, panel.target, steps=8,
                                           tokenizer=minilm_tokenizer)[0].numpy())


def test_nothing_is_recomputed_unless_text_target_method_baseline_or_steps_change(pretraining_model, minilm_tokenizer,
                                                                                  monkeypatch):
    calls = []

    def counting(*args, **kwargs):
        calls.append(kwargs["method"])
        return saliency(*args, **kwargs)

    monkeypatch.setattr(SV, "saliency", counting)
    panel = SaliencyPanel(pretraining_model, minilm_tokenizer, MASKED, steps=8, method="gradient_x_input")
    panel.background = False
    assert len(calls) == 1
    panel.steps.value, panel.baseline.value = 16, "mask"  # gradient × input has neither
    panel.set_text(MASKED)
    assert len(calls) == 1
    first = panel.target_choice.value
    panel.target_choice.value = "nsp"
    panel.target_choice.value = first
    panel.method.value = "integrated_gradients"
    panel.method.value = "gradient_x_input"
    panel.show_run(run_text(pretraining_model, minilm_tokenizer, MASKED))
    assert calls == ["gradient_x_input", "gradient_x_input", "integrated_gradients"]
    panel.rerun()
    assert len(calls) == 4


def test_toolbar_changes_compute_in_the_background_and_show_the_newest(backbone, minilm_tokenizer, monkeypatch):
    panel = SaliencyPanel(backbone, minilm_tokenizer, PLAIN, steps=8)
    release, started = threading.Event(), threading.Event()

    def slow(*args, **kwargs):
        started.set()
        assert release.wait(30)
        return saliency(*args, **kwargs)

    monkeypatch.setattr(SV, "saliency", slow)
    panel.method.value = "gradient_x_input"  # returns at once; the worker waits in saliency
    assert started.wait(10)
    assert panel.view.status == "computing"
    # the run's name replaces the old figure's title; the previous tokens stay, dimmed, with the same scores
    root = ET.fromstring(panel.view.svg)
    assert root.get("data-status") == "computing" and panel.to_svg() == panel.view.svg
    assert root.get("data-title").startswith("computing … Saliency · gradient × input")
    shown = ["".join(t.itertext()) for t in root.iter(f"{SVG}text") if "bvl-title" in t.get("class", "").split()]
    assert shown == [root.get("data-title")] and "integrated gradients" not in panel.view.svg
    assert [g for g in root.iter(f"{SVG}g") if g.get("class") == "bvl-body bvl-stale"]
    assert len(drawn_tokens(panel.view.svg)) == len(panel.tokens)
    panel.method.value = "integrated_gradients"  # kept: shown at once, the running job is no longer wanted
    assert panel.view.status == "ready" and "integrated gradients" in panel.view.title
    assert ET.fromstring(panel.view.svg).get("data-status") == "ready" and "bvl-stale" not in panel.view.svg
    panel.steps.value = 4  # the newest request, computed after the running one
    assert panel.view.status == "computing"
    release.set()
    assert panel.wait(60)
    assert panel.view.status == "ready" and "4 steps" in panel.view.title
    np.testing.assert_array_equal(sent_scores(panel), reference(panel))


# the figure ----------------------------------------------------------------------------------------------------
def test_every_token_is_escaped_in_the_svg_and_sent_whole(script_model, script_tokenizer):
    text, text_b = f'the {SCRIPT} cat " & sat', f"it was {XSS} warm"
    panel = SaliencyPanel(script_model, script_tokenizer, text, text_b, steps=8)
    assert SCRIPT in panel.view.tokens and XSS in panel.view.tokens  # the browser sets them with textContent
    for markup in (panel.to_svg(), panel.static_html(), panel._repr_mimebundle_()["text/html"]):
        assert_safe_html(markup)
        assert "&lt;script&gt;" in markup and SCRIPT not in markup
        shown = "".join(parse_html(markup).text)
        for token in panel.tokens:
            assert token in shown
    code = esm("saliency_view.js")
    assert "innerHTML" not in code and "insertAdjacentHTML" not in code and "textContent" in code


def test_colours_follow_the_sign_of_the_scores_on_a_symmetric_scale(mlm_model, minilm_tokenizer):
    panel = SaliencyPanel(mlm_model, minilm_tokenizer, "the cat sat on the mat because it was [MASK] .",
                          method="gradient_x_input")
    scores = sent_scores(panel)
    assert (scores > 0).any() and (scores < 0).any()
    limit = float(np.abs(scores).max())
    assert panel.view.limit == pytest.approx(limit)
    boxes = drawn_tokens(panel.to_svg())
    assert [b["index"] for b in boxes] == list(range(len(panel.tokens)))
    assert [b["position"] for b in boxes] == panel.view.positions == list(range(len(panel.tokens)))
    for box, score in zip(boxes, scores):
        fill = box["fill"]
        red, blue = int(fill[1:3], 16), int(fill[5:7], 16)
        if abs(score) > 0.02 * limit:
            assert (red > blue) == (score > 0), (box, score)
        if score == 0:
            assert fill == SF.hex_color(SF.CODES // 2) == "#f7f7f7"
    strongest = int(np.abs(scores).argmax())
    assert boxes[strongest]["fill"] in (SF.hex_color(0), SF.hex_color(SF.CODES - 1))
    # the colour bar's ticks: -limit at its left end, 0 in the middle, +limit at its right end
    bar = next(g for g in ET.fromstring(panel.to_svg()).iter(f"{SVG}g") if g.get("class") == "bvl-colorbar")
    frame = next(r for r in bar.iter(f"{SVG}rect") if r.get("class") == "bvl-rule")
    left, width = float(frame.get("x")), float(frame.get("width"))
    ticks = {t.text: (float(t.get("x")) - left) / width for t in bar.iter(f"{SVG}text")
             if "bvl-colorbar-tick" in t.get("class", "")}
    assert ticks["0"] == pytest.approx(0.5, abs=1e-3)
    # a negative tick carries a true minus sign (U+2212), not a hyphen
    assert ticks[f"\u2212{limit:.3g}"] == pytest.approx(0, abs=1e-3)
    assert ticks[f"{limit:.3g}"] == pytest.approx(1, abs=1e-3)


def test_ink_on_every_token_box_reads_and_every_other_text_takes_the_themes_colours(mlm_model, minilm_tokenizer):
    panel = SaliencyPanel(mlm_model, minilm_tokenizer, "the cat sat on the mat because it was [MASK] . " * 3,
                          method="gradient_x_input")
    svg = panel.to_svg()
    assert svg == panel.view.svg and svg in panel.static_html()
    assert_themed_figure(svg)
    sheet = css("saliency_view")
    inks = set()
    for box in drawn_tokens(svg):
        assert SF.contrast(box["ink"], box["fill"]) >= 4.5, box
        assert css_fill(sheet, box["ink_class"]) == box["ink"]  # what the page's stylesheet paints it with
        inks.add(box["ink"])
    assert len(inks) == 2  # strong scores are dark boxes: light ink; weak ones are light: dark ink
    assert all(css_fill(all_css(), name) == ink for name, ink in SF.INK.items())  # static copies carry it too
    # every code of the palette has an ink that reads on it (black or white: one of them is always >= 4.58:1)
    assert min(SF.contrast(SF.INK[SF.ink_class(SF.hex_color(c))], SF.hex_color(c)) for c in range(SF.CODES)) >= 4.5
    for name in set(re.findall(r"var\((--[\w-]+)", sheet)):
        assert all(name in THEMES[theme] for theme in ("light", "dark")), name
    assert SF.contrast("#ffffff", "#000000") == pytest.approx(21) and SF.contrast("#777777", "#777777") == 1


def test_the_title_names_method_target_baseline_and_steps(pretraining_model, minilm_tokenizer):
    panel = SaliencyPanel(pretraining_model, minilm_tokenizer, MASKED, steps=12, baseline="mask")
    svg = panel.to_svg()
    assert "integrated gradients" in svg and "[MASK] baseline" in svg and "12 steps" in svg
    assert "target: MLM logit of" in svg and "[MASK], top 1" in svg
    panel.background = False
    panel.target_choice.value = "nsp"
    panel.method.value = "gradient_x_input"
    svg = panel.to_svg()
    assert "gradient × input" in svg and "target: NSP logit of IsNext" in svg
    assert panel.baseline.disabled and panel.steps.disabled
    assert panel.export_bar.name == "saliency-gradient-x-input-nsp"


def test_tokens_wrap_in_reading_order_and_sentence_b_starts_a_line(backbone, minilm_tokenizer):
    words = " ".join(["cat", "sat", "on", "the", "mat"] * 12)
    panel = SaliencyPanel(backbone, minilm_tokenizer, words, "it was warm .", method="gradient_x_input")
    drawn, segments = drawn_tokens(panel.to_svg()), panel.encoded.encoding["token_type_ids"][0].tolist()
    boxes = [(b["x"], b["y"], b["width"]) for b in drawn]
    rows = sorted({y for _, y, _ in boxes})
    assert len(rows) >= 3  # wrapped
    assert [(y, x) for x, y, _ in boxes] == sorted((y, x) for x, y, _ in boxes)  # reading order
    assert all(x + w <= SF.MARGIN + SF.GUTTER + SF.WRAP_W for x, _, w in boxes)
    first_b = segments.index(1)
    assert boxes[first_b][0] == boxes[0][0] and boxes[first_b][1] > boxes[first_b - 1][1]
    root = ET.fromstring(panel.to_svg())
    gutter = [(float(t.get("y")), t.text) for t in root.iter(f"{SVG}text") if "bvl-segment" in t.get("class", "")]
    assert [text for _, text in gutter] == ["A", "B"] and gutter[1][0] > boxes[first_b][1] > gutter[0][0]
    width, height = svg_size(panel.to_svg())
    assert max(x + w for x, _, w in boxes) <= width and max(y for _, y, _ in boxes) < height


def test_a_long_text_shows_the_truncation_notice(backbone, minilm_tokenizer):
    panel = SaliencyPanel(backbone, minilm_tokenizer, " ".join(["word"] * 200), method="gradient_x_input")
    limit = backbone.config.max_position_embeddings
    assert len(panel.tokens) == limit
    assert "bvl-truncation-notice" in panel.truncation_notice.value and f"at most {limit}" in panel.view.note
    assert f"at most {limit}" in panel.to_svg()


def test_save_writes_svg_and_png(backbone, minilm_tokenizer, tmp_path):
    panel = SaliencyPanel(backbone, minilm_tokenizer, PLAIN, steps=4)
    svg = panel.save(tmp_path / "saliency.svg")
    assert svg.read_text(encoding="utf-8") == themed(panel.to_svg(), all_css(), "light")
    png = panel.save(tmp_path / "figures" / "saliency.png", scale=2)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == tuple(round(2 * v) for v in svg_size(panel.to_svg()))
    with pytest.raises(ValueError, match=r"\.svg or \.png"):
        panel.save(tmp_path / "saliency.pdf")


def test_the_export_button_writes_the_figure(backbone, minilm_tokenizer, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    panel = SaliencyPanel(backbone, minilm_tokenizer, PLAIN, steps=4)
    path = panel.export_bar.export()
    assert path is not None and path.name.startswith("saliency-integrated-gradients-cls-norm")
    assert path.read_text(encoding="utf-8") == themed(panel.to_svg(), all_css(), "light")


# the targets ---------------------------------------------------------------------------------------------------
def test_targets_offered_match_the_models_heads(mlm_model, pretraining_model, nsp_model, classifier, backbone,
                                                minilm_tokenizer):
    mlm = SaliencyPanel(mlm_model, minilm_tokenizer, "the [MASK] sat on the [MASK] .", method="gradient_x_input")
    keys = [key for _, key in mlm.options()]
    assert len(keys) == 2 * TG.TOP_PREDICTIONS and all(key.startswith("mlm:") for key in keys)
    assert mlm.target_choice.value == keys[0] and mlm.target[1] == 2  # the first [MASK], top prediction

    pair = SaliencyPanel(pretraining_model, minilm_tokenizer, PLAIN, "it was warm .", method="gradient_x_input")
    assert pair.target == "nsp" and any(k.startswith("mlm:") for _, k in pair.options())
    masked_pair = SaliencyPanel(pretraining_model, minilm_tokenizer, MASKED, "it was warm .", method="gradient_x_input")
    assert masked_pair.target[0] == "mlm" and "nsp" in [k for _, k in masked_pair.options()]  # a [MASK] comes first
    single = SaliencyPanel(pretraining_model, minilm_tokenizer, PLAIN, method="gradient_x_input")
    assert single.target[0] == "mlm" and "the word itself" in single.view.subtitle

    nsp = SaliencyPanel(nsp_model, minilm_tokenizer, PLAIN, "it was warm .", method="gradient_x_input")
    assert [k for _, k in nsp.options()] == ["nsp"] and nsp.target == "nsp"

    classes = SaliencyPanel(classifier, minilm_tokenizer, PLAIN, method="gradient_x_input")
    predicted = int(classifier(**classes.encoded.inputs)[0].argmax())
    assert [k for _, k in classes.options()] == ["class:0", "class:1", "class:2"]
    assert classes.target == ("class", predicted) and "(predicted)" in classes.options()[predicted][0]
    assert "negative" in classes.options()[0][0]

    bare = SaliencyPanel(backbone, minilm_tokenizer, MASKED, method="gradient_x_input")
    assert [k for _, k in bare.options()] == ["cls-norm", "mean-norm", "cls-unit"] and bare.target is TG.cls_norm

    no_mask = SaliencyPanel(mlm_model, minilm_tokenizer, PLAIN, method="gradient_x_input")
    assert no_mask.target == ("mlm", 1, minilm_tokenizer.convert_tokens_to_ids("the"))  # the word itself
    assert "no [MASK]" in no_mask.view.note


def test_token_classifier_and_custom_targets(minilm_tokenizer, mlm_model):
    torch.manual_seed(8)
    tagger = BERTForTokenClassification(tiny_config(minilm_tokenizer.vocab_size, num_labels=4)).eval()
    panel = SaliencyPanel(tagger, minilm_tokenizer, PLAIN, method="gradient_x_input")
    assert panel.target[:2] == ("token", 1) and all(k.startswith("token:") for _, k in panel.options())
    np.testing.assert_array_equal(sent_scores(panel), reference(panel))

    def last_logit(output):
        return output[:, -1, 7]

    custom = SaliencyPanel(mlm_model, minilm_tokenizer, MASKED, target=last_logit, method="gradient_x_input")
    assert custom.target is last_logit and custom.target_choice.value == "custom"
    assert "custom function last_logit" in custom.view.subtitle
    np.testing.assert_array_equal(sent_scores(custom), reference(custom))
    offered = custom.options()[1][1]
    chosen = SaliencyPanel(mlm_model, minilm_tokenizer, MASKED, target=custom._choices[offered].target)
    assert chosen.target_choice.value == offered  # a shorthand the toolbar offers is chosen there


def test_question_answering_and_causal_lm_targets(minilm_tokenizer):
    torch.manual_seed(9)
    reader = BERTForQuestionAnswering(tiny_config(minilm_tokenizer.vocab_size)).eval()
    panel = SaliencyPanel(reader, minilm_tokenizer, "where is the cat ?", PLAIN, method="gradient_x_input")
    start, end = (int(logits[0].argmax()) for logits in reader(**panel.encoded.inputs))
    assert [k for _, k in panel.options()] == [f"start:{start}", f"end:{end}"]
    assert panel.target == TG.OutputLogit(0, start) and "answer-start logit" in panel.view.subtitle
    np.testing.assert_array_equal(sent_scores(panel), reference(panel))
    writer = BERTForCausalLM(tiny_config(minilm_tokenizer.vocab_size, is_decoder=True)).eval()
    panel = SaliencyPanel(writer, minilm_tokenizer, "the cat sat on the", method="gradient_x_input")
    last = len(panel.tokens) - 2  # the last word, not the [SEP] after it
    assert panel.target == ("mlm", last, int(writer(**panel.encoded.inputs)[0, last].argmax()))
    assert all(k.startswith(f"next:{last}:") for _, k in panel.options())
    np.testing.assert_array_equal(sent_scores(panel), reference(panel))


def test_the_default_model_is_a_backbone_scored_by_a_function_of_its_output():
    started = time.perf_counter()
    panel = SaliencyPanel(text="The cat sat on the mat.")
    elapsed = time.perf_counter() - started
    assert isinstance(panel.model, BERT) and panel.target is TG.cls_norm
    assert "length of the last layer's [CLS] vector" in panel.view.subtitle
    assert panel.tokens[:3] == ["[CLS]", "the", "cat"] and panel.view.status == "ready"
    np.testing.assert_array_equal(sent_scores(panel), reference(panel))
    assert elapsed < 60, f"integrated gradients at 64 steps took {elapsed:.1f} s"


# problems ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("model_name, target, says", [
    ("mlm_model", "mlm", "no [MASK]"),
    ("backbone", "mlm", "masked-LM head"),
    ("mlm_model", "nsp", "next-sentence head"),
    ("mlm_model", "class", "sequence-classification head"),
    ("mlm_model", "nonsense", "not offered"),
    ("mlm_model", ("mlm", 99, 5), "position 99 is out of range"),
    ("backbone", ("class", 1), "needs class_logits"),
])
def test_a_target_that_does_not_fit_is_shown_in_the_panel(request, minilm_tokenizer, model_name, target, says):
    model = request.getfixturevalue(model_name)
    panel = SaliencyPanel(model, minilm_tokenizer, PLAIN, target=target, method="gradient_x_input")  # no exception
    assert panel.view.status == "error" and says in panel.view.message
    assert says in panel.message.value.replace("&#x27;", "'") and "bvl-saliency-error" in panel.message.value
    assert "bvl-error" in panel.to_svg() and panel.view.tokens == []
    root = assert_themed_figure(panel.to_svg())
    warned = [t for t in root.iter(f"{SVG}text") if "bvl-warn" in t.get("class", "").split()]
    assert root.get("data-status") == "error" and [t.text for t in warned] == [panel.view.message]
    assert_safe_html(panel.to_svg(), must_show=None)
    panel.background = False  # a target that fits, chosen in the toolbar, draws again
    fitting = next(key for _, key in panel.options() if key not in ("unavailable", "custom"))
    panel.target_choice.value = fitting
    assert panel.view.status == "ready" and panel.message.value == ""
    assert "unavailable" not in [key for _, key in panel.options()]


def test_mlm_target_follows_the_text_and_text_problems_are_shown(mlm_model, minilm_tokenizer):
    panel = SaliencyPanel(mlm_model, minilm_tokenizer, PLAIN, target="mlm", method="gradient_x_input")
    assert panel.view.status == "error"
    panel.set_text(MASKED)
    assert panel.view.status == "ready" and panel.target[1] == panel.tokens.index("[MASK]")
    panel.set_text("   ")
    assert panel.view.status == "error" and "the text is empty" in panel.view.message
    panel.set_text(MASKED)
    assert panel.view.status == "ready"


def test_bad_arguments_raise_at_once(backbone, minilm_tokenizer):
    with pytest.raises(ValueError, match="method"):
        SaliencyPanel(backbone, minilm_tokenizer, PLAIN, method="occlusion")
    with pytest.raises(ValueError, match="baseline"):
        SaliencyPanel(backbone, minilm_tokenizer, PLAIN, baseline="zero")
    with pytest.raises(ValueError, match="steps"):
        SaliencyPanel(backbone, minilm_tokenizer, PLAIN, steps=0)
    with pytest.raises(TypeError, match="both a model and its tokenizer"):
        SaliencyPanel(backbone, None, PLAIN)


def test_score_text_keeps_what_a_float32_holds():
    for value in (0.0, 0.5329999923706055, -1.234567e-05, 123456.7, 3.0):
        assert float(SF.score_text(value)) == pytest.approx(value, rel=1e-6)
    assert SF.score_text(np.float32(0.1)) == "0.1"
