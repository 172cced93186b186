"""Long texts and honest colours: the heatmap's zoom window (kernel state, drawn by the figure, shown by the static copy
and exports, and `save(window=...)`), clipped cells marked and named by the colour bar's overflow end, and the head
view's window of rows around the selected query. Each is read back from the drawing itself."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch
import traitlets
from heatmap_drawing import SVG, cell_area, drawn_colours, texts
from widgets_testlib import tiny_config

from bertviz_lab.model import BERTForPreTraining
from bertviz_lab.widgets import AttentionPanel
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.contrast import ink_on
from bertviz_lab.widgets.figures.head_view import WINDOW_ROWS, head_view_svg, window_first
from bertviz_lab.widgets.figures.heatmap import heatmap_svg
from bertviz_lab.widgets.figures.palette import OVERFLOW_COLOR, reads_on_both_grounds
from bertviz_lab.widgets.views.front_end import css
from bertviz_lab.widgets.views.head_view import HeadView
from bertviz_lab.widgets.views.heatmap import HeatmapView

T = 512


@pytest.fixture(scope="module")
def long_panel(minilm_tokenizer) -> AttentionPanel:
    """A tiny random BERT (2 layers, 2 heads) on a text of 512 tokens, with its model for the neuron view."""
    torch.manual_seed(4)
    model = BERTForPreTraining(tiny_config(minilm_tokenizer.vocab_size, num_hidden_layers=2, num_attention_heads=2,
                                           hidden_size=32, intermediate_size=64,
                                           max_position_embeddings=T)).eval()
    words = ("the quick brown fox jumps over the lazy dog " * 60).split()[: T - 2]
    panel = AttentionPanel(model=model, tokenizer=minilm_tokenizer, text=" ".join(words))
    assert len(panel.info.tokens) == T
    return panel


def clipped_cells(svg: str) -> set[tuple[int, int]]:
    """The cells (row, col in the matrix) the drawing outlines as clipped: each outline subpath `M{x},{y}h...z`."""
    area = cell_area(svg)
    x0, y0, cell_w, cell_h = (float(area.get(f"data-{n}")) for n in ("x", "y", "cell-w", "cell-h"))
    row0, col0 = int(area.get("data-row0")), int(area.get("data-col0"))
    marks = [node for node in ET.fromstring(svg).iter(f"{SVG}path")
             if node.get("class") == "bvl-clipped-mark" and node.get("data-cells")]
    if not marks:
        return set()
    (mark,) = marks
    found = {(row0 + round((float(y) - 0.5 - y0) / cell_h), col0 + round((float(x) - 0.5 - x0) / cell_w))
             for x, y in re.findall(r"M([\d.]+),([\d.]+)h", mark.get("d"))}
    assert len(found) == int(mark.get("data-cells"))
    return found


def overflow_end(svg: str) -> tuple[float, str] | None:
    """The colour bar's overflow end: (the maximum it carries, the label it shows), None without one."""
    ends = [node for node in ET.fromstring(svg).iter(f"{SVG}g") if node.get("class") == "bvl-colorbar-overflow"]
    if not ends:
        return None
    (end,) = ends
    return float(end.get("data-max")), texts(svg, "bvl-colorbar-overflow-label")[0]


# honest colours ---------------------------------------------------------------------------------------------
def test_a_clipped_cell_above_the_colour_bar_is_marked_and_the_bar_names_its_true_maximum():
    rng = np.random.default_rng(0)
    matrix = rng.dirichlet(np.ones(12), 12) * 0.2
    matrix[:, 0] = 0.8 + 0.17 * np.linspace(0, 1, 12)  # [CLS]'s column: 0.8 .. 0.97, far above the others
    special = np.zeros(12, bool)
    special[0] = True
    tokens = ["[CLS]"] + [f"w{i}" for i in range(11)]
    svg = heatmap_svg(matrix, tokens, tokens, range(12), range(12), "layer 0", ignore_rows=special,
                      ignore_cols=special)
    ticks = [float(t) for t in texts(svg, "bvl-colorbar-tick")]
    top = matrix[np.ix_(~special, ~special)].max()
    assert max(ticks) <= top < 0.3 and matrix.max() == pytest.approx(0.97)  # the bar's scale ends far below 0.97
    over = {(int(r), int(c)) for r, c in zip(*np.nonzero(matrix > top))}  # all in [CLS]'s row or column
    assert {(r, 0) for r in range(12)} <= over and all(r == 0 or c == 0 for r, c in over)
    assert clipped_cells(svg) == over  # each one outlined and hatched
    colours = drawn_colours(svg)
    is_over = (colours == D.HEATMAP_PALETTE[D.OVER_CODE]).all(axis=-1)
    assert {(int(r), int(c)) for r, c in zip(*np.nonzero(is_over))} == over  # the overflow colour, only there
    maximum, label = overflow_end(svg)
    assert maximum == pytest.approx(0.97, rel=1e-5) and label == "clipped, max 0.97"
    # the same matrix with [CLS] in the scale: nothing is clipped, no mark, no overflow end
    plain = heatmap_svg(matrix, tokens, tokens, range(12), range(12), "layer 0")
    assert clipped_cells(plain) == set() and overflow_end(plain) is None


