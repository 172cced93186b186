"""AttentionPanel: every selector shows the right numbers from the trace (read back from what the browser gets: the
heatmap's float16 weights and the colours of its drawing); head view and model view buffers; per-view toolbars; 512
tokens stay compact."""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np
import pytest
import torch
from attention_figures import SVG, assert_themed_drawing, groups, head_lines, thumbnails, tokens
from heatmap_drawing import drawn_as, drawn_colours, near_colours, texts
from payload import sent_messages, state_bytes
from widgets_testlib import tiny_config

from bertviz_lab.model import BERT
from bertviz_lab.trace import attention_rollout, trace
from bertviz_lab.widgets import AttentionPanel
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.export import themed
from bertviz_lab.widgets.figures.head_view import MIN_OPACITY, WINDOW_ROWS, head_color
from bertviz_lab.widgets.panels.attention import trace_text
from bertviz_lab.widgets.views.front_end import all_css
from bertviz_lab.widgets.views.head_view import HeadView
from bertviz_lab.widgets.views.heatmap import HeatmapView
from bertviz_lab.widgets.views.model_view import ModelView

TEXT_A = "The cat sat on the mat."
TEXT_B = 'It was "warm" there.'
HALF = 2**-11  # float16's relative rounding error


@pytest.fixture
def pair_panel(pretraining_model, minilm_tokenizer) -> AttentionPanel:
    return AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text=TEXT_A, text_b=TEXT_B)


@pytest.fixture
def single_panel(pretraining_model, minilm_tokenizer) -> AttentionPanel:
    return AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text=TEXT_A)


def shown(panel: AttentionPanel) -> tuple[np.ndarray, list[int], list[int]]:
    """What the browser gets, turned back into weights: the matrix, key positions (columns), query positions (rows)."""
    view = panel.heatmap
    assert len(view.values) == 2 * len(view.row_tokens) * len(view.col_tokens)  # float16
    return view.weights(), list(view.col_positions), list(view.row_positions)


def assert_shows(panel: AttentionPanel, expected: np.ndarray) -> None:
    """Hover's weights are the expected ones to float16's precision, cell by cell, and the drawing's colours are
    the linear colour scale of the expected matrix."""
    z = shown(panel)[0]
    assert z.shape == expected.shape
    np.testing.assert_allclose(z, expected, rtol=HALF, atol=3e-8)
    if panel.scale.value == "linear" and panel.special.value != "clip":
        top = expected.max()
        codes = np.rint(expected / top * D.TOP_CODE).astype(int) if top > 0 else np.zeros(expected.shape, int)
        near = [D.PALETTE[np.clip(codes + step, 0, D.TOP_CODE)] for step in (-1, 0, 1)]  # within one colour step
        drawn = drawn_colours(panel.heatmap.svg)
        assert np.any([(drawn == colours).all(axis=-1) for colours in near], axis=0).all()


def note(panel: AttentionPanel) -> str:
    """The heatmap's note (how to read it), as its drawing writes it under the title."""
    return " ".join(texts(panel.heatmap.svg, "bvl-note"))


def segments(panel: AttentionPanel) -> tuple[list[int], list[int]]:
    types = panel.trace.token_type_ids[0].tolist()
    return [i for i, t in enumerate(types) if t == 0], [i for i, t in enumerate(types) if t == 1]


