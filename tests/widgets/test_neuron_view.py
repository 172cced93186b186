"""The neuron view: the numbers it sends are q, k, q ⊙ k, q·k/√d and the softmax of the trace; q/k are recorded only for
the layer shown; a query token clicked in the head view opens it; at 512 tokens only one query's rows travel; its one
drawing (live view, static copy and export alike) is a standalone, escaped, themed figure whose colours are the
values'; %bert_inspect --view neuron / saliency open the panel on those views."""

from __future__ import annotations

import base64
import re
import struct
import types
import xml.etree.ElementTree as ET
import zlib

import numpy as np
import pytest
import torch
from payload import sent_messages, state_bytes
from widgets_testlib import XSS, assert_safe_html, tiny_config

from bertviz_lab.magics import BertInspectMagics
from bertviz_lab.model import BERT
from bertviz_lab.model.hook_points import hook_points
from bertviz_lab.trace import trace
from bertviz_lab.widgets import AttentionPanel
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.neuron import BAR_ZONE, WINDOW_KEYS
from bertviz_lab.widgets.figures.theme import THEMES
from bertviz_lab.widgets.views.front_end import all_css, css, esm
from bertviz_lab.widgets.views.neuron import NeuronView

TEXT_A = "The cat sat on the mat."
TEXT_B = 'It was "warm" there.'
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def pair_panel(pretraining_model, minilm_tokenizer) -> AttentionPanel:
    return AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text=TEXT_A, text_b=TEXT_B)


