"""The logit lens figure draws the numbers it is given (one cell per layer and rank, exact values in each tip, tokens
escaped, colours only on cells), and LogitLensPanel shows exactly what trace.logit_lens computes, runs the model once
per text and model, says what is wrong in one line, and exports the drawing on screen."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch
from family_models import build_family_checkpoint
from widgets_testlib import XSS, assert_safe_html

import bertviz_lab
from bertviz_lab.model.encoding import encode_text
from bertviz_lab.trace import LayerTop, logit_lens
from bertviz_lab.trace.logit_lens import mlm_head
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.cell_grid import exact
from bertviz_lab.widgets.figures.logit_lens import TrackedToken, logit_lens_svg
from bertviz_lab.widgets.panels.logit_lens import LogitLensPanel, vocabulary_token

SVG = "{http://www.w3.org/2000/svg}"
TEXT = "The capital of France is [MASK]."

# 3 layers (4 rows with the embeddings), k = 3; numbers that are not round in float32 or float64
ROWS = [LayerTop(0, [5, 6, 7], [0.5, 0.25, 0.125], ["the", XSS, "cat"]),
        LayerTop(1, [6, 5, 8], [0.31245601177215576, 0.1, 3.1e-05], [XSS, "the", 'a"b&c']),
        LayerTop(2, [9, 5, 6], [0.7, 0.2, 0.05], ["supercalifragilisticexpialidocious", "the", XSS]),
        LayerTop(3, [5, 9, 6], [1.0, 0.0, 0.0], ["the", "supercalifragilisticexpialidocious", XSS])]
LOGITS = [[7.1234, -1.5, 0.0], [2.0, 1.0, 0.5], [3.25, 1.0, -2.0], [9.0, -9.0, -10.0]]


def read_back(text: str, value: float) -> bool:
    """Whether a tip's number names `value` exactly: as written (a float) or as the float32 its digits are (the
    lens's softmax is float32, written with a float32's own digits)."""
    return value in (float(text), float(np.float32(text)))


def cells(svg: str) -> list[ET.Element]:
    return [e for e in ET.fromstring(svg).iter() if "bvl-cell" in (e.get("class") or "").split()]


def test_the_figure_draws_one_cell_per_layer_and_rank_with_exact_tips():
    svg = logit_lens_svg(ROWS, 6, "[MASK]", note="a note", logits=LOGITS)
    found = cells(svg)
    assert len(found) == len(ROWS) * 3
    for cell in found:
        r, c = int(cell.get("data-row")), int(cell.get("data-col"))
        row = ROWS[r]
        tip = cell.get("data-tip")
        layer = "embeddings" if r == 0 else f"layer {r}"
        logit = exact(LOGITS[r][c])
        assert tip == f"{layer} · rank {c + 1} · {row.tokens[c]} · p = {exact(row.probs[c])} (logit {logit})"
        assert read_back(re.search(r"p = (\S+)", tip).group(1), row.probs[c])  # exact, not rounded
        assert cell.find(f"{SVG}title").text == tip
        assert cell.get("data-opens") is None  # a rank cell opens (follows its token)
    assert exact(0.31245601177215576) == "0.312456"  # a float32's own digits, not float64's tail
    root = ET.fromstring(svg)
    assert root.get("data-position") == "6" and root.get("data-k") == "3"
    labels = [t.text for t in root.iter(f"{SVG}text") if "bvl-tick" in (t.get("class") or "")]
    assert labels[:3] == ["1", "2", "3"]
    assert labels[3:7] == ["embeddings", "layer 1", "layer 2", "layer 3 · prediction"]
    assert "logit lens · position 6 · [MASK]" in svg


def test_the_figure_colours_cells_by_probability_with_the_ink_that_reads_and_no_theme_colours():
    svg = logit_lens_svg(ROWS, 6, "[MASK]", logits=LOGITS)
    found = {(int(c.get("data-row")), int(c.get("data-col"))): c for c in cells(svg)}
    top, bottom = found[(3, 0)], found[(3, 1)]  # p = 1 and p = 0
    assert top.find(f"{SVG}rect").get("fill") == "#%02x%02x%02x" % tuple(D.PALETTE[D.TOP_CODE])
    assert bottom.find(f"{SVG}rect").get("fill") == "#%02x%02x%02x" % tuple(D.PALETTE[0])
    assert top.find(f"{SVG}text").get("class").startswith("bvl-ink-white")
    assert bottom.find(f"{SVG}text").get("class").startswith("bvl-ink-black")
    root = ET.fromstring(svg)
    for text in root.iter(f"{SVG}text"):  # text colours come from figure.css: never a literal fill or style
        assert text.get("fill") is None and text.get("style") is None
    assert 'class="bvl-colorbar-title"' in svg and ">probability</text>" in svg


def test_the_figure_escapes_hostile_tokens_and_shortens_long_ones():
    track = TrackedToken(XSS, 6, [0.5, 0.1, 0.2, 0.3], [2, 1, 3, 3], [1.0, 2.0, 3.0, 4.0])
    svg = logit_lens_svg(ROWS, 2, XSS, title="", note=XSS, actual=XSS, logits=LOGITS, track=track)
    ET.fromstring(svg)
    assert_safe_html(svg)
    assert "supercalifragil…" in svg  # drawn shortened, whole in the tip
    assert any("supercalifragilisticexpialidocious ·" in c.get("data-tip") for c in cells(svg))
    assert 'a"b&c' in [c.get("data-tip").split(" · ")[2] for c in cells(svg)]


def test_the_followed_token_column_and_the_marks():
    track = TrackedToken("the", 5, [0.5, 0.1, 0.2, 1.0], [1, 2, 2, 1], [1.5, 2.0, 3.0, 4.0])
    svg = logit_lens_svg(ROWS, 6, "[MASK]", selected=(1, 2), actual="the", logits=LOGITS, track=track)
    followed = [c for c in cells(svg) if c.get("data-col") == "3"]
    assert len(followed) == len(ROWS) and all(c.get("data-opens") == "false" for c in followed)
    assert [c.get("data-tip") for c in followed][1] == "layer 1 · the (followed) · rank 2 · p = 0.1 (logit 2.0)"
    assert [c.find(f"{SVG}text").text for c in followed] == ["#1", "#2", "#2", "#1"]
    root = ET.fromstring(svg)
    actual = [(e.get("data-row"), e.get("data-col")) for e in root.iter()
              if "bvl-lens-actual" in (e.get("class") or "")]
    assert actual == [("0", "0"), ("1", "1"), ("2", "1"), ("3", "0")]  # every cell predicting the input's token
    marks = [e for e in root.iter() if e.get("class") == "bvl-selected-cell"]
    assert [(m.get("data-row"), m.get("data-col")) for m in marks] == [("1", "2")]


@pytest.fixture
def forwards(mlm_model):
    """How many times the model's forward runs (a hook on the model itself)."""
    count = [0]
    handle = mlm_model.register_forward_hook(lambda *_: count.__setitem__(0, count[0] + 1))
    yield count
    handle.remove()