def test_the_overflow_colour_reads_on_both_grounds_and_the_hatch_ink_on_it():
    assert reads_on_both_grounds(OVERFLOW_COLOR)
    assert tuple(D.HEATMAP_PALETTE[D.OVER_CODE]) == tuple(int(OVERFLOW_COLOR[i: i + 2], 16) for i in (1, 3, 5))
    assert (D.HEATMAP_PALETTE[: D.OVER_CODE] == D.PALETTE[: D.OVER_CODE]).all()  # the scale itself is the same
    rule = re.search(r"\.bvl-clipped-mark \{([^}]*)\}", css("heatmap")).group(1)
    assert f"stroke: {ink_on(OVERFLOW_COLOR)}" in rule


def test_the_panel_marks_clipped_cls_and_sep_cells_and_names_their_maximum(pair_panel_clipped):
    panel = pair_panel_clipped
    full = panel.trace.attention(2)[0, 1].numpy().astype(np.float64)
    special = np.array([t in ("[CLS]", "[SEP]") for t in panel.trace.tokens[0]])
    top = full[np.ix_(~special, ~special)].max()
    over = (full > top) & (special[:, None] | special[None, :])
    assert over.any()
    assert clipped_cells(panel.heatmap.svg) == {(int(r), int(c)) for r, c in zip(*np.nonzero(over))}
    maximum, label = overflow_end(panel.heatmap.svg)
    assert maximum == pytest.approx(full[over].max(), rel=1e-5) and maximum > max(
        float(t) for t in texts(panel.heatmap.svg, "bvl-colorbar-tick"))
    assert label == f"clipped, max {full[over].max():.3g}"
    hover = panel.heatmap.weights()
    np.testing.assert_allclose(hover[over], full[over], rtol=2**-11)  # hover reads the true weights
    area = cell_area(panel.heatmap.svg)
    assert float(area.get("data-top")) == pytest.approx(top, rel=1e-5)  # hover says "clipped" above this
    panel.special.value = "show"
    assert clipped_cells(panel.heatmap.svg) == set() and overflow_end(panel.heatmap.svg) is None
    panel.special.value = "clip"


@pytest.fixture
def pair_panel_clipped(pretraining_model, minilm_tokenizer) -> AttentionPanel:
    panel = AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text="The cat sat on the mat.",
                           text_b='It was "warm" there.', layer=2, head=1)
    assert panel.special.value == "clip"
    return panel


def test_the_overflow_end_of_the_per_row_scale_is_in_its_units():
    matrix = np.array([[0.9, 0.05, 0.05], [0.5, 0.25, 0.25], [0.2, 0.4, 0.4]])
    special = np.array([True, False, False])
    encoded = D.encode_heatmap(matrix, "row", ignore_cols=special)
    # each row's top ignores column 0: rows 0 and 1 are clipped there, at 0.9/0.05 and 0.5/0.25
    assert (encoded.codes[:, 0] == D.OVER_CODE).tolist() == [True, True, False]
    assert D.overflow_max(matrix, encoded) == pytest.approx(18.0)
    assert D.scale_top(encoded) is None and D.overflow_max(matrix, D.encode_heatmap(matrix)) is None


