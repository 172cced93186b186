"""CorpusPanel over a real corpus (a tiny random BERT analysed with `bertviz_lab.corpus.analyze`): each view shows
what the corpus API answers, a click (the front end's "open" message) opens that text in the attention panel at the
layer, head or token, save() writes each view, the Workbench's Corpus tab opens texts in its Attention tab and
`%bert_inspect --corpus DIR` opens it; bad input gets one clear line."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest
from IPython.core.error import UsageError
from widgets_testlib import XSS

from bertviz_lab.corpus import Corpus, analyze
from bertviz_lab.kernels.head_statistics import statistic
from bertviz_lab.widgets import CorpusPanel, Workbench
from bertviz_lab.widgets.panels.corpus import in_context, longest_word
from bertviz_lab.widgets.panels.workbench import TABS

TEXTS = ["The cat sat on the mat.", "A dog ran home, and the cat followed.", "Rivers flow to the sea.",
         f"Markup like {XSS} is only text.", "She sat on the bank of the river.", "Why did the bank close early?",
         "The river was warm in summer.", "Birds sing; cats listen."]


@pytest.fixture(scope="module")
def corpus(pretraining_model, minilm_tokenizer, tmp_path_factory) -> Corpus:
    """Every layer and head of the tiny model (3 x 4), hidden states and queries/keys stored."""
    out = tmp_path_factory.mktemp("corpus") / "tiny"
    return analyze(pretraining_model, minilm_tokenizer, TEXTS, out, vectors=("hidden", "qk"), batch_size=4,
                   progress=False)


@pytest.fixture
def panel(corpus, pretraining_model, minilm_tokenizer):
    made = CorpusPanel(corpus.path, pretraining_model, minilm_tokenizer, n=20)
    yield made
    made.close()


def front_end_opens(view, index: int) -> None:
    """What a click on the index-th item sends to the kernel."""
    view._front_end_message(view, {"type": "open", "index": index}, [])


def test_atlas_shows_the_corpus_head_statistics(panel, corpus):
    stats = corpus.head_stats()
    for stat in ("entropy", "cls", "punct"):
        panel.stat.value = stat
        grid = panel.atlas.grid()
        for layer, head, value in zip(stats["layer"], stats["head"], stats[stat]):
            assert grid[int(layer), int(head)] == pytest.approx(float(value), rel=1e-6, abs=1e-7)
        label = statistic(stat).label
        assert panel.atlas.stat_name == label and label in panel.to_svg()
    assert panel.export_bar.name == "corpus-atlas-entropy"  # named when the view was shown


def test_choosing_a_head_lists_its_top_texts_and_a_click_opens_one_at_that_head(panel, corpus):
    panel.stat.value = "cls"
    panel.atlas.selected = [2, 1]  # what a click on the cell writes
    top = corpus.top_texts(2, 1, "cls", k=panel.k)
    assert panel.atlas.top_ids == top["text_id"].tolist()
    assert panel.atlas.top_values == pytest.approx(top["value"].tolist())
    assert "layer 2 · head 1" in panel.atlas.title
    panel.order.value = False  # least
    least = corpus.top_texts(2, 1, "cls", k=panel.k, largest=False)
    assert panel.atlas.top_ids == least["text_id"].tolist()
    front_end_opens(panel.atlas, 1)
    text_id = least["text_id"].iloc[1]
    assert panel.opened["text_id"] == text_id and panel.opened["text"] == corpus.text(text_id)[0]
    attention = panel.attention
    assert attention.text == corpus.text(text_id)[0]
    assert (attention.layer.value, attention.head.value) == (2, 1)
    assert attention.heatmap.title.startswith("layer 2 · head 1")
    assert attention.trace.tokens[0] == corpus.tokens(text_id)
    front_end_opens(panel.atlas, 99)  # no such text: nothing happens
    assert panel.opened["text_id"] == text_id


def test_nearest_shows_the_corpus_answer_and_opens_a_match_at_its_token(panel, corpus):
    panel.view.value = "nearest"
    text = "She sat on the bank of the river."
    assert panel.query.value and panel.position.options
    panel.search(text, 5, 2)
    expected = corpus.nearest(text, 5, 2, k=panel.k)
    assert panel.nearest.text_ids == expected["text_id"].tolist()
    assert panel.nearest.positions == expected["position"].tolist()
    assert panel.nearest.scores == pytest.approx(expected["score"].tolist())
    assert "layer 2" in panel.nearest.title and panel.position.label.endswith("bank")
    index = 2
    front_end_opens(panel.nearest, index)
    text_id, position = int(expected["text_id"].iloc[index]), int(expected["position"].iloc[index])
    assert panel.nearest.selected == index
    assert panel.attention.text == corpus.text(text_id)[0]
    assert panel.attention.layer.value == 2 and panel.attention.query.value == position
    assert panel.attention.heatmap.selected == [position, position]


def test_qk_map_holds_every_point_with_its_context_and_opens_its_text(panel, corpus):
    panel.view.value = "qk map"
    layer, head = panel.qk_head.value
    points = corpus.qk_map(layer, head, n=panel.n)
    assert panel.qk_map.count() == len(points) == 2 * panel.n
    xs = np.frombuffer(bytes(panel.qk_map.xs), dtype=np.float32)
    np.testing.assert_allclose(xs, points["x"].to_numpy(dtype=np.float32))
    contexts = panel.qk_map.contexts
    index = np.frombuffer(bytes(panel.qk_map.context_index), dtype=np.int32)
    for i in (0, len(points) - 1):
        tokens = corpus.tokens(int(points["text_id"].iloc[i]))
        assert contexts[index[i]] == in_context(tokens, int(points["position"].iloc[i]))
        assert f"[{points['token'].iloc[i]}]" in contexts[index[i]]
    panel.color_by.value = "position"
    assert "positions 0–" in panel.to_svg()
    panel.qk_head.value = (1, 3)
    assert panel.qk_map.title == "query–key map · layer 1 · head 3"
    front_end_opens(panel.qk_map, 4)
    text_id = int(corpus.qk_map(1, 3, n=panel.n)["text_id"].iloc[4])
    assert panel.opened["text_id"] == text_id and panel.qk_map.selected == 4
    assert (panel.attention.layer.value, panel.attention.head.value) == (1, 3)


@pytest.mark.parametrize("view,root_class", [("atlas", "bvl-atlas"), ("nearest", "bvl-nearest"),
                                             ("qk map", "bvl-qk-map")])
def test_save_writes_each_view_as_svg_and_png(panel, tmp_path, view, root_class):
    svg_path = panel.save(tmp_path / "figure.svg", view=view, theme="dark", caption=True)
    root = ET.fromstring(svg_path.read_text(encoding="utf-8"))
    assert root_class in root.get("class").split()
    assert "#111111" in root.find("{http://www.w3.org/2000/svg}style").text  # the dark ground
    assert f"corpus of {len(TEXTS)} texts" in "".join(root.itertext())
    png = panel.save(tmp_path / "figure.png", view=view, scale=2)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="view must be one of atlas, nearest, qk map; got 'map'"):
        panel.save(tmp_path / "x.svg", view="map")


def test_save_takes_scale_theme_and_caption_where_every_panel_does(panel, tmp_path):
    # Panel.save(path, scale, theme, caption): the corpus panel's `view` comes after them, by name only
    png = panel.save(tmp_path / "figure.png", 2)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = panel.save(tmp_path / "figure.svg", 1, "dark")
    assert "#111111" in svg.read_text(encoding="utf-8")


def test_the_static_copy_is_the_figure_on_screen(panel):
    panel.view.value = "nearest"
    assert panel.static_html() == f"<div class='bvl-figure'>{panel.nearest.svg}</div>"


def test_workbench_corpus_tab_opens_texts_in_the_attention_tab(corpus, pretraining_model, minilm_tokenizer):
    bench = Workbench(pretraining_model, minilm_tokenizer, corpus=corpus.path, tab="corpus")
    try:
        assert bench.panels()["corpus"] is bench.corpus and bench.tabs.selected_index == len(TABS)
        assert bench.tabs.get_title(len(TABS)) == "Corpus"
        bench.corpus.atlas.selected = [1, 2]
        front_end_opens(bench.corpus.atlas, 0)
        text_id = bench.corpus.atlas.top_ids[0]
        assert bench.tabs.selected_index == 0 and bench.text_box.value == corpus.text(text_id)[0]
        assert (bench.attention.layer.value, bench.attention.head.value) == (1, 2)
        assert bench.attention.trace.tokens[0] == corpus.tokens(text_id)
        assert bench.corpus.attention is None  # the workbench's own Attention tab showed it
        assert "data-tab='corpus'" in bench.static_html()
    finally:
        bench.close()


def test_bert_inspect_corpus_opens_the_corpus_tab(corpus, ipython_shell):
    from bertviz_lab.magics import BertInspectMagics

    ipython_shell.register_magics(BertInspectMagics)
    panel = ipython_shell.run_line_magic("bert_inspect", f"--corpus {corpus.path}")
    try:
        assert isinstance(panel, Workbench) and panel.tabs.selected_index == len(TABS)
        assert panel.corpus.corpus.path == corpus.path
    finally:
        panel.close()
    with pytest.raises(UsageError) as error:
        ipython_shell.run_line_magic("bert_inspect", f"--corpus {corpus.path} --view masking")
    assert "a corpus opens the workbench's Corpus tab; leave out the masking view" in str(error.value)


def test_bad_input_gets_one_clear_line(corpus, tmp_path, pretraining_model, minilm_tokenizer):
    with pytest.raises(ValueError) as error:
        CorpusPanel(tmp_path, pretraining_model, minilm_tokenizer)
    assert str(tmp_path) in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(TypeError, match="corpus must be a bertviz_lab.corpus.Corpus or the folder of one, got int"):
        CorpusPanel(3, pretraining_model, minilm_tokenizer)
    with pytest.raises(ValueError, match="view must be one of atlas, nearest, qk map; got 'grid'"):
        CorpusPanel(corpus, pretraining_model, minilm_tokenizer, view="grid")
    with pytest.raises(ValueError, match="stat must be one of entropy"):
        CorpusPanel(corpus, pretraining_model, minilm_tokenizer, stat="mean")
    with pytest.raises(ValueError, match=r"search_layer 7 has no stored hidden states; this corpus stores layers \["):
        CorpusPanel(corpus, pretraining_model, minilm_tokenizer, search_layer=7)
    with pytest.raises(ValueError, match="queries and keys of layer 5 · head 0"):
        CorpusPanel(corpus, pretraining_model, minilm_tokenizer, layer=5, head=0)
    panel = CorpusPanel(corpus, pretraining_model, minilm_tokenizer, view="nearest")
    try:
        panel.search(position=1, layer=panel.search_layer.options[0], text="")
        assert "bvl-error" in panel.message.value and "\n" not in panel.message.value
    finally:
        panel.close()


def test_a_search_starts_from_the_longest_word():
    assert longest_word(["[CLS]", "she", "sat", "on", "the", "bank", "of", "the", "river", ".", "[SEP]"]) == 8
    assert longest_word(["[CLS]", ",", "[SEP]"]) == 1


def test_the_atlas_and_the_qk_map_as_plotly_hold_the_drawings_values(panel, corpus):
    pytest.importorskip("plotly")
    from bertviz_lab.widgets.figures.attention_data import _BLUES
    from bertviz_lab.widgets.figures.qk_map import KIND_COLORS

    atlas = panel.to_plotly()
    (cells,) = atlas.data
    np.testing.assert_array_equal(np.asarray(cells.z), panel.atlas.grid().astype(np.float64))
    assert list(cells.y) == panel.atlas.layers and list(cells.x) == panel.atlas.heads
    assert [stop[1] for stop in cells.colorscale] == list(_BLUES) and cells.zmin == 0
    assert atlas.layout.title.text == panel.atlas.title and panel.atlas.unit in cells.hovertemplate
    panel.view.value = "qk map"
    figure = panel.to_plotly()
    queries, keys = figure.data
    is_key = np.frombuffer(bytes(panel.qk_map.is_key), dtype=np.uint8).astype(bool)
    xs = np.frombuffer(bytes(panel.qk_map.xs), dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(keys.x), xs[is_key].astype(np.float64))
    np.testing.assert_array_equal(np.asarray(queries.x), xs[~is_key].astype(np.float64))
    assert len(queries.x) + len(keys.x) == panel.qk_map.count()
    assert set(keys.marker.color) == {KIND_COLORS["key"]} and keys.marker.symbol == "square"
    panel.view.value = "nearest"
    with pytest.raises(ValueError, match="the nearest contexts are a list"):
        panel.to_plotly()
