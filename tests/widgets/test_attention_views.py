"""The attention views as figures for a paper: each view's SVG is a standalone XML document with escaped tokens, a
title and a titled colour bar; PNG export has the requested size. The heatmap is one drawing (live view, static copy
and export), coloured by its weights, styled by the stylesheet, with the weights hover reads beside it."""

from __future__ import annotations

import base64
import re
import struct
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch
from heatmap_drawing import cell_area, drawn_as, near_colours, png_chunks

from bertviz_lab.trace import trace
from bertviz_lab.widgets import AttentionPanel
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.heatmap import RECT_LIMIT, cell_size, png, tick_labels
from bertviz_lab.widgets.views.front_end import esm
from bertviz_lab.widgets.views.heatmap import float16_bytes

SVG = "{http://www.w3.org/2000/svg}"
NASTY = '<b>&"x'  # a token that would be markup if it were not escaped
VIEWS = ("heatmap", "head view", "model view")


@pytest.fixture
def nasty_panel(pretraining_model) -> AttentionPanel:
    ids = torch.tensor([[101, 2000, 2001, 2002, 2003, 102]])
    with torch.inference_mode(), trace(pretraining_model) as recorded:
        pretraining_model(ids)
    recorded.attach_tokens(["[CLS]", "a", NASTY, "long" * 6, '"q"', "[SEP]"])
    return AttentionPanel(recorded, layer=1, head=2)


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    assert float(root.get("width")) > 0 and float(root.get("height")) > 0
    return root


def texts(root: ET.Element, css_class: str | None = None) -> list[str]:
    return ["".join(node.itertext()) for node in root.iter(f"{SVG}text")
            if css_class is None or css_class in (node.get("class") or "").split()]


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("view", VIEWS)
def test_each_view_is_a_standalone_svg_with_escaped_tokens(nasty_panel, view):
    nasty_panel.view.value = view
    svg = nasty_panel.to_svg()
    root = parse(svg)
    assert not [node for node in root.iter() if node.tag in (f"{SVG}b", "b", f"{SVG}script", "script")]
    assert "<b>" not in svg and ("&lt;b&gt;&amp;" in svg or view == "model view")
    title = texts(root, "bvl-title")
    assert len(title) == 1 and title[0].startswith("layer 1" if view != "model view" else "3 layers × 4 heads")
    if view == "model view":
        assert texts(root, "bvl-layer-label") == ["layer 0", "layer 1", "layer 2"]
        assert texts(root, "bvl-head-label") == ["head 0", "head 1", "head 2", "head 3"]
        assert texts(root, "bvl-note") == ["rows: query tokens, columns: key tokens ([CLS] … [SEP], 6 tokens)"]
        assert texts(root, "bvl-axes-hint") == ["query ↓ key →"]
    else:  # the token's own text, once the XML entities are decoded; a long token keeps its whole text as a tooltip
        shown = texts(root, "bvl-token")
        assert any(NASTY in label for label in shown)
        assert any(label.startswith("long" * 3 + "lon…") and label.endswith("long" * 6) for label in shown)
    if view != "head view":  # the head view has no colour scale: line opacity is the weight
        bars = [node for node in root.iter(f"{SVG}g") if node.get("class") == "bvl-colorbar"]
        assert len(bars) == 1
        assert texts(bars[0], "bvl-colorbar-title")[0].startswith(("attention weight", "mean attention weight"))
        ticks = texts(bars[0], "bvl-colorbar-tick")
        assert len(ticks) >= 2 and all(float(t) >= 0 for t in ticks) and float(ticks[-1]) < 1  # weights, not codes
    assert nasty_panel.static_html() == f"<div class='bvl-figure bvl-attention'>{svg}</div>"


@pytest.mark.parametrize("view", VIEWS)
def test_png_export_is_twice_the_svg_size(nasty_panel, tmp_path, view):
    nasty_panel.view.value = view
    root = parse(nasty_panel.to_svg())
    width, height = float(root.get("width")), float(root.get("height"))
    path = nasty_panel.save(tmp_path / "figure.png", scale=2)
    assert png_size(path.read_bytes()) == (round(2 * width), round(2 * height))
    svg_path = nasty_panel.save(tmp_path / "figure.svg", scale=2)
    big = parse(svg_path.read_text(encoding="utf-8"))
    assert (float(big.get("width")), float(big.get("height"))) == (2 * width, 2 * height)