# the heatmap's window ------------------------------------------------------------------------------------------
def test_a_window_of_32_tokens_labels_every_token_and_keeps_the_whole_matrix_scale(long_panel):
    panel = long_panel
    panel.view.value, panel.special.value = "heatmap", "clip"
    view = panel.heatmap
    whole = view.svg
    values = bytes(view.values)
    assert len(texts(whole, "bvl-key")) < 64 and cell_area(whole).tag == f"{SVG}image"
    view.window = [200, 232, 190, 222]
    svg = view.svg
    area = cell_area(svg)
    assert (area.get("data-rows"), area.get("data-cols"), area.get("data-row0"), area.get("data-col0")) == (
        "32", "32", "200", "190")
    tokens = panel.info.tokens
    queries = [t.split("·", 1) for t in texts(svg, "bvl-query")]
    keys = [t.split("·", 1) for t in texts(svg, "bvl-key")]
    assert [(int(p), t) for p, t in queries] == [(p, tokens[p]) for p in range(200, 232)]  # every one, in order
    assert [(int(p), t) for p, t in keys] == [(p, tokens[p]) for p in range(190, 222)]
    assert view.title.endswith("queries 200–231 · keys 190–221 of 512") and texts(svg, "bvl-title") == [view.title]
    # the colours are the whole matrix's, cell for cell: a window is a crop, not a new scale
    full_codes = D.encode_heatmap(panel.matrix()[0], "linear", panel.info.special, panel.info.special).codes
    assert (drawn_colours(svg) == D.HEATMAP_PALETTE[full_codes[200:232, 190:222]]).all()
    assert texts(svg, "bvl-colorbar-tick") == texts(whole, "bvl-colorbar-tick")
    assert bytes(view.values) == values  # hover keeps every weight of the matrix
    view.window = []
    assert view.svg == whole


def test_the_window_is_what_the_static_copy_and_exports_show_and_survives_a_layer_change(long_panel, tmp_path):
    panel = long_panel
    panel.view.value = "heatmap"
    panel.heatmap.window = [100, 132, 100, 132]
    assert panel.heatmap.svg in panel.static_copy.html() and panel.to_svg() == panel.heatmap.svg
    assert panel.export_bar.name.endswith("-queries100-131-keys100-131")
    saved = panel.save(tmp_path / "zoomed.svg").read_text(encoding="utf-8")
    assert cell_area(saved).get("data-row0") == "100" and len(texts(saved, "bvl-query")) == 32
    panel.layer.value = 1 - panel.layer.value
    assert panel.heatmap.window == [100, 132, 100, 132] and cell_area(panel.heatmap.svg).get("data-rows") == "32"
    assert f"layer {panel.layer.value} " in panel.heatmap.title and "queries 100–131" in panel.heatmap.title
    panel.heatmap.window = []


def test_save_with_a_window_draws_it_and_leaves_the_screen_as_it_is(long_panel, tmp_path):
    panel = long_panel
    panel.view.value = "heatmap"
    panel.heatmap.window = []
    on_screen = panel.heatmap.svg
    saved = panel.save(tmp_path / "window.svg", window=(300, 316)).read_text(encoding="utf-8")
    area = cell_area(saved)
    assert (area.get("data-rows"), area.get("data-row0"), area.get("data-col0")) == ("16", "300", "300")
    assert [t.split("·")[0] for t in texts(saved, "bvl-key")] == [str(p) for p in range(300, 316)]
    assert panel.heatmap.svg == on_screen and panel.heatmap.window == []
    assert panel.save(tmp_path / "window.png", window=(0, 8)).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match=r"window \(5, 5\) must have 0 <= start < end <= 512"):
        panel.save(tmp_path / "bad.svg", window=(5, 5))
    with pytest.raises(TypeError, match="window must be \\(start, end\\), two token positions, got 'ab'"):
        panel.save(tmp_path / "bad.svg", window="ab")
    panel.view.value = "head view"
    with pytest.raises(ValueError, match="window= applies to the heatmap; the view on screen is the head view"):
        panel.save(tmp_path / "bad.svg", window=(0, 8))
    panel.view.value = "heatmap"


def test_a_bad_window_from_a_front_end_is_refused_in_one_line():
    view = HeatmapView()
    for bad in ([1, 2, 3], [5, 2, 0, 4], [0, 4, 3, 3]):
        with pytest.raises(traitlets.TraitError, match="window must be \\[\\] or \\[query_start, query_end"):
            view.window = bad
    with pytest.raises(traitlets.TraitError, match="selected must be \\[\\] or \\[query_position, key_position\\]"):
        view.selected = [1, 2, 3]