def test_the_panel_shows_what_logit_lens_computes(mlm_model, minilm_tokenizer):
    panel = LogitLensPanel(mlm_model, minilm_tokenizer, TEXT, k=4)
    encoded = encode_text(mlm_model, minilm_tokenizer, TEXT)
    lens = logit_lens(mlm_model, encoded.inputs, tokenizer=minilm_tokenizer)
    assert torch.equal(panel.lens.logits, lens.logits)
    mask = encoded.inputs["input_ids"][0].tolist().index(minilm_tokenizer.mask_token_id)
    assert panel.position.value == mask and panel.position.options[mask] == (f"{mask} · [MASK]", mask)
    tips = {(int(c.get("data-row")), int(c.get("data-col"))): c.get("data-tip") for c in cells(panel.view.svg)}
    assert len(tips) == (lens.num_layers + 1) * 4
    for row in lens.top(mask, 4):
        for rank, (token, prob, token_id) in enumerate(zip(row.tokens, row.probs, row.ids)):
            logit = float(lens.logits[row.layer, mask, token_id])
            name = "embeddings" if row.layer == 0 else f"layer {row.layer}"
            assert tips[(row.layer, rank)] == (f"{name} · rank {rank + 1} · {token} · p = {exact(prob)} "
                                               f"(logit {exact(logit)})")
    assert panel.to_svg() == panel.view.svg and panel.view.title == f"logit lens · position {mask} · [MASK]"
    assert panel.to_svg() in panel.static_html()


def test_without_a_mask_the_lens_looks_at_the_last_word(mlm_model, minilm_tokenizer):
    panel = LogitLensPanel(mlm_model, minilm_tokenizer, "The cat sat")
    assert panel.position.label == "3 · sat"  # [CLS] the cat sat [SEP]


