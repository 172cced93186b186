"""The corpus figures (head atlas, nearest contexts, query-key map) as drawings: what they show is what their tables
hold (cell values and colours, colour bar ticks, rows, histogram counts, point counts and places), every token and
text is escaped, and each is one well-formed SVG document."""

from __future__ import annotations

import collections
import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest
from widgets_testlib import XSS

from bertviz_lab.kernels.head_statistics import STATISTIC_NAMES
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.atlas import atlas_svg, bar_title, scale_top
from bertviz_lab.widgets.figures.nearest import HISTOGRAM_TOKENS, MATCH_COLOR, nearest_svg
from bertviz_lab.widgets.figures.qk_map import KIND_COLORS, PLOT_H, PLOT_W, position_bins, qk_map_svg
from bertviz_lab.widgets.figures.text import short_token

NS = "{http://www.w3.org/2000/svg}"


def parsed(svg: str) -> ET.Element:
    """The drawing as XML: it parses (the live view parses it as XML too) and runs nothing."""
    root = ET.fromstring(svg)
    assert not list(root.iter(f"{NS}script"))
    return root


def head_stats(layers: int = 3, heads: int = 4, seed: int = 0) -> pd.DataFrame:
    """A head_stats()-shaped table of random statistics (entropy in nats, shares in 0..1)."""
    rng = np.random.default_rng(seed)
    shares = [name for name in STATISTIC_NAMES if name != "entropy"]
    rows = [{"layer": layer, "head": head, "entropy": rng.uniform(0, 3), **{s: rng.uniform(0, 1) for s in shares},
             "queries": int(rng.integers(1, 10_000))} for layer in range(layers) for head in range(heads)]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("stat", ["entropy", "cls", "prev"])
def test_atlas_cells_hold_the_tables_values_in_their_colours(stat):
    stats = head_stats()
    root = parsed(atlas_svg(stats, stat))
    cells = [el for el in root.iter(f"{NS}rect") if el.get("class") == "bvl-atlas-cell"]
    assert len(cells) == len(stats)
    top = scale_top(stats[stat].to_numpy())
    assert stats[stat].max() <= top < 2.5 * stats[stat].max()
    for cell in cells:
        row = stats[(stats["layer"] == int(cell.get("data-layer"))) & (stats["head"] == int(cell.get("data-head")))]
        value = float(row[stat].iloc[0])
        assert float(cell.get("data-value")) == pytest.approx(value, rel=1e-5)
        red, green, blue = D.PALETTE[round(value / top * D.TOP_CODE)]
        assert cell.get("fill") == f"#{red:02x}{green:02x}{blue:02x}"
        tip = cell.find(f"{NS}title").text
        assert f"{value:.4f}" in tip and f"{int(row.queries.iloc[0]):,} queries" in tip


def test_atlas_colour_bar_is_titled_with_the_unit_and_ticks_span_the_scale():
    stats = head_stats()
    for stat, unit in (("entropy", "(nats)"), ("sep", "(share of attention)")):
        root = parsed(atlas_svg(stats, stat))
        titles = [el.text for el in root.iter(f"{NS}text") if el.get("class") == "bvl-colorbar-title"]
        assert titles == [bar_title(stat)] and titles[0].endswith(unit)
        ticks = [float(el.text) for el in root.iter(f"{NS}text") if el.get("class") == "bvl-colorbar-tick bvl-mono"]
        assert ticks[0] == 0 and ticks[-1] == pytest.approx(scale_top(stats[stat].to_numpy()))
        assert np.all(np.diff(ticks) > 0)


def test_atlas_lists_the_chosen_heads_texts_escaped_and_marks_the_head():
    stats = head_stats()
    top = pd.DataFrame({"text_id": [7, 3], "text": [f"a {XSS} text", "plain & simple"], "value": [0.9, 0.5],
                        "queries": [4, 5]})
    svg = atlas_svg(stats, "cls", selected=(1, 2), top_texts=top)
    root = parsed(svg)
    assert XSS not in svg and "<img" not in svg
    rows = [el for el in root.iter(f"{NS}g") if el.get("class") == "bvl-top-text"]
    assert [int(r.get("data-text-id")) for r in rows] == [7, 3]
    assert [float(r.get("data-value")) for r in rows] == [0.9, 0.5]
    assert XSS in "".join(rows[0].itertext())  # shown as text, once parsed
    mark = [el for el in root.iter(f"{NS}g") if el.get("class") == "bvl-selected-cell"]
    assert [(m.get("data-layer"), m.get("data-head")) for m in mark] == [("1", "2")]
    assert "layer 1 · head 2 has the most weight on [CLS]" in "".join(root.itertext())