def test_heatmap_is_one_drawing_on_screen_in_the_static_copy_and_in_exports(nasty_panel, tmp_path):
    view = nasty_panel.heatmap
    assert view.svg and view.to_svg() == view.svg == nasty_panel.to_svg()
    assert view.svg in nasty_panel.static_copy.html()
    saved = nasty_panel.save(tmp_path / "heatmap.svg").read_text(encoding="utf-8")
    assert 'class="bvl-cells"' in saved and saved.count("<rect") == view.svg.count("<rect")
    nasty_panel.layer.value = 2  # a new layer: a new drawing, and the copy follows it
    assert "layer 2" in texts(parse(view.svg), "bvl-title")[0] and view.svg in nasty_panel.static_copy.html()


def test_heatmap_draws_every_cell_in_the_colour_of_its_weight_where_its_cell_area_says(nasty_panel):
    view = nasty_panel.heatmap
    full = nasty_panel.trace.attention(1)[0, 2].numpy()
    root = parse(view.svg)
    area = cell_area(view.svg)
    rows, cols = int(area.get("data-rows")), int(area.get("data-cols"))
    x0, y0, cell = (int(area.get(f"data-{name}")) for name in ("x", "y", "cell"))
    assert (rows, cols) == full.shape == (6, 6) and cell == cell_size(6, 6)
    rects = list(area.iter(f"{SVG}rect"))
    assert len(rects) == 36
    assert {(int(r.get("x")), int(r.get("y"))) for r in rects} == {
        (x0 + c * cell, y0 + r * cell) for r in range(rows) for c in range(cols)}
    # [CLS]/[SEP] are clipped by default: the other cells set the colour scale
    special = np.array([True, False, False, False, False, True])
    top = full[np.ix_(~special, ~special)].max()
    assert drawn_as(view.svg, near_colours(full, top)).all()  # within one colour step, clipped cells marked
    assert "query" in texts(root, "bvl-axis-title") and "key" in texts(root, "bvl-axis-title")


def test_hover_data_is_the_traced_attention(nasty_panel):
    view = nasty_panel.heatmap
    full = nasty_panel.trace.attention(1)[0, 2].numpy()
    np.testing.assert_allclose(np.frombuffer(view.values, np.float16).reshape(full.shape), full, rtol=2**-11, atol=1e-7)
    assert np.abs(view.weights() - full).max() <= 1e-3
    assert view.row_tokens == view.col_tokens == ["[CLS]", "a", NASTY, "long" * 6, '"q"', "[SEP]"]
    assert view.row_positions == view.col_positions == list(range(6)) and view.title.startswith("layer 1")


def test_hover_weights_are_rounded_to_float16_as_numpy_rounds():
    """The fast cast of hover's weights gives NumPy's float16 bit for bit: ties, subnormals, the largest, overflow."""
    edges = np.array([0.0, 1.0, 0.5 + 2**-12, 0.5 + 3 * 2**-12, 6.1e-5, 5.96e-8, 2.98e-8, 1e-9, 65504.0, 65520.0,
                      -0.25, np.inf, np.nan], np.float32)
    weights = np.random.default_rng(0).random((97, 131), dtype=np.float32) ** 4
    for matrix in (edges[None, :], weights, weights[::2, 1::3]):
        with np.errstate(over="ignore"):
            expected = np.ascontiguousarray(matrix, dtype=np.float16)
        assert float16_bytes(matrix) == expected.tobytes()