def test_position_k_and_the_followed_token_read_the_kept_lens_without_a_forward(mlm_model, minilm_tokenizer,
                                                                                   forwards):
    panel = LogitLensPanel(mlm_model, minilm_tokenizer, TEXT)
    assert forwards[0] == 1
    lens = panel.lens
    drawn = []
    panel.on_figure_changed(lambda: drawn.append(panel.view.svg))
    panel.position.value = 2
    panel.k.value = 7
    panel.track.value = "Paris"  # not a vocabulary entry (uncased): the one token it reads as
    panel.set(position=4, k=2, track="france")
    assert len(drawn) == 4  # one redraw per change, and one for set()
    assert forwards[0] == 1 and panel.lens is lens
    assert len(cells(panel.view.svg)) == (lens.num_layers + 1) * 3  # 2 ranks and the followed token
    france = minilm_tokenizer.convert_tokens_to_ids("france")
    probs = torch.softmax(lens.logits[:, 4].float(), dim=-1)[:, france]
    followed = [c.get("data-tip") for c in cells(panel.view.svg) if c.get("data-col") == "2"]
    assert all(read_back(re.search(r"p = (\S+)", t).group(1), p) for t, p in zip(followed, probs.tolist()))
    panel.set_text("A dog ran home [MASK].")
    assert forwards[0] == 2 and panel.position.label.endswith("[MASK]")


def test_clicking_a_cell_follows_its_token(mlm_model, minilm_tokenizer):
    panel = LogitLensPanel(mlm_model, minilm_tokenizer, TEXT, k=3)
    row = panel.lens.top(panel.position.value, 3)[2]
    panel.view.open_cell(2, 1)
    assert panel.track.value == row.tokens[1] and panel.view.selected == [2, 1]
    assert 'class="bvl-selected-cell" data-row="2" data-col="1"' in panel.view.svg
    followed = [c for c in cells(panel.view.svg) if c.get("data-col") == "3"]
    assert followed[2].get("data-tip").startswith(f"layer 2 · {row.tokens[1]} (followed) · rank 2 ·")


def test_errors_are_one_line(mlm_model, backbone, minilm_tokenizer):
    panel = LogitLensPanel(backbone, minilm_tokenizer, TEXT)
    with pytest.raises(ValueError) as head_error:
        mlm_head(backbone)
    assert panel.view.message == str(head_error.value) and "\n" not in panel.view.message
    assert panel.view.svg == "" and panel.lens is None
    with pytest.raises(ValueError, match="no logit lens to export: the logit lens needs a masked-LM head"):
        panel.to_svg()
    panel.set_model(mlm_model, minilm_tokenizer)
    assert panel.view.message == "" and panel.lens is not None
    panel.set_text("word " * 200)
    assert panel.view.message == ("the text is 202 tokens long (special tokens included) but the model reads at "
                                  "most 128; shorten it.")
    panel.set_text(TEXT)
    panel.track.value = "xyzzyq"
    assert panel.error.value.count("bvl-error") == 1 and "not a token of the model&#x27;s vocabulary" in \
        panel.error.value
    assert panel.view.svg and "bvl-lens-track" not in panel.view.svg  # the figure stays, without the column
    with pytest.raises(ValueError, match=r"k must be an int in 1\.\.10"):
        LogitLensPanel(mlm_model, minilm_tokenizer, TEXT, k=11)
    with pytest.raises(ValueError, match=r"position must be an int in 0\.\.8"):
        panel.set(position=9)


def test_a_hostile_prediction_is_escaped_and_exported(xss_model, xss_tokenizer, tmp_path):
    panel = LogitLensPanel(xss_model, xss_tokenizer, "the cat sat on the [MASK] .")
    assert XSS in panel.lens.top(panel.position.value, 1)[-1].tokens
    assert_safe_html(panel.to_svg())
    panel.view.open_cell(0, 0)
    assert panel.track.value == XSS
    assert_safe_html(panel.to_svg())
    saved = panel.save(tmp_path / "lens.svg").read_text(encoding="utf-8")
    assert panel.to_svg().split(">", 1)[1] in saved and XSS not in saved


def test_a_roberta_model_gets_its_own_mask_and_byte_level_tokens(tmp_path):
    folder = build_family_checkpoint("roberta", tmp_path / "roberta", seed=7)
    model, tokenizer = bertviz_lab.load(folder)
    text = f"The cat sat on the {tokenizer.mask_token}."
    panel = LogitLensPanel(model, tokenizer, text, k=3)
    encoded = encode_text(model, tokenizer, text)
    assert torch.equal(panel.lens.logits, logit_lens(model, encoded.inputs, tokenizer=tokenizer).logits)
    assert panel.position.label.endswith(tokenizer.mask_token)
    assert vocabulary_token(tokenizer, "Ġthe") == ("Ġthe", tokenizer.convert_tokens_to_ids("Ġthe"))
    assert vocabulary_token(tokenizer, "cat") == ("cat", tokenizer.convert_tokens_to_ids("cat"))  # as spelt
    panel.set(track="Ġthe")
    assert panel.error.value == "" and 'data-token="Ġthe"' in panel.view.svg
    assert len(cells(panel.view.svg)) == (model.config.num_hidden_layers + 1) * 4
    np.testing.assert_array_equal([int(c.get("data-row")) for c in cells(panel.view.svg)][:3], [0, 0, 0])
