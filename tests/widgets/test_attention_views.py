"""The attention views as figures for a paper: each view's SVG is a standalone XML document with escaped tokens, a
title and a titled colour bar; PNG export has the requested size; the palette PNG inside large heatmaps decodes to the
codes the browser draws."""

from __future__ import annotations

import base64
import re
import struct
import xml.etree.ElementTree as ET
import zlib

import numpy as np
import pytest
import torch

from bertviz_lab.trace import trace
from bertviz_lab.widgets import AttentionPanel
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.heatmap import RECT_LIMIT, cell_size, png, tick_labels
from bertviz_lab.widgets.views.front_end import esm

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


def test_heatmap_svg_draws_every_cell_in_its_colour_with_the_exact_weight(nasty_panel):
    view = nasty_panel.heatmap
    root = parse(view.to_svg())
    cells = [node for node in root.iter(f"{SVG}g") if node.get("class") == "bvl-cells"][0]
    rects = list(cells.iter(f"{SVG}rect"))
    codes = np.frombuffer(view.codes, np.uint8)
    assert len(rects) == codes.size == 36
    for rect, code, value in zip(rects, codes, view.values.reshape(-1)):
        assert rect.get("fill") == "#{:02x}{:02x}{:02x}".format(*D.PALETTE[code])
        assert rect.find(f"{SVG}title").text.endswith(f": {D.weight_text(float(value))}")
    assert "query" in texts(root, "bvl-axis-title") and "key" in texts(root, "bvl-axis-title")


def test_large_heatmap_embeds_one_png_of_the_codes(tokenizer, backbone):
    text = " ".join(["cat"] * 80)
    with torch.inference_mode():
        encoded = tokenizer.encode_pretraining_inputs(text)
        with trace(backbone, tokens=encoded, tokenizer=tokenizer) as recorded:
            backbone(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    panel = AttentionPanel(recorded)
    T = len(recorded.tokens[0])
    assert T * T > RECT_LIMIT
    root = parse(panel.to_svg())
    images = [node for node in root.iter(f"{SVG}image") if node.get("class") == "bvl-cells"]
    assert len(images) == 1 and not [g for g in root.iter(f"{SVG}g") if g.get("class") == "bvl-cells"]
    data = base64.b64decode(images[0].get("href").split(",", 1)[1])
    assert png_size(data) == (T, T)
    assert images[0].get("width") == str(T * cell_size(T, T))
    # the PNG's pixels are the codes the browser draws, with the same palette
    chunks, at = {}, 8
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at: at + 8])
        chunks.setdefault(kind, b"")
        chunks[kind] += data[at + 8: at + 8 + length]
        assert zlib.crc32(kind + data[at + 8: at + 8 + length]) == struct.unpack(">I", data[at + 8 + length:
                                                                                             at + 12 + length])[0]
        at += 12 + length
    assert np.array_equal(np.frombuffer(chunks[b"PLTE"], np.uint8).reshape(256, 3), D.PALETTE)
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(T, T + 1)
    assert (rows[:, 0] == 0).all()
    assert np.array_equal(rows[:, 1:], np.frombuffer(panel.heatmap.codes, np.uint8).reshape(T, T))
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
        source = esm(name)  # what the browser runs: shared helpers included
        assert "innerHTML" not in source and "insertAdjacentHTML" not in source and "outerHTML" not in source
        assert "textContent" in source and "export default { render }" in source


def test_the_views_keep_the_layout_trait_of_ipywidgets():
    """A synced trait named `layout` would shadow DOMWidget's Layout and break every front-end view of the widget."""
    import ipywidgets

    from bertviz_lab.widgets.views.head_view import HeadView
    from bertviz_lab.widgets.views.heatmap import HeatmapView
    from bertviz_lab.widgets.views.model_view import ModelView

    for view in (HeatmapView(), HeadView(), ModelView()):
        assert isinstance(view.layout, ipywidgets.Layout), type(view).__name__