def test_heatmap_takes_text_colours_and_fonts_from_the_stylesheet(nasty_panel):
    svg = nasty_panel.heatmap.svg
    root = parse(svg)
    assert root.get("class").split() == ["bvl-fig", "bvl-heatmap"]
    assert root[0].tag == f"{SVG}rect" and root[0].get("class") == "bvl-ground" and root[0].get("fill") is None
    assert "font-family" not in svg
    for node in root.iter():
        if node.tag == f"{SVG}text":
            assert node.get("fill") is None and node.get("stroke") is None, ET.tostring(node)
        if node.tag in (f"{SVG}line", f"{SVG}path"):  # rules, and the hatch of clipped cells (its ink in the CSS)
            assert {"bvl-rule", "bvl-clipped-mark"} & set(node.get("class", "").split()) and node.get("stroke") is None
    data_fills = {id(n) for g in root.iter() if g.get("class") in ("bvl-cells", "bvl-colorbar") for n in g.iter()}
    painted = [n for n in root.iter() if (n.get("fill") or "none") != "none" and id(n) not in data_fills]
    assert painted == [], [ET.tostring(n) for n in painted]  # only cells and colour bands have their own colours
    frame = [n for n in root.iter(f"{SVG}rect") if "bvl-frame" in (n.get("class") or "").split()]
    assert len(frame) == 1 and "bvl-rule" in frame[0].get("class").split()
    assert all("bvl-mono" in n.get("class").split() for n in root.iter(f"{SVG}text")
               if "bvl-colorbar-tick" in (n.get("class") or ""))


def test_large_heatmap_embeds_one_png_of_the_cells(minilm_tokenizer, backbone):
    text = " ".join(["cat"] * 80)
    with torch.inference_mode():
        encoded = minilm_tokenizer.encode_pretraining_inputs(text)
        with trace(backbone, tokens=encoded, tokenizer=minilm_tokenizer) as recorded:
            backbone(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    panel = AttentionPanel(recorded)
    T = len(recorded.tokens[0])
    assert T * T > RECT_LIMIT
    svg = panel.to_svg()
    root = parse(svg)
    images = [node for node in root.iter(f"{SVG}image") if node.get("class") == "bvl-cells"]
    assert len(images) == 1 and cell_area(svg).tag == f"{SVG}image"
    data = base64.b64decode(images[0].get("href").split(",", 1)[1])
    assert png_size(data) == (T, T) and images[0].get("width") == str(T * cell_size(T, T))
    assert np.array_equal(np.frombuffer(png_chunks(data)[b"PLTE"], np.uint8).reshape(256, 3), D.HEATMAP_PALETTE)
    full = recorded.attention(0)[0, 0].numpy()
    special = np.array([t in ("[CLS]", "[SEP]") for t in recorded.tokens[0]])
    top = full[np.ix_(~special, ~special)].max()
    assert drawn_as(svg, near_colours(full, top)).all()
    labels = texts(root, "bvl-query")
    assert 1 < len(labels) < T and re.fullmatch(r"\d+·.+", labels[1])  # thinned out, with positions


def test_png_encoder_and_tick_labels():
    codes = np.arange(12, dtype=np.uint8).reshape(3, 4)
    data = png(codes, D.PALETTE)
    assert png_size(data) == (4, 3) and data.endswith(b"IEND\xaeB`\x82")
    tokens = [f"t{i}" for i in range(100)]
    assert tick_labels(tokens, list(range(100)), 28)[:2] == [(0, "t0"), (1, "t1")]
    assert tick_labels(tokens, list(range(100, 200)), 1)[:2] == [(0, "100·t0"), (13, "113·t13")]
    assert cell_size(512, 512) == 1 and cell_size(300, 10) == 2 and cell_size(3, 3) == 28


def test_front_ends_set_text_only_as_text():
    for name in ("heatmap.js", "head_view.js", "model_view.js"):
        source = esm(name)  # what the browser runs: the bundle, shared helpers included (tests/js/bundles.test.mjs)
        assert "innerHTML" not in source and "insertAdjacentHTML" not in source and "outerHTML" not in source
        assert "textContent" in source


def test_the_views_keep_the_layout_trait_of_ipywidgets():
    """A synced trait named `layout` would shadow DOMWidget's Layout and break every front-end view of the widget."""
    import ipywidgets

    from bertviz_lab.widgets.views.head_view import HeadView
    from bertviz_lab.widgets.views.heatmap import HeatmapView
    from bertviz_lab.widgets.views.model_view import ModelView

    for view in (HeatmapView(), HeadView(), ModelView()):
        assert isinstance(view.layout, ipywidgets.Layout), type(view).__name__