def test_a_window_outside_the_tokens_shown_draws_the_whole_matrix():
    view = HeatmapView()
    matrix = np.full((4, 4), 0.25)
    view.show(matrix, list("abcd"), list("abcd"), [1, 2, 3, 4], [1, 2, 3, 4], "layer 0")
    view.window = [50, 60, 50, 60]
    assert cell_area(view.svg).get("data-rows") == "4" and view.title == "layer 0"
    view.window = [0, 3, 3, 9]  # positions 1, 2 and 3, 4: the rows and columns that are there
    area = cell_area(view.svg)
    assert (area.get("data-rows"), area.get("data-row0"), area.get("data-cols"), area.get("data-col0")) == (
        "2", "0", "2", "2")


def test_a_selected_cell_is_marked_and_becomes_the_query_token(long_panel):
    panel = long_panel
    panel.view.value = "heatmap"
    panel.heatmap.window = [40, 72, 40, 72]
    panel.heatmap.selected = [45, 50]
    marks = [node for node in ET.fromstring(panel.heatmap.svg).iter(f"{SVG}g")
             if node.get("class") == "bvl-selected-cell"]
    assert [(m.get("data-row"), m.get("data-col")) for m in marks] == [("45", "50")]
    area = cell_area(panel.heatmap.svg)
    rect = marks[0][0]
    assert (float(rect.get("x")), float(rect.get("y"))) == (
        float(area.get("data-x")) + 10 * float(area.get("data-cell")),
        float(area.get("data-y")) + 5 * float(area.get("data-cell")))
    assert panel.query.value == 45
    panel.heatmap.window = [100, 132, 100, 132]  # the cell out of the window: not drawn
    assert "bvl-selected-cell" not in panel.heatmap.svg
    panel.heatmap.window, panel.heatmap.selected = [], []


# the head view's window ----------------------------------------------------------------------------------------
def test_the_head_view_draws_a_window_of_rows_around_the_selected_query(long_panel):
    panel = long_panel
    panel.query.value = 300
    panel.view.value = "head view"
    view = panel.head_view
    root = ET.fromstring(view.svg)
    assert int(root.get("data-rows")) == WINDOW_ROWS and int(root.get("data-queries")) == T
    first = int(root.get("data-first"))
    assert first <= 300 < first + WINDOW_ROWS and root.get("data-query") == "300"
    shown = {int(node.get("data-index")) for node in root.iter(f"{SVG}text") if node.get("data-side") == "query"}
    assert shown == set(range(first, first + WINDOW_ROWS))
    selected = [node for node in root.iter(f"{SVG}text") if "bvl-selected" in (node.get("class") or "").split()]
    assert [(n.get("data-index"), n.text) for n in selected] == [("300", panel.info.tokens[300])]
    assert float(root.get("height")) < 900  # not 9,000 px: a window, whatever the text's length
    assert view.title in texts(view.svg, "bvl-title")[0] and f"queries {first}–{first + WINDOW_ROWS - 1} of 512" in \
        texts(view.svg, "bvl-title")[0]


def test_head_view_lines_to_keys_outside_the_window_end_at_its_edge_and_are_counted():
    rng = np.random.default_rng(1)
    n, k = 100, 3
    indices = np.stack([np.stack([rng.choice(n, k, replace=False) for _ in range(n)])]).astype(np.uint16)
    weights = np.full(indices.shape, 0.5, np.float32)
    tokens = [f"t{i}" for i in range(n)]
    svg = head_view_svg(tokens, tokens, indices, weights, [0], "layer 0", query=50, first=40, rows=20)
    root = ET.fromstring(svg)
    assert root.get("data-first") == "40"
    lines = [(int(g.get("data-q")), line) for g in root.iter(f"{SVG}g") if g.get("data-q") for line in g]
    assert sorted({q for q, _ in lines}) == list(range(40, 60)) and len(lines) == 20 * k
    above = below = 0
    for q, line in lines:
        key, y2 = int(line.get("data-key")), float(line.get("y2"))
        assert float(line.get("y1")) == (q - 40 + 0.5) * 18
        if key < 40:
            assert y2 < 0
            above += 1
        elif key >= 60:
            assert y2 > 20 * 18
            below += 1
        else:
            assert y2 == (key - 40 + 0.5) * 18
    labels = texts(svg, "bvl-off-window")
    assert labels == ["↑ 40 earlier queries", "↓ 40 later queries", f"↑ {above} lines to keys 0–39",
                      f"↓ {below} lines to keys 60–99"]