def reference(model, tokenizer) -> "trace":
    """The same pair run independently, with q, k and attentions recorded."""
    encoded = tokenizer.encode_pretraining_inputs(TEXT_A, TEXT_B)
    with torch.inference_mode(), trace(model, qkv=True) as recorded:
        model(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    return recorded


def png_pixels(data: bytes) -> np.ndarray:
    """The (height, width, 3) colours of an 8-bit palette PNG with unfiltered rows (as figures.heatmap.png writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = {}, 8
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at: at + 8])
        chunks[kind] = chunks.get(kind, b"") + data[at + 8: at + 8 + length]
        at += 12 + length
    width, height = struct.unpack(">II", chunks[b"IHDR"][:8])
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(height, width + 1)
    return np.frombuffer(chunks[b"PLTE"], np.uint8).reshape(-1, 3)[rows[:, 1:]]


def drawn_blocks(svg: str) -> dict[str, np.ndarray]:
    """The (rows, cols, 3) colours of each vector block (q, k, products) as its embedded PNG shows them."""
    blocks = {}
    for image in ET.fromstring(svg).iter(f"{SVG}image"):
        pixels = png_pixels(base64.b64decode(image.get("href").split(",", 1)[1]))
        assert pixels.shape[:2] == (int(image.get("data-rows")), int(image.get("data-cols")))
        blocks[image.get("data-block")] = pixels
    return blocks


def colorbar_ticks(svg: str) -> list[list[str]]:
    """The tick labels of each colour bar, left to right."""
    return [[t.text for t in bar.iter(f"{SVG}text") if "bvl-colorbar-tick" in t.get("class", "")]
            for bar in ET.fromstring(svg).iter(f"{SVG}g") if bar.get("class") == "bvl-colorbar"]


def drawn_bars(svg: str) -> list[tuple[int, float, str, float]]:
    """(key row, score bar width, score bar fill, weight bar width) of each key row drawn, from the bars' y."""
    root = ET.fromstring(svg)
    rows = next(g for g in root.iter(f"{SVG}g") if g.get("class") == "bvl-key-rows")
    top, row_h = float(rows.get("data-y")), float(rows.get("data-row-h"))
    groups = {g.get("class"): list(g.iter(f"{SVG}rect")) for g in rows.iter(f"{SVG}g")}
    scores, weights = groups["bvl-score-bars"], groups["bvl-weight-bars"]
    assert len(scores) == len(weights) == int(rows.get("data-rows"))
    return [(round((float(s.get("y")) - top) / row_h), float(s.get("width")), s.get("fill"), float(w.get("width")))
            for s, w in zip(scores, weights) if s.get("y") == w.get("y")]


def no_hooks(model) -> bool:
    return not any(point._forward_hooks or point._forward_pre_hooks for point in hook_points(model).values()) and \
        not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def test_the_numbers_sent_are_q_k_products_scores_and_softmax_of_the_trace(pair_panel):
    panel = pair_panel
    expected = reference(panel.model, panel.tokenizer)
    panel.view.value = "neuron view"
    view = panel.neuron_view
    assert panel.on_screen is view and isinstance(view, NeuronView)
    T = len(panel.trace.tokens[0])
    for layer, head, query in ((0, 0, 1), (2, 3, 5), (1, 2, 0), (2, 1, T - 1)):
        panel.layer.value, panel.head.value, panel.query.value = layer, head, query
        rows = view.rows()  # decoded from the very bytes the browser gets
        q = expected.q[layer][0, head].double()  # (T, hs)
        k = expected.k[layer][0, head].double()
        d = q.shape[-1]
        assert view.head_size == d == 32 and view.key_positions == list(range(T))
        np.testing.assert_allclose(rows.q, q[query].numpy(), rtol=0, atol=1e-6)
        np.testing.assert_allclose(rows.k, k.numpy(), rtol=0, atol=1e-6)
        np.testing.assert_allclose(rows.products, (q[query] * k).numpy(), rtol=0, atol=1e-6)
        scores = (k @ q[query]) / np.sqrt(d)
        np.testing.assert_allclose(rows.scores, scores.numpy(), rtol=0, atol=1e-5)
        # the products of a row add up to its score (× √d): the view's reading guide holds
        np.testing.assert_allclose(rows.products.sum(-1) / np.sqrt(d), rows.scores, rtol=0, atol=1e-5)
        np.testing.assert_allclose(rows.weights, torch.softmax(scores, 0).numpy(), rtol=0, atol=1e-6)
        # ... and the softmax is the model's own attention row
        np.testing.assert_allclose(rows.weights, expected.attention(layer)[0, head, query].numpy(), atol=1e-5)
        assert rows.weights.sum() == pytest.approx(1.0, abs=1e-5)
        tokens = panel.trace.tokens[0]
        assert view.key_tokens == tokens and view.query_row == query
        assert view.query_token == tokens[query] and view.query_position == query
        assert view.title == f"layer {layer} · head {head} · query {query}·{tokens[query]}"
        assert panel.export_bar.name == f"attention-neuron-layer{layer}-head{head}-query{query}"
        # one drawing: the view's figure is the panel's, its static copy's and its export's, naming the query
        svg = view.svg
        assert panel.to_svg() == view.to_svg() == svg and svg in panel.static_html()
        root = ET.fromstring(svg)
        assert root.get("data-query") == str(query) and root.get("data-title") == view.title
        # the cells show the values on scales symmetric around zero, as far as the colour bars' ticks go
        vector_top = max(np.abs(rows.q).max(), np.abs(rows.k).max())
        blocks = drawn_blocks(svg)
        np.testing.assert_array_equal(blocks["q"], D.DIVERGING[D.diverging_codes(rows.q[None, :], vector_top)])
        np.testing.assert_array_equal(blocks["k"], D.DIVERGING[D.diverging_codes(rows.k, vector_top)])
        np.testing.assert_array_equal(
            blocks["products"], D.DIVERGING[D.diverging_codes(rows.products, np.abs(rows.products).max())])
        vector_ticks, product_ticks = colorbar_ticks(svg)
        # negative ticks carry a true minus sign, not a hyphen that reads as a dash
        assert any(t.startswith("\u2212") for t in vector_ticks) and not any("-" in t for t in vector_ticks)
        vector_ticks, product_ticks = ([t.replace("\u2212", "-") for t in ticks]
                                       for ticks in (vector_ticks, product_ticks))
        assert "0" in vector_ticks and max(abs(float(t)) for t in vector_ticks) <= vector_top
        assert "0" in product_ticks and max(abs(float(t)) for t in product_ticks) <= np.abs(rows.products).max()
        # a score bar and a weight bar per key: length and side from the exact numbers
        bars = drawn_bars(svg)
        assert [row for row, *_ in bars] == list(range(len(view.key_positions)))
        score_top, weight_top = np.abs(rows.scores).max(), rows.weights.max()
        for (_, score_w, score_fill, weight_w), score, weight in zip(bars, rows.scores, rows.weights):
            assert score_w == pytest.approx(abs(score) / score_top * BAR_ZONE / 2, abs=0.01)
            assert weight_w == pytest.approx(weight / weight_top * BAR_ZONE, abs=0.01)
            assert score_fill == ("#d6604d" if score >= 0 else "#4393c3")
    toolbar = panel.toolbar.children[0].children
    assert list(toolbar) == [panel.layer, panel.head, panel.query, panel.hide_special]
    assert not panel.head.disabled
    assert [label for label, _ in panel.query.options][:2] == ["0 · [CLS]", "1 · the"]


def test_q_and_k_are_recorded_for_the_layer_shown_only_when_the_view_needs_them(pair_panel, pretraining_model):
    panel = pair_panel
    assert panel.trace.q == {} and panel.trace.k == {}  # the panel's own forward records attentions only
    assert panel.layer_qk.forwards == 0  # and nothing runs for a view not shown
    panel.layer.value = 1
    assert panel.layer_qk.forwards == 0
    panel.view.value = "neuron view"
    assert panel.layer_qk.forwards == 1 and set(panel.layer_qk._layers) == {1}
    panel.head.value, panel.query.value = 3, 4
    assert panel.layer_qk.forwards == 1  # another head or query of the same layer: nothing runs
    panel.layer.value = 2
    assert panel.layer_qk.forwards == 2 and set(panel.layer_qk._layers) == {1, 2}
    panel.layer.value = 1
    assert panel.layer_qk.forwards == 2
    assert no_hooks(pretraining_model)
    panel.set_text("Dogs bark.")  # a new text: q and k of the new run, on demand again
    assert panel.layer_qk.forwards == 1 and panel.neuron_view.key_tokens == ["[CLS]", "dogs", "bark", ".", "[SEP]"]

    # a trace recorded with qkv=True needs no model and no forward
    recorded = reference(pretraining_model, panel.tokenizer)
    recorded.attach_tokens(pair_panel.tokenizer.encode_pretraining_inputs(TEXT_A, TEXT_B), pair_panel.tokenizer)
    fixed = AttentionPanel(recorded, view="neuron view", layer=2, head=1, query=3)
    assert fixed.layer_qk.forwards == 0 and fixed.neuron_view.query_position == 3
    np.testing.assert_array_equal(fixed.neuron_view.rows().k, recorded.k[2][0, 1].numpy())

    # a trace without q/k and no model: the view says what it needs
    with torch.inference_mode(), trace(pretraining_model) as plain:
        pretraining_model(torch.tensor([[101, 2000, 2001, 102]]))
    bare = AttentionPanel(plain, view="neuron view")
    assert "qkv=True" in bare.neuron_view.title and bare.neuron_view.k == b""
    assert "qkv=True" in "".join(assert_themed_figure(bare.to_svg(), "neuron").itertext())


def test_hiding_special_keys_leaves_the_other_weights_as_they_are(pair_panel):
    panel = pair_panel
    panel.view.value = "neuron view"
    panel.layer.value, panel.head.value, panel.query.value = 1, 1, 2
    everything = panel.neuron_view.rows()
    panel.hide_special.value = True
    tokens = panel.trace.tokens[0]
    keep = [i for i, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]")]
    rows = panel.neuron_view.rows()
    assert panel.neuron_view.key_positions == keep and "[SEP]" not in panel.neuron_view.key_tokens
    np.testing.assert_array_equal(rows.weights, everything.weights[keep])
    np.testing.assert_array_equal(rows.k, everything.k[keep])
    assert rows.weights.sum() < 1 and "do not sum to 1" in panel.neuron_view.note


def test_a_query_token_clicked_in_the_head_view_opens_the_neuron_view(pair_panel):
    panel = pair_panel
    panel.layer.value = 2
    panel.view.value = "head view"
    panel.head_view.heads = [1, 3]
    panel.head_view._handle_custom_msg({"type": "open", "query": 4, "head": -1}, [])  # a query token's click
    assert panel.view.value == "neuron view" and panel.on_screen is panel.neuron_view
    assert (panel.layer.value, panel.head.value, panel.query.value) == (2, 1, 4)
    assert panel.neuron_view.title.startswith("layer 2 · head 1 · query 4·")
    panel.view.value = "head view"
    panel.head_view._handle_custom_msg({"type": "open", "query": 6, "head": 3}, [])  # a line of head 3
    assert (panel.view.value, panel.head.value, panel.query.value) == ("neuron view", 3, 6)
    # with B→A the head view's rows are sentence B's tokens: the index counts within them
    panel.view.value = "head view"
    panel.direction.value = "B→A"
    b_tokens = [i for i, t in enumerate(panel.trace.token_type_ids[0].tolist()) if t == 1]
    panel.head_view._handle_custom_msg({"type": "open", "query": 1, "head": 0}, [])
    assert (panel.view.value, panel.head.value, panel.query.value) == ("neuron view", 0, b_tokens[1])
    for bad in ({"type": "open", "query": 99, "head": 0}, {"type": "open", "query": "1", "head": 0},
                {"type": "open", "query": 0, "head": 9}, {"type": "other"}):
        panel.view.value = "head view"
        panel.head_view._handle_custom_msg(bad, [])
        assert panel.view.value == "head view"


def test_a_key_clicked_in_the_neuron_view_becomes_the_query(pair_panel):
    panel = pair_panel
    panel.view.value = "neuron view"
    panel.neuron_view._handle_custom_msg({"type": "query", "position": 7}, [])
    assert panel.query.value == 7 and panel.neuron_view.query_position == 7
    for bad in (999, True, "3", None):
        panel.neuron_view._handle_custom_msg({"type": "query", "position": bad}, [])
        assert panel.query.value == 7


def test_512_tokens_draw_a_window_of_keys_and_send_only_its_rows(minilm_tokenizer):
    torch.manual_seed(6)
    model = BERT(tiny_config(minilm_tokenizer.vocab_size, num_hidden_layers=2, num_attention_heads=4, hidden_size=256,
                             intermediate_size=256, max_position_embeddings=512)).eval()
    panel = AttentionPanel(model=model, tokenizer=minilm_tokenizer, text=" ".join(["word"] * 510), layer=1, head=2,
                           view="neuron view")
    T, d, n = 512, 64, WINDOW_KEYS
    view = panel.neuron_view
    q, k = panel.layer_qk(1)
    every = D.neuron_rows(q, k, 2, panel.query.value, np.arange(T), real=panel.info.real)  # against every key

    def drawn(first: int) -> ET.Element:
        """The figure shows keys first..first+n-1, and the buffers hold exactly their rows."""
        root = ET.fromstring(view.svg)
        assert (root.get("data-first"), root.get("data-rows"), root.get("data-keys")) == (str(first), str(n), str(T))
        assert view.first == first and view.key_positions == list(range(first, first + n))
        rows = view.rows()
        for name in ("k", "products", "scores", "weights"):
            np.testing.assert_allclose(getattr(rows, name), getattr(every, name)[first:first + n], atol=1e-6)
        return root

    assert view.head_size == d and len(view.key_tokens) == n
    assert (len(view.q), len(view.k), len(view.products)) == (d * 4, n * d * 4, n * d * 4)
    assert len(view.scores) == len(view.weights) == n * 4
    root = drawn(0)
    rows = next(g for g in root.iter(f"{SVG}g") if g.get("class") == "bvl-key-rows")
    assert int(rows.get("data-row-h")) >= 12 and len(drawn_bars(view.svg)) == n  # rows tall enough for numbers
    labels = [t for t in root.iter(f"{SVG}text") if "bvl-key" in t.get("class", "").split()]
    assert [int(t.get("data-position")) for t in labels] == list(range(n))  # every key of the window labelled
    counts = {t.get("data-where"): t for t in root.iter(f"{SVG}text") if t.get("data-where")}
    assert list(counts) == ["below"] and counts["below"].get("data-count") == str(T - n)
    assert f"softmax {every.weights[n:].astype(np.float64).sum():.3g} in all" in counts["below"].text
    sent = state_bytes(view)
    window_bytes = 4 * (d + 2 * n * d + 2 * n)
    assert window_bytes + len(view.svg) <= sent <= window_bytes + len(view.svg.encode()) + 8_000  # + tokens, positions
    # the query moves out of the window: the window follows, as little as it takes
    with sent_messages(view) as sizes:
        panel.query.value = 300
    assert 0 < sum(sizes) <= window_bytes + len(view.svg.encode()) + 8_000
    every = D.neuron_rows(q, k, 2, 300, np.arange(T), real=panel.info.real)
    root = drawn(300 - n + 1)
    assert root.get("data-query") == "300" and view.query_row == n - 1
    # a front end moves the window (keys past its edge, the wheel); one beyond the keys stops at the last one
    view.first = 100
    root = drawn(100)
    counts = {t.get("data-where"): int(t.get("data-count")) for t in root.iter(f"{SVG}text") if t.get("data-where")}
    assert counts == {"above": 100, "below": T - 100 - n} and view.query_row == -1
    view.first = 10_000
    drawn(T - n)
    # a key outside the window can still be made the query (the keyboard's End, then Enter)
    view._handle_custom_msg({"type": "query", "position": 3}, [])
    assert panel.query.value == 3 and view.first == 3


@pytest.mark.parametrize("hidden, heads", [(384, 12), (768, 12), (256, 16)])
def test_the_figure_fits_an_800_px_output_area(minilm_tokenizer, hidden, heads):
    """Head sizes of 32, 64 and 16; every note the panel writes (one line each); tokens cut at 16 characters."""
    torch.manual_seed(0)
    model = BERT(tiny_config(minilm_tokenizer.vocab_size, num_hidden_layers=1, num_attention_heads=heads,
                             hidden_size=hidden, intermediate_size=64)).eval()
    panel = AttentionPanel(model=model, tokenizer=minilm_tokenizer, text="the cat sat " * 60, view="neuron view",
                           query=5)
    panel.hide_special.value = True
    root = ET.fromstring(panel.neuron_view.svg)
    note = [t.text for t in root.iter(f"{SVG}text") if "bvl-note" in t.get("class", "")]
    assert len(note) == 3 and "hidden" in note[1] and "kept 128" in note[2]  # the tiny model reads 128 tokens
    assert float(root.get("width")) <= 790, root.get("width")
    ids = torch.randint(1000, 2000, (1, 60))
    with torch.inference_mode(), trace(model, qkv=True) as recorded:
        model(ids)
    recorded.attach_tokens([f"{i:02d}" + "longtoken" * 3 for i in range(60)])
    root = ET.fromstring(AttentionPanel(recorded, view="neuron view", query=59).neuron_view.svg)
    labels = [t.text for t in root.iter(f"{SVG}text") if "bvl-key" in t.get("class", "").split()]
    assert labels and all(len(label) == 16 for label in labels)
    assert float(root.get("width")) <= 790, root.get("width")


NASTY = '<b>&"x'


def assert_themed_figure(svg: str, name: str) -> ET.Element:
    """The figure contract: one standalone SVG, root classes bvl-fig bvl-<name>, the theme's ground first, no font
    families and no text colours of its own (figure.css gives both), no inline styles."""
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg" and root.get("class") == f"bvl-fig bvl-{name}"
    assert float(root.get("width")) > 0 and float(root.get("height")) > 0
    assert root[0].tag == f"{SVG}rect" and root[0].get("class") == "bvl-ground"
    for node in root.iter():
        assert node.get("font-family") is None and node.get("style") is None, node.attrib
        if node.tag == f"{SVG}text":
            assert node.get("fill") is None, node.attrib
    return root


def test_the_drawing_is_standalone_escaped_and_themed(pretraining_model, tmp_path):
    ids = torch.tensor([[101, 2000, 2001, 2002, 2003, 2004, 102]])
    with torch.inference_mode(), trace(pretraining_model, qkv=True) as recorded:
        pretraining_model(ids)
    recorded.attach_tokens(["[CLS]", "a", NASTY, "long" * 6, '"q"', XSS, "[SEP]"])
    panel = AttentionPanel(recorded, layer=1, head=2, view="neuron view", query=2)
    svg = panel.to_svg()
    assert svg == panel.neuron_view.svg and panel.static_html() == f"<div class='bvl-figure bvl-attention'>{svg}</div>"
    root = assert_themed_figure(svg, "neuron")
    assert_safe_html(svg, must_show=None)  # the injection token's label is cut short here
    assert "<b>" not in svg and "&lt;b&gt;&amp;" in svg
    assert not [n for n in root.iter() if n.tag in (f"{SVG}b", f"{SVG}script", f"{SVG}img")]
    assert root.get("data-title") == f"layer 1 · head 2 · query 2·{NASTY}" and root.get("data-query") == "2"
    texts = {n.get("class"): "".join(n.itertext()) for n in root.iter(f"{SVG}text") if n.get("class")}
    assert texts["bvl-title"] == f"layer 1 · head 2 · query 2·{NASTY}"
    assert [t.get("data-position") for t in root.iter(f"{SVG}text") if "bvl-key" in t.get("class", "").split()] == [
        str(p) for p in range(7)]
    bars = [n for n in root.iter(f"{SVG}g") if n.get("class") == "bvl-colorbar"]
    assert ["".join(t.itertext()) for b in bars for t in b.iter(f"{SVG}text")
            if t.get("class") == "bvl-colorbar-title"] == ["q, k: value per dimension", "q ⊙ k: product per dimension"]
    # the query is marked in a colour of the theme, from the view's stylesheet, which the exports carry
    marked = [t for t in root.iter(f"{SVG}text") if "bvl-mark" in t.get("class", "").split()]
    assert [t.get("data-position") for t in marked if t.get("data-position")] == ["2"]
    sheet = css("neuron_view")
    assert ".bvl-mark" in sheet and ".bvl-mark" in all_css()
    for name in set(re.findall(r"var\((--[\w-]+)", sheet)):
        assert all(name in THEMES[theme] for theme in ("light", "dark")), name
    for theme in ("light", "dark"):
        written = panel.save(tmp_path / f"neuron-{theme}.svg", theme=theme).read_text(encoding="utf-8")
        assert THEMES[theme]["--jp-brand-color1"] in written and svg[svg.index(">") + 1:] in written
        png = panel.save(tmp_path / f"neuron-{theme}.png", theme=theme)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    panel.query.value = 5
    assert_safe_html(panel.to_svg())  # the query's whole token in the title
    front_end = esm("neuron_view.js")
    assert "innerHTML" not in front_end and "textContent" in front_end and "cssText" not in front_end
    assert "showFigure(" in front_end and 'model.get("svg")' in front_end


def test_palette_is_diverging_with_white_at_zero():
    assert tuple(D.DIVERGING[D.ZERO_CODE]) == (247, 247, 247)
    codes = D.diverging_codes(np.array([-2.0, -1.0, 0.0, 1.0, 2.0, 3.0]), 2.0)
    assert codes.tolist() == [0, 64, 127, 191, 254, 254]
    assert D.DIVERGING[0][2] > D.DIVERGING[0][0] and D.DIVERGING[254][0] > D.DIVERGING[254][2]  # blue, red


def test_bert_inspect_opens_the_neuron_and_saliency_views(minilm_tokenizer, pretraining_model):
    # the magic on a namespace of its own (tests/test_magics.py drives it in a real shell; IPython's test shell is
    # started once per process, so it is left to that file)
    magics = BertInspectMagics(shell=types.SimpleNamespace(user_ns={"nm": pretraining_model, "ntok": minilm_tokenizer},
                                                           configurables=[]))
    panel = magics.bert_inspect('nm ntok --view neuron --layer 2 --head 1 "The [MASK] sat."')
    assert isinstance(panel, AttentionPanel) and panel.view.value == "neuron view"
    assert panel.neuron_view.title == "layer 2 · head 1 · query 1·the"
    panel = magics.bert_inspect('nm ntok --view saliency "The [MASK] sat."')
    assert panel.view.value == "saliency" and panel.saliency is not None
    assert panel.saliency.tokens == ["[CLS]", "the", "[MASK]", "sat", ".", "[SEP]"]
    assert panel.to_svg() == panel.saliency.to_svg()


def test_a_layer_the_trace_lacks_without_a_model_gets_the_reason_not_an_attribute_error(pretraining_model,
                                                                                         minilm_tokenizer):
    from bertviz_lab.widgets.panels.layer_qk import LayerQK

    encoded = minilm_tokenizer.encode_pretraining_inputs(TEXT_A, TEXT_B)
    with torch.inference_mode(), trace(pretraining_model, qkv=True, layers=[0]) as recorded:
        pretraining_model(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    layer_qk = LayerQK(recorded)  # no model: only what the trace holds
    assert layer_qk.available
    q, k = layer_qk(0)
    assert q.shape[0] == k.shape[0] == pretraining_model.config.num_attention_heads
    with pytest.raises(ValueError, match="queries and keys"):
        layer_qk(1)