def test_atlas_rejects_an_unknown_statistic_and_a_table_without_its_column():
    with pytest.raises(ValueError, match="stat must be one of entropy, cls"):
        atlas_svg(head_stats(), "attention")
    with pytest.raises(ValueError, match=r"^the head statistics table has no column 'punct'; it needs layer, head, "
                                         r"punct and queries\.$"):
        atlas_svg(head_stats().drop(columns="punct"), "punct")


def matches() -> pd.DataFrame:
    return pd.DataFrame({"text_id": [4, 9, 2, 4], "position": [3, 1, 6, 8], "token": ["bank", XSS, "bank", "shore"],
                         "left": ["the money in the", "", "x " * 40, "down by the"],
                         "right": ["was safe .", "ran", "<b>", ""], "score": [0.97, 0.9, 0.8, 0.75]})


def test_nearest_rows_show_each_match_with_its_token_highlighted_and_escaped():
    table = matches()
    svg = nearest_svg(table, "“bank”", 4)
    root = parsed(svg)
    assert XSS not in svg and "<b>" not in svg
    rows = [el for el in root.iter(f"{NS}g") if el.get("class") == "bvl-match"]
    assert [(int(r.get("data-text-id")), int(r.get("data-position"))) for r in rows] == list(
        zip(table.text_id, table.position))
    assert [float(r.get("data-score")) for r in rows] == pytest.approx(table.score.tolist())
    for row, token in zip(rows, table.token):
        box = [el for el in row.iter(f"{NS}rect") if el.get("class") == "bvl-match-box"]
        assert [b.get("fill") for b in box] == [MATCH_COLOR]
        assert [el.text for el in row.iter(f"{NS}text") if "bvl-match-token" in el.get("class")] == [
            short_token(token)]  # a long token cut; the row's tooltip keeps it whole
        assert token in row.find(f"{NS}title").text
    drawn = [el.text for el in rows[2].iter(f"{NS}text")]
    assert [t for t in drawn if t.startswith("…x")] and all(t.count("x") < 40 for t in drawn)  # a long context is
    # cut at its far end; its whole text stays in the row's tooltip
    assert rows[2].find(f"{NS}title").text.count("x") == 40


def test_nearest_histogram_counts_the_matched_tokens():
    table = pd.concat([matches()] * 3 + [matches().assign(token=[f"t{i}" for i in range(4)])] * 4,
                      ignore_index=True)
    root = parsed(nearest_svg(table, "“bank”", 2))
    bars = [el for el in root.iter(f"{NS}g") if el.get("class") == "bvl-token-count"]
    counts = collections.Counter(table.token)
    assert len(bars) == min(len(counts), HISTOGRAM_TOKENS)
    assert {b.get("data-token"): int(b.get("data-count")) for b in bars} == dict(counts)
    assert [int(b.get("data-count")) for b in bars] == sorted(counts.values(), reverse=True)


def points(n: int = 50, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"kind": ["query"] * n + ["key"] * n, "text_id": rng.integers(0, 9, 2 * n),
                         "position": rng.integers(0, 20, 2 * n), "token": [XSS] * (2 * n),
                         "x": rng.normal(size=2 * n), "y": rng.normal(size=2 * n)})


def point_set(root: ET.Element) -> list[ET.Element]:
    return [el for el in root.iter(f"{NS}path") if el.get("class") == "bvl-point-set"]


@pytest.mark.parametrize("color_by", ["kind", "position"])
def test_qk_map_draws_every_query_and_key_once(color_by):
    table = points(60)
    root = parsed(qk_map_svg(table, 1, 2, color_by))
    sets = point_set(root)
    for kind in ("query", "key"):
        drawn = [s for s in sets if s.get("data-kind") == kind]
        assert sum(int(s.get("data-count")) for s in drawn) == 60
        assert sum(s.get("d").count("h0") for s in drawn) == 60
        assert {s.get("stroke-linecap") for s in drawn} == {"round" if kind == "query" else "square"}
    if color_by == "kind":
        assert {s.get("stroke") for s in sets} == set(KIND_COLORS.values())
    assert "".join(root.itertext()).count("PC 1") == 1 and "PC 2" in "".join(root.itertext())