def test_window_first_moves_the_window_as_little_as_it_takes():
    assert window_first(10, 0, 512) == 0 and window_first(32, 0, 512) == 1 and window_first(3, 100, 512) == 3
    assert window_first(-1, 600, 512) == 480 and window_first(5, 3, 20) == 0


def test_the_head_view_query_from_a_front_end_moves_the_window_and_the_query_token(long_panel):
    panel = long_panel
    panel.view.value = "head view"
    view = panel.head_view
    view.first, view.query = 400, 410  # what the arrow keys write
    root = ET.fromstring(view.svg)
    assert (root.get("data-first"), root.get("data-query")) == ("400", "410") and panel.query.value == 410
    assert f"queries 400–{400 + WINDOW_ROWS - 1}" in texts(view.svg, "bvl-title")[0]
    assert view.svg in panel.static_copy.html()
    view.first = 0  # the wheel moves the window alone
    assert ET.fromstring(view.svg).get("data-first") == "0" and panel.query.value == 410
    panel.query.value = 200  # the query chosen elsewhere (the neuron view's control): the window follows
    root = ET.fromstring(view.svg)
    assert root.get("data-query") == "200" and int(root.get("data-first")) <= 200 < int(root.get("data-first")) + 32
    panel.view.value = "heatmap"


def test_a_short_text_draws_every_row_without_window_labels(pretraining_model, minilm_tokenizer):
    panel = AttentionPanel(model=pretraining_model, tokenizer=minilm_tokenizer, text="The cat sat on the mat.",
                           view="head view")
    svg = panel.head_view.svg
    assert texts(svg, "bvl-off-window") == [] and "queries" not in texts(svg, "bvl-title")[0]
    assert len([t for t in texts(svg, "bvl-query")]) == len(panel.info.tokens)


def test_head_view_lines_are_each_querys_strongest_keys(long_panel):
    panel = long_panel
    panel.view.value = "head view"
    view = panel.head_view
    indices, weights = view.lines()
    attention = panel.trace.attention(panel.layer.value)[0].numpy()  # (heads, T, T)
    assert indices.shape == (2, T, view.k)
    picked = np.take_along_axis(attention, indices.astype(np.intp), axis=-1)
    np.testing.assert_allclose(weights, picked, rtol=1e-6)
    kth = np.sort(attention, axis=-1)[..., -view.k]  # the k-th largest weight of each row
    assert (weights >= kth[..., None] - 1e-7).all()
    panel.view.value = "heatmap"


def test_the_head_view_ignores_a_query_out_of_range():
    view = HeadView()
    view.show(["a", "b"], ["a", "b"], np.zeros((1, 2, 1), np.uint16), np.ones((1, 2, 1)), "layer 0", query=7)
    assert view.query == -1 and 'data-query="-1"' in view.svg


def test_a_window_of_the_head_view_is_titled_by_token_positions(long_panel):
    panel = long_panel
    panel.special.value = "hide"  # the rows start at position 1
    panel.view.value = "head view"
    view = panel.head_view
    view.first, view.query = 100, 105
    assert texts(view.svg, "bvl-title")[0].endswith(f"queries 101–{100 + WINDOW_ROWS} of 510")
    assert panel.query.value == 106  # row 105 is the token at position 106
    panel.special.value, panel.view.value = "clip", "heatmap"


def test_a_band_of_queries_against_every_key_gets_rows_tall_enough_to_label(long_panel):
    panel = long_panel
    panel.view.value = "heatmap"
    view = panel.heatmap
    view.window = [100, 132, 0, T]  # a range typed for the queries only
    area = cell_area(view.svg)
    assert (area.get("data-rows"), area.get("data-cols")) == ("32", str(T))
    assert (area.get("data-cell-w"), area.get("data-cell-h"), area.get("data-cell")) == ("1", "18", None)
    queries = texts(view.svg, "bvl-query")
    assert [q.split("·")[0] for q in queries] == [str(p) for p in range(100, 132)]  # every query labelled
    assert len(texts(view.svg, "bvl-key")) < 64  # the keys thinned out to where they fit
    assert (float(area.get("width")), float(area.get("height"))) == (T * 1, 32 * 18)  # the embedded image
    view.window = []