# heatmap values -----------------------------------------------------------------------------------------
def test_layer_and_head_selectors_show_that_head_of_the_trace(pair_panel):
    panel = pair_panel
    tokens = panel.trace.tokens[0]
    assert panel.layer.options == (0, 1, 2) and panel.head.options == (0, 1, 2, 3)
    assert isinstance(panel.heatmap, HeatmapView) and panel.on_screen is panel.heatmap
    for layer in (0, 2, 1):
        for head in (3, 0, 2):
            panel.layer.value, panel.head.value = layer, head
            z, x, y = shown(panel)
            expected = panel.trace.attention(layer)[0, head].numpy()
            assert z.shape == expected.shape == (len(tokens), len(tokens))
            assert_shows(panel, expected)
            assert x == y == list(range(len(tokens)))
            assert panel.heatmap.row_tokens == panel.heatmap.col_tokens == tokens
            assert panel.heatmap.title.startswith(f"layer {layer} · head {head} · linear scale")
            assert panel.export_bar.name == f"attention-layer{layer}-head{head}"
    # the trace really is the model's attention on this text: rerun it independently
    with torch.inference_mode(), trace(pair_panel.model) as again:
        encoded = panel.tokenizer.encode_pretraining_inputs(TEXT_A, TEXT_B)
        panel.model(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    assert_shows(panel, again.attention(1)[0, 2].numpy())


def test_mean_and_rollout_aggregations(pair_panel):
    panel = pair_panel
    panel.aggregation.value = "mean"
    assert panel.head.disabled
    for layer in range(3):
        panel.layer.value = layer
        assert_shows(panel, panel.trace.attention(layer)[0].mean(dim=0).numpy())
        assert "mean of heads" in panel.heatmap.title and panel.export_bar.name == f"attention-layer{layer}-mean"
    panel.aggregation.value = "rollout"
    for layer in range(3):
        panel.layer.value = layer
        expected = attention_rollout(panel.trace.attentions[: layer + 1], panel.trace.attention_mask)[0].numpy()
        assert_shows(panel, expected)
        # rows of the rollout sum to 1, and so do hover's float16 rows, to within float16's precision
        np.testing.assert_allclose(shown(panel)[0].sum(axis=1), 1.0, atol=HALF + 1e-5)
        assert f"rollout through layers 0..{layer}" in panel.heatmap.title
    assert not np.allclose(shown(panel)[0], panel.trace.attention(2)[0].mean(dim=0).numpy(), atol=1e-3)
    panel.aggregation.value = "head"
    assert not panel.head.disabled
    assert_shows(panel, panel.trace.attention(2)[0, panel.head.value].numpy())


def test_hide_special_tokens_removes_their_rows_and_columns(pair_panel):
    panel = pair_panel
    panel.layer.value, panel.head.value = 1, 3
    tokens = panel.trace.tokens[0]
    keep = [i for i, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]")]
    assert len(keep) == len(tokens) - 3
    panel.special.value = "hide"
    z, x, y = shown(panel)
    assert x == y == keep and panel.hide_special.value  # the head view's checkbox says the same
    assert not [t for t in panel.heatmap.row_tokens + panel.heatmap.col_tokens if t in ("[CLS]", "[SEP]")]
    assert_shows(panel, panel.trace.attention(1)[0, 3].numpy()[np.ix_(keep, keep)])
    assert "[CLS]/[SEP] hidden" in panel.heatmap.title and "do not sum to 1" in note(panel)
    panel.hide_special.value = False  # back to what was chosen before hiding
    assert panel.special.value == "clip" and shown(panel)[0].shape == (len(tokens), len(tokens))
    panel.hide_special.value = True
    assert panel.special.value == "hide"


def test_clipped_special_tokens_leave_the_colour_scale_but_keep_their_weights(pair_panel):
    panel = pair_panel
    panel.layer.value, panel.head.value = 2, 1
    tokens = panel.trace.tokens[0]
    special = np.array([t in ("[CLS]", "[SEP]") for t in tokens])
    full = panel.trace.attention(2)[0, 1].numpy()
    assert panel.special.value == "clip" and "[CLS]/[SEP] clipped" in panel.heatmap.title
    top = full[np.ix_(~special, ~special)].max()  # the colour scale's top ignores [CLS]/[SEP] rows and columns
    drawn = drawn_colours(panel.heatmap.svg)
    over = (full > top) & (special[:, None] | special[None, :])
    assert over.any() and (drawn[over] == D.HEATMAP_PALETTE[D.OVER_CODE]).all()  # above the scale: overflow colour
    assert drawn_as(panel.heatmap.svg, near_colours(full, top)).all()
    ticks = [float(t) for t in texts(panel.heatmap.svg, "bvl-colorbar-tick")]
    assert max(ticks) <= top < max(ticks) * 2.5  # the colour bar ends at the top of the scale, not at the [CLS] cells
    np.testing.assert_allclose(shown(panel)[0][over], full[over], rtol=HALF)  # hover reads them whole
    panel.special.value = "show"
    assert "clipped" not in panel.heatmap.title
    assert_shows(panel, full)


def test_colour_scales_per_row_and_log(pair_panel):
    panel = pair_panel
    panel.layer.value, panel.head.value, panel.special.value = 1, 0, "show"
    full = panel.trace.attention(1)[0, 0].numpy().astype(np.float64)
    panel.scale.value = "row"
    view = panel.heatmap
    assert "each row scaled to its max" in view.title
    drawn = drawn_colours(view.svg)
    row_top = full.argmax(axis=1)
    assert (drawn[np.arange(len(full)), row_top] == D.PALETTE[D.TOP_CODE]).all()  # every row reaches the top colour
    assert texts(view.svg, "bvl-colorbar-title") == ["attention weight ÷ its row's max"]
    assert texts(view.svg, "bvl-colorbar-tick")[-1] == "1"
    np.testing.assert_allclose(view.weights(), full, rtol=HALF, atol=3e-8)  # hover: the weights, not the colours
    panel.scale.value = "log"
    drawn = drawn_colours(view.svg)
    floor = full.max() * 10.0 ** -D.DECADES
    codes = np.rint(np.log10(full.clip(floor) / floor) / D.DECADES * D.TOP_CODE).astype(int)
    assert (drawn == D.PALETTE[codes]).all()
    assert texts(view.svg, "bvl-colorbar-title") == ["attention weight (log scale)"] and "log scale" in view.title
    labels = texts(view.svg, "bvl-colorbar-tick")
    assert labels and all(float(label) in (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0) for label in labels)


@pytest.mark.parametrize("special", ["clip", "hide"])
def test_sentence_pair_directions_show_only_that_block(pair_panel, special):
    panel = pair_panel
    assert not panel.direction.disabled
    panel.layer.value, panel.head.value, panel.special.value = 2, 1, special
    a, b = segments(panel)
    tokens = panel.trace.tokens[0]
    if special == "hide":
        a = [i for i in a if tokens[i] not in ("[CLS]", "[SEP]")]
        b = [i for i in b if tokens[i] not in ("[CLS]", "[SEP]")]
    full = panel.trace.attention(2)[0, 1].numpy()
    for direction, queries, keys in (("A→B", a, b), ("B→A", b, a)):
        panel.direction.value = direction
        z, x, y = shown(panel)
        assert y == queries and x == keys
        assert_shows(panel, full[np.ix_(queries, keys)])
        assert direction in panel.heatmap.title and "rows are a slice and do not sum to 1" in note(panel)
    assert [tokens[i] for i in a][:3] == (["the", "cat", "sat"] if special == "hide" else ["[CLS]", "the", "cat"])
    panel.direction.value = "all"
    assert shown(panel)[2] == sorted(a + b) and "slice" not in note(panel)


def test_directions_need_a_sentence_pair(single_panel, pair_panel):
    assert single_panel.direction.disabled and single_panel.direction.value == "all"
    single_panel.direction.value = "A→B"  # only possible from code: the control is disabled
    assert single_panel.direction.value == "all" and "sentence pair" in single_panel.message.value
    # a panel that shows a pair goes back to "all" (and disables the choice) when it gets a single sentence
    pair_panel.direction.value = "B→A"
    pair_panel.set_text("Only one sentence here.")
    assert pair_panel.direction.value == "all" and pair_panel.direction.disabled
    assert shown(pair_panel)[0].shape == (7, 7)


def test_padded_batch_row_leaves_padding_out(minilm_tokenizer, backbone):
    encoded = minilm_tokenizer(["short one", "a much longer text is here"], padding=True, return_tensors="pt")
    with torch.inference_mode(), trace(backbone, tokens=encoded, tokenizer=minilm_tokenizer) as recorded:
        backbone(encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
    panel = AttentionPanel(recorded, row=0, layer=2, head=1)
    real = int(encoded["attention_mask"][0].sum())
    z, x, y = shown(panel)
    assert real < encoded["input_ids"].shape[1] and z.shape == (real, real)
    assert "[PAD]" not in panel.heatmap.col_tokens
    assert_shows(panel, recorded.attention(2)[0, 1, :real, :real].numpy())
    panel.view.value = "model view"
    assert thumbnails(panel.model_view.svg)[0].shape == (3, 4, real, real)  # thumbnails of the real tokens only


def test_hover_reads_the_weights_the_view_holds(pair_panel):
    """Hover needs no kernel: the view holds the shown matrix as float16, row-major, and answers no messages."""
    view = pair_panel.heatmap
    full = pair_panel.trace.attention(0)[0, 0].numpy()
    held = np.frombuffer(view.values, np.float16).reshape(full.shape)
    np.testing.assert_array_equal(held, full.astype(np.float16))
    np.testing.assert_array_equal(view.weights(), held.astype(np.float32))
    sent = []
    view.send = lambda content, buffers=None: sent.append(content)
    view._handle_custom_msg({"type": "weight", "row": 2, "col": 5, "seq": 7}, [])
    assert sent == []


# toolbars -----------------------------------------------------------------------------------------------
def test_each_view_has_a_toolbar_with_the_controls_that_apply(pair_panel):
    panel = pair_panel
    expected = {"heatmap": [("layer", panel.layer), ("head", panel.head), ("show", panel.aggregation),
                            ("pair", panel.direction), ("colour scale", panel.scale), ("[CLS]/[SEP]", panel.special)],
                "head view": [("layer", panel.layer), ("pair", panel.direction),
                              ("hide [CLS]/[SEP]", panel.hide_special)],
                "model view": [("[CLS]/[SEP]", panel.special)]}

    def labelled(item: widgets.Widget) -> tuple[str, widgets.Widget]:
        """A control with its label beside it: a Label then the control in one row, or the control's own
        description where ipywidgets draws it beside (dropdown, checkbox, toggle buttons)."""
        if isinstance(item, widgets.HBox):
            label, control = item.children
            assert isinstance(label, widgets.Label) and not control.description
            return label.value, control
        assert isinstance(item, (widgets.Dropdown, widgets.Checkbox, widgets.ToggleButtons))
        return item.description, item

    for view, controls in expected.items():
        panel.view.value = view
        bar, export = panel.toolbar.children
        assert [labelled(item) for item in bar.children] == controls and export is panel.export_bar
        assert panel.toolbar in panel.children
    assert labelled(panel.children[0]) == ("view", panel.view)
    assert panel.export_bar.name == "attention-model-view"
    panel.view.value = "head view"
    assert panel.export_bar.name == "attention-head-view-layer0"
    assert not isinstance(panel.heads_shown, widgets.Widget)  # no "heads" list in any toolbar: the chips choose


def test_export_writes_the_view_on_screen(pair_panel, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pair_panel.layer.value, pair_panel.head.value = 2, 3
    path = pair_panel.export_bar.export()
    assert path.name.startswith("attention-layer2-head3-") and path.suffix == ".svg"
    assert path.read_text(encoding="utf-8") == themed(pair_panel.to_svg(), all_css(), "light")


# head view ----------------------------------------------------------------------------------------------
def check_head_view(panel: AttentionPanel, layer: int, queries: list[int], keys: list[int]) -> None:
    """The head view keeps every head's k strongest keys per query, and draws a line per kept (query, key) of each
    shown head whose opacity is the weight ÷ the strongest shown (the faintest left out), with the tokens in order."""
    view = panel.head_view
    tokens_ = panel.trace.tokens[0]
    assert view.query_tokens == [tokens_[i] for i in queries] and view.key_tokens == [tokens_[i] for i in keys]
    svg = panel.to_svg()
    assert svg == view.svg
    assert tokens(svg, "query") == [tokens_[i] for i in queries] and tokens(svg, "key") == [tokens_[i] for i in keys]
    assert view.k == min(panel.head_view_k, len(keys))
    indices, weights = view.lines()
    shown = sorted(view.heads)
    maps = [panel.trace.attention(layer)[0, head].numpy()[np.ix_(queries, keys)] for head in range(view.num_heads)]
    strongest = max(np.sort(maps[head], axis=1)[:, -view.k:].max() for head in shown)
    assert view.strongest() == pytest.approx(strongest)
    expected_lines = {}
    for head in range(view.num_heads):  # every head's lines are kept: the chips switch heads without retracing
        matrix = maps[head]
        for q in range(len(queries)):
            expected = np.argsort(-matrix[q], kind="stable")[: view.k]
            assert set(indices[head, q].tolist()) == set(expected.tolist())
            np.testing.assert_array_equal(weights[head, q], matrix[q, indices[head, q]])
            if head in shown:
                expected_lines.update({(head, q, int(j)): matrix[q, j] / strongest for j in expected
                                       if matrix[q, j] / strongest >= MIN_OPACITY})
    drawn = head_lines(svg)
    assert sorted(drawn) == sorted(expected_lines)
    for key, opacity in drawn.items():
        assert opacity == pytest.approx(expected_lines[key], abs=5e-4)
    assert [int(g.get("data-head")) for g in groups(svg, "bvl-head-lines")] == shown
    assert all(g.get("stroke") == head_color(int(g.get("data-head"))) for g in groups(svg, "bvl-head-lines"))


def test_head_view_starts_on_the_selected_head_and_chips_choose_heads(pretraining_model, minilm_tokenizer):
    panel = AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text=TEXT_A, text_b=TEXT_B, head=2)
    panel.layer.value = 1
    panel.view.value = "head view"
    assert isinstance(panel.on_screen, HeadView) and panel.slots["heatmap"].layout.display == "none"
    T = len(panel.trace.tokens[0])
    view = panel.head_view
    assert view.heads == [2] and view.num_heads == 4  # one head, not all four
    assert view.lines()[0].shape == view.lines()[1].shape == (4, T, 8)
    chips = groups(view.svg, "bvl-head-chip")  # a chip per head of the layer, the legend of the lines
    assert [(c.get("data-head"), c.get("data-on")) for c in chips] == [("0", "false"), ("1", "false"),
                                                                     ("2", "true"), ("3", "false")]
    assert view.full_title() == "layer 1 · head 2" and texts(view.svg, "bvl-title") == ["layer 1 · head 2"]
    strongest = view.lines()[1][2].max()  # opacity = weight ÷ the strongest line shown
    assert view.strongest() == pytest.approx(strongest) and f"÷ {strongest:.3f}" in view.note()
    assert texts(view.svg, "bvl-note") == [view.note()]
    assert assert_themed_drawing(view.svg, "head-view") == 1  # the one chip on: its own ink on the head's colour
    check_head_view(panel, 1, list(range(T)), list(range(T)))
    changes = []
    panel.on_figure_changed(lambda: changes.append(1))
    view.heads = [1, 2]  # what a click on the "head 1" chip sends: the kernel draws both heads
    assert panel.heads_shown.value == (1, 2) and changes  # Python knows, and the static copy follows
    assert "heads 1, 2" in view.full_title() and view.svg == panel.to_svg() and 'data-heads="1,2"' in view.svg
    check_head_view(panel, 1, list(range(T)), list(range(T)))
    assert assert_themed_drawing(view.svg, "head-view") == 2
    panel.heads_shown.value = (3, 0)  # the same from code
    assert view.heads == [0, 3]
    panel.layer.value = 2
    assert view.heads == [0, 3]  # a layer change keeps the chosen heads
    check_head_view(panel, 2, list(range(T)), list(range(T)))
    panel.direction.value = "A→B"
    a, b = segments(panel)
    check_head_view(panel, 2, a, b)
    assert int(view.lines()[0].max()) < len(b)  # indices count within the key column
    assert "A→B" in view.title
    panel.head.value = 1  # picking a head (in the heatmap's toolbar) shows that head alone
    assert view.heads == [1]
    view.heads = []  # every chip off: tokens and chips, no line
    assert not head_lines(view.svg) and "none (click a head)" in texts(view.svg, "bvl-title")[0]


def test_head_view_tokens_are_escaped_and_cut():
    view = HeadView()
    long_token = "&" + "x" * 30
    queries, keys = ["<b>", long_token], ['"a"', "</svg>"]
    view.show(queries, keys, np.array([[[1, 0], [0, 1]]], np.uint16), np.array([[[0.7, 0.3], [0.6, 0.4]]]), "t<1>")
    view.heads = [0]
    assert tokens(view.svg, "query") == ["<b>", long_token[:15] + "…"] and tokens(view.svg, "key") == keys
    assert "&lt;b&gt;" in view.svg and "<b>" not in view.svg and "</svg>" not in view.svg[:-6]
    titles = ["".join(t.itertext()) for t in groups(view.svg, "bvl-tokens")[0].iter(f"{SVG}title")]
    assert titles == [long_token]  # a cut token keeps its whole text for hover
    assert texts(view.svg, "bvl-title") == ["t<1> · head 0"]
    with pytest.raises(ValueError, match="must both be"):
        view.show(queries, keys, np.zeros((1, 3, 2), np.uint16), np.zeros((1, 3, 2)), "t")
    with pytest.raises(ValueError, match="key 5, but there are 2 key tokens"):
        view.show(queries, keys, np.full((1, 2, 2), 5, np.uint16), np.zeros((1, 2, 2)), "t")


# model view ---------------------------------------------------------------------------------------------
def test_model_view_thumbnails_and_click_opens_the_heatmap(pair_panel):
    panel = pair_panel
    panel.layer.value, panel.head.value, panel.special.value = 1, 2, "show"
    panel.view.value = "model view"
    view = panel.model_view
    # the view stays the model view (marking the current head is not a click)
    assert panel.view.value == "model view" and isinstance(panel.on_screen, ModelView)
    assert view.selected == [1, 2]
    T = len(panel.trace.tokens[0])
    assert (view.num_layers, view.num_heads, view.size) == (3, 4, T)  # T < 24: one pixel per weight
    codes, palette = thumbnails(view.svg)  # the drawing: one PNG per head, in the one palette
    assert codes.shape == (3, 4, T, T) and (palette == D.PALETTE).all()
    maps = np.stack([panel.trace.attention(layer)[0].numpy() for layer in range(3)])  # (L, H, T, T)
    # one colour scale for every map: its top is the largest weight of all
    assert view.scale == pytest.approx(maps.max() / D.TOP_CODE, rel=1e-6)
    np.testing.assert_allclose(codes * view.scale, maps, atol=view.scale / 2 + 1e-7)
    assert texts(view.svg, "bvl-colorbar-title") == ["attention weight"] and view.bar_ticks[0] == [0.0, "0"]
    assert texts(view.svg, "bvl-colorbar-tick")[0] == "0"
    assert "rows: query tokens, columns: key tokens" in view.hint and "one colour scale" in view.title
    assert texts(view.svg, "bvl-note") == [view.hint] and texts(view.svg, "bvl-title") == [view.title]
    assert view.svg == panel.to_svg() and assert_themed_drawing(view.svg, "model-view") == 0
    selected = [g for g in groups(view.svg, "bvl-thumb") if [c for c in g if c.get("class") == "bvl-selected"]]
    assert [(g.get("data-layer"), g.get("data-head")) for g in selected] == [("1", "2")]  # the head on screen
    view.selected = [2, 3]  # what a click in the browser does
    assert panel.view.value == "heatmap" and panel.on_screen is panel.heatmap
    assert panel.slots["heatmap"].layout.display is None
    assert (panel.layer.value, panel.head.value, panel.aggregation.value) == (2, 3, "head")
    assert_shows(panel, panel.trace.attention(2)[0, 3].numpy())
    # clicking while the heatmap is on screen, also from the mean of heads, shows the clicked head
    panel.aggregation.value = "mean"
    view.selected = [0, 1]
    assert (panel.layer.value, panel.head.value, panel.aggregation.value) == (0, 1, "head")
    assert_shows(panel, panel.trace.attention(0)[0, 1].numpy())


def test_model_view_clips_and_hides_special_tokens(pair_panel):
    panel = pair_panel
    panel.view.value = "model view"
    view = panel.model_view
    tokens = panel.trace.tokens[0]
    special = np.array([t in ("[CLS]", "[SEP]") for t in tokens])
    maps = np.stack([panel.trace.attention(layer)[0].numpy() for layer in range(3)])
    assert panel.special.value == "clip" and "clipped" in view.title
    assert view.scale == pytest.approx(maps[..., ~special, :][..., ~special].max() / D.TOP_CODE, rel=1e-6)
    panel.special.value = "hide"
    keep = ~special
    assert view.size == keep.sum() and "hidden" in view.title
    np.testing.assert_allclose(thumbnails(view.svg)[0] * view.scale, maps[..., keep, :][..., keep],
                               atol=view.scale / 2 + 1e-7)


def test_new_text_updates_every_view(pair_panel):
    panel = pair_panel
    panel.view.value = "head view"
    panel.set_text("Dogs bark loudly.", "Birds sing.")
    tokens = panel.trace.tokens[0]
    assert tokens[:4] == ["[CLS]", "dogs", "bark", "loudly"]
    assert panel.head_view.query_tokens == tokens
    panel.view.value = "model view"
    assert thumbnails(panel.model_view.svg)[0].shape == (3, 4, len(tokens), len(tokens))
    panel.view.value = "heatmap"
    assert_shows(panel, panel.trace.attention(0)[0, 0].numpy())


def test_a_text_longer_than_the_model_is_cut_with_a_notice(minilm_tokenizer):
    torch.manual_seed(5)
    model = BERT(tiny_config(minilm_tokenizer.vocab_size, max_position_embeddings=32)).eval()
    panel = AttentionPanel(model=model, tokenizer=minilm_tokenizer, text=" ".join(["word"] * 40))
    assert len(panel.trace.tokens[0]) == 32
    assert panel.truncation.cut and (panel.truncation.kept, panel.truncation.total) == (32, 42)
    assert "kept 32 of 42 tokens" in panel.truncation_notice.value
    assert "kept 32 of 42 tokens" in note(panel) and "kept 32 of 42 tokens" in panel.to_svg()
    panel.set_text("A short one.")
    assert panel.truncation_notice.value == "" and "kept" not in note(panel)


def test_bad_arguments_raise_clear_errors(pretraining_model, minilm_tokenizer, pair_panel):
    with pytest.raises(TypeError, match="Trace"):
        AttentionPanel()
    with pytest.raises(ValueError, match="layer 7 does not exist"):
        AttentionPanel(pair_panel.trace, layer=7)
    with pytest.raises(ValueError, match="head 4 does not exist"):
        AttentionPanel(pair_panel.trace, head=4)
    with pytest.raises(ValueError, match="empty"):
        AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text="  ")
    with pytest.raises(ValueError, match="fixed trace"):
        AttentionPanel(pair_panel.trace).set_text("no model to run")
    with pytest.raises(ValueError, match="scale must be one of"):
        AttentionPanel(pair_panel.trace, scale="sqrt")
    with pytest.raises(ValueError, match="special must be one of"):
        AttentionPanel(pair_panel.trace, special="drop")


def test_static_fallback_is_the_svg_on_screen(pair_panel):
    changes = []
    pair_panel.on_figure_changed(lambda: changes.append(1))
    pair_panel.layer.value = 2
    assert changes  # every redraw tells the static copy
    static = pair_panel.static_html()
    assert pair_panel.to_svg() in static and "<script" not in static and "bvl-attention" in static
    for view in ("head view", "model view"):
        pair_panel.view.value = view
        assert pair_panel.on_screen.to_svg() in pair_panel.static_html()


# 512 tokens ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def long_panel(minilm_tokenizer) -> AttentionPanel:
    """12 layers x 12 heads (like bert-base) at 512 tokens, narrow so it runs in a fraction of a second."""
    torch.manual_seed(4)
    model = BERT(tiny_config(minilm_tokenizer.vocab_size, num_hidden_layers=12, num_attention_heads=12, hidden_size=48,
                             intermediate_size=96, max_position_embeddings=512)).eval()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        recorded, truncation = trace_text(model, minilm_tokenizer, " ".join(["word"] * 510))
    finally:
        torch.set_num_threads(threads)
    assert not truncation.cut
    return AttentionPanel(recorded)


def test_512_tokens_stay_compact(long_panel):
    panel = long_panel
    L, H, T = 12, 12, 512
    assert panel.trace.attentions[0].shape == (1, H, T, T)
    full_size = L * H * T * T * 4  # every map as float32: 151 MB (bertviz's JSON of the same: ~860 MB)

    # heatmap: its drawing (the cells as one PNG) plus one head as T*T float16 weights (512 KB) for hover
    panel.view.value = "heatmap"
    view = panel.heatmap
    assert len(view.values) == 2 * T * T
    assert len(view.svg) <= 400_000 and view.svg.count("<image") == 1 and view.svg.count("<rect") < 200
    assert state_bytes(view) <= 2 * T * T + len(view.svg) + 20_000  # tokens and positions: a few KB each
    with sent_messages(view) as sizes:
        panel.layer.value = 7
    assert 0 < sum(sizes) <= 2 * T * T + len(view.svg) + 20_000  # a layer change: the new drawing and weights
    assert len(texts(view.svg, "bvl-key")) <= T // 10  # labels thinned out to where they fit

    # model view: its drawing, L*H thumbnails of 24x24 codes each a PNG (with its 768-byte palette) in base64,
    # ~1.6 KB a head with its labels and marks: 230 KB; goal <= 2 MB
    panel.view.value = "model view"
    view = panel.model_view
    assert view.size == 24 and thumbnails(view.svg)[0].shape == (L, H, 24, 24)
    model_view_bytes = state_bytes(view)
    assert model_view_bytes <= len(view.svg) * 1.1 + 1024  # the drawing and three small choices, nothing else
    assert model_view_bytes <= L * H * 2_000 and model_view_bytes * 500 < full_size

    # head view: its drawing, the shown head's lines (k=8 a query, ~85 bytes each) and the two token columns
    # (~90 bytes a token); every head's lines stay in the kernel, which draws again when a chip is clicked
    # a window of WINDOW_ROWS query rows is drawn, not all T
    panel.view.value = "head view"
    head_view_bytes = state_bytes(panel.head_view)
    k, rows = panel.head_view.k, WINDOW_ROWS
    assert k == 8 and panel.head_view.heads == [panel.head.value] and len(head_lines(panel.head_view.svg)) == rows * k
    assert head_view_bytes <= rows * k * 90 + 2 * rows * 100 + 8192
    with sent_messages(panel.head_view) as sizes:
        panel.head_view.heads = [0, 1]  # a chip clicked on: a drawing of two heads' lines
    assert len(head_lines(panel.head_view.svg)) == 2 * rows * k
    assert sum(sizes) <= 2 * rows * k * 90 + 2 * rows * 100 + 8192
    panel.head_view.heads = [0]
    panel.view.value = "heatmap"


@pytest.mark.parametrize("special", ["show", "clip"])
def test_512_tokens_draw_every_cell_and_hover_reads_every_weight(long_panel, special):
    """At 512 tokens the cells are one PNG, one pixel a cell, in the colours of the traced weights; hover's float16
    weights are the traced ones to float16's precision and their rows still sum to 1."""
    panel = long_panel
    panel.view.value = "heatmap"  # the panel draws only the view on screen
    panel.layer.value, panel.head.value, panel.special.value = 5, 9, special
    T = 512
    expected = panel.trace.attention(5)[0, 9].numpy().astype(np.float64)
    view = panel.heatmap
    np.testing.assert_allclose(view.weights(), expected, rtol=HALF, atol=3e-8)
    np.testing.assert_allclose(view.weights().sum(axis=1, dtype=np.float64), 1.0, atol=1e-3)
    special_tokens = np.array([t in ("[CLS]", "[SEP]") for t in panel.trace.tokens[0]])
    counted = ~(special_tokens[:, None] | special_tokens[None, :]) if special == "clip" else np.ones((T, T), bool)
    top = expected[counted].max()
    assert drawn_colours(view.svg).shape == (T, T, 3)
    assert drawn_as(view.svg, near_colours(expected, top)).all()  # within a colour step; clipped: the overflow colour
    ticks = [float(t) for t in texts(view.svg, "bvl-colorbar-tick")]  # weights on the colour scale, up to its top
    assert ticks[0] == 0 and max(ticks) <= top < max(ticks) * 2.5
    assert texts(view.svg, "bvl-colorbar-title") == ["attention weight"]