def test_qk_map_places_points_by_the_frames_data_ranges():
    table = points(40, seed=1)
    root = parsed(qk_map_svg(table, 0, 0))
    frame = next(el for el in root.iter(f"{NS}rect") if el.get("class") == "bvl-rule bvl-plot")
    x0, x1, y0, y1 = (float(frame.get(f"data-{k}")) for k in ("x0", "x1", "y0", "y1"))
    left, top = float(frame.get("x")), float(frame.get("y"))
    assert (float(frame.get("width")), float(frame.get("height"))) == (PLOT_W, PLOT_H)
    drawn = set()
    for path in point_set(root):
        for x, y in re.findall(r"M([\d.]+) ([\d.]+)h0", path.get("d")):
            drawn.add((float(x), float(y)))
    for x, y in zip(table.x, table.y):
        px, py = left + (x - x0) / (x1 - x0) * PLOT_W, top + PLOT_H - (y - y0) / (y1 - y0) * PLOT_H
        assert min(abs(px - a) + abs(py - b) for a, b in drawn) <= 0.11
        assert left <= px <= left + PLOT_W and top <= py <= top + PLOT_H


def test_qk_map_position_bins_cover_every_position():
    index, labels = position_bins(np.array([0, 3, 4, 9, 27]))
    assert index.tolist() == [0, 0, 0, 1, 4] and labels[0] == "positions 0–5" and labels[-1] == "positions 24–27"


def test_qk_map_rejects_an_unknown_kind_and_colouring():
    with pytest.raises(ValueError, match="kind must be query or key; got 'value'"):
        qk_map_svg(points(3).assign(kind="value"), 0, 0)
    with pytest.raises(ValueError, match="color_by must be one of kind, position"):
        qk_map_svg(points(3), 0, 0, "token")


def test_nearest_and_qk_map_name_the_first_missing_column_and_what_gives_the_table():
    with pytest.raises(ValueError, match=r"^the matches table has no column 'token'; nearest\(\) gives text_id, "
                                         r"position, token, left, right, score\.$"):
        nearest_svg(matches().drop(columns=["token", "score"]), "bank", 3)
    with pytest.raises(ValueError, match=r"^the query-key table has no column 'x'; qk_map\(\) gives kind, text_id, "
                                         r"position, token, x, y\.$"):
        qk_map_svg(points(3).drop(columns=["y", "x"]), 0, 0)
    with pytest.raises(ValueError, match="the matches table has no column 'text_id'"):
        nearest_svg([(1, 2)], "bank", 3)  # not a table at all


def test_the_views_send_what_their_figures_draw_and_open_only_what_they_hold():
    from bertviz_lab.widgets.views.atlas import AtlasView
    from bertviz_lab.widgets.views.nearest import NearestView
    from bertviz_lab.widgets.views.qk_map import QKMapView

    stats, opened = head_stats(), []
    atlas = AtlasView()
    atlas.on_open(lambda **what: opened.append(what))
    atlas.show(stats, "self")
    assert atlas.svg == atlas_svg(stats, "self", note="")
    np.testing.assert_allclose(atlas.grid(), stats["self"].to_numpy().reshape(3, 4), rtol=1e-6)
    with pytest.raises(Exception, match=r"selected must be \[\] or \[layer, head\]"):
        atlas.selected = [1, 2, 3]
    atlas.selected = [1, 2]
    atlas.show_top(pd.DataFrame({"text_id": [5], "text": ["x"], "value": [0.5], "queries": [3]}))
    for message in ({"type": "open", "index": 0}, {"type": "open", "index": 3}, {"type": "open", "index": "0"},
                    {"type": "other", "index": 0}, ["open", 0]):
        atlas._front_end_message(atlas, message, [])
    assert opened == [{"text_id": 5, "layer": 1, "head": 2}]
    near = NearestView()
    near.show(matches(), "“bank”", 3)
    assert near.svg == nearest_svg(matches(), "“bank”", 3) and near.selected == -1
    assert near.opened(3) == {"text_id": 4, "position": 8, "index": 3} and near.opened(4) is None
    qk = QKMapView()
    table = points(5)
    qk.show(table, 0, 1)
    assert qk.count() == 10 and qk.svg == qk_map_svg(table, 0, 1)
    assert qk.opened(9) == {"text_id": int(table["text_id"][9]), "position": int(table["position"][9]), "index": 9}
    with pytest.raises(ValueError, match="3 contexts for 10 points"):
        qk.show(table, 0, 1, contexts=["a", "b", "c"])
