"""The query–key map (AttentionViz) as one SVG drawing: one head's queries and keys of many corpus tokens in one 2-D
projection, each point a query (a round dot) or a key (a square), coloured by kind or by the token's position.

Thousands of points stay small and vector: each colour and shape is one <path> whose points are zero-length lines
drawn with a round or square line cap ("M x y h0", about 14 bytes a point), so a map of 4,000 points is some 60 kB and
reads in both themes (every point colour keeps 3:1 on the light and the dark ground). Shape tells queries from keys
without colour.

What the live view's hover needs is written into the drawing as data- attributes: the plot's frame (class bvl-plot)
has x, y, width, height (its pixel box) and data-x0, data-x1, data-y0, data-y1 (the data ranges it spans), and
data-points (how many points); each point path has data-kind and data-count.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from bertviz_lab.widgets.figures.charts import nice_ticks
from bertviz_lab.widgets.figures.heatmap import NOTE_FONT, TITLE_FONT, figure_header
from bertviz_lab.widgets.figures.palette import CURVE_COLORS, HEAD_COLORS
from bertviz_lab.widgets.figures.tables import require_columns
from bertviz_lab.widgets.figures.text import escape, text_width

KIND_COLORS = {"query": CURVE_COLORS["mlm"], "key": CURVE_COLORS["nsp"]}  # blue and orange: apart without red-green
POSITION_COLORS = (HEAD_COLORS[15], HEAD_COLORS[10], HEAD_COLORS[14], HEAD_COLORS[13], HEAD_COLORS[1])  # blue → orange
COLOR_BY = ("kind", "position")
KINDS = ("query", "key")
KIND_NAMES = {"query": "queries (dots)", "key": "keys (squares)"}
CAPS = {"query": "round", "key": "square"}
POINT_SIZE = {"query": 5.5, "key": 4.5}  # px: a square of side 4.5 covers about as much as a dot of 5.5
PLOT_W, PLOT_H = 460, 400
PAD_LEFT, PAD_TOP, PAD_BOTTOM = 60, 60, 46
LEGEND_W = 150
COLUMNS = ("kind", "text_id", "position", "token", "x", "y")


def check_points(points: Any) -> None:
    """A one-line error when `points` is not a qk_map() table."""
    require_columns(points, COLUMNS, "query-key", f"qk_map() gives {', '.join(COLUMNS)}")


def position_bins(positions: np.ndarray, bins: int = len(POSITION_COLORS)) -> tuple[np.ndarray, list[str]]:
    """Each position's bin (0..bins-1, equal widths over 0..the largest position) and each bin's label."""
    largest = int(positions.max()) if len(positions) else 0
    width = max(1, math.ceil((largest + 1) / bins))
    index = np.minimum(positions // width, bins - 1).astype(int)
    labels = []
    for b in range(bins):
        low, high = b * width, (b + 1) * width - 1 if b < bins - 1 else max(largest, b * width)
        labels.append(f"positions {low}–{high}" if high > low else f"position {low}")
    return index, labels


def data_range(values: np.ndarray) -> tuple[float, float]:
    """The span of `values` with 4% room on each side (a unit span around a single value)."""
    if not len(values):
        return -1.0, 1.0
    low, high = float(values.min()), float(values.max())
    if high <= low:
        return low - 1.0, high + 1.0
    room = (high - low) * 0.04
    return low - room, high + room


def _num(value: float) -> str:
    return f"{value:.10g}"


def qk_map_svg(points: Any, layer: int, head: int, color_by: str = "kind", axis: str = "PC", title: str = "",
               note: str = "", selected: int | None = None) -> str:
    """The points of one qk_map() table as a standalone SVG document; `axis` names the projection's axes ("PC" gives
    "PC 1" and "PC 2"); `selected` (a row of the table) is ringed."""
    check_points(points)
    if color_by not in COLOR_BY:
        raise ValueError(f"color_by must be one of {', '.join(COLOR_BY)}; got {color_by!r}.")
    kinds = np.asarray(points["kind"].tolist(), dtype=object)
    unknown = sorted(set(kinds.tolist()) - set(KINDS))
    if unknown:
        raise ValueError(f"a point's kind must be query or key; got {unknown[0]!r}.")
    xs = np.asarray(points["x"].tolist(), dtype=np.float64)
    ys = np.asarray(points["y"].tolist(), dtype=np.float64)
    positions = np.asarray(points["position"].tolist(), dtype=np.int64)
    count = len(xs)
    queries = int((kinds == "query").sum())
    title = title or f"query–key map · layer {layer} · head {head}"
    note = note or f"{queries} queries and {count - queries} keys, translated to a shared mean, in one projection"
    x0, x1 = data_range(xs)
    y0, y1 = data_range(ys)
    left, top = PAD_LEFT, PAD_TOP
    px = left + (xs - x0) / (x1 - x0) * PLOT_W
    py = top + PLOT_H - (ys - y0) / (y1 - y0) * PLOT_H
    total_w = max(left + PLOT_W + 24 + LEGEND_W, math.ceil(text_width(title, TITLE_FONT)) + 24,
                  math.ceil(text_width(note, NOTE_FONT)) + 20)
    total_h = top + PLOT_H + PAD_BOTTOM
    parts = figure_header("bvl-qk-map", {"total_w": total_w, "total_h": total_h}, title, note)
    for value in nice_ticks(x0, x1, 5):
        sx = left + (value - x0) / (x1 - x0) * PLOT_W
        parts.append(f'<line class="bvl-grid" x1="{sx:.1f}" x2="{sx:.1f}" y1="{top}" y2="{top + PLOT_H}"/>'
                     f'<text class="bvl-tick bvl-muted" x="{sx:.1f}" y="{top + PLOT_H + 14}" '
                     f'text-anchor="middle">{value:.3g}</text>')
    for value in nice_ticks(y0, y1, 5):
        sy = top + PLOT_H - (value - y0) / (y1 - y0) * PLOT_H
        parts.append(f'<line class="bvl-grid" x1="{left}" x2="{left + PLOT_W}" y1="{sy:.1f}" y2="{sy:.1f}"/>'
                     f'<text class="bvl-tick bvl-muted" x="{left - 4}" y="{sy + 4:.1f}" text-anchor="end">'
                     f"{value:.3g}</text>")
    parts.append(f'<text class="bvl-axis-title" x="{left + PLOT_W / 2}" y="{top + PLOT_H + 34}" font-size="12" '
                 f'text-anchor="middle">{escape(axis)} 1</text>'
                 f'<text class="bvl-axis-title" font-size="12" text-anchor="middle" '
                 f'transform="translate(16,{top + PLOT_H / 2}) rotate(-90)">{escape(axis)} 2</text>')
    parts.append(f'<rect class="bvl-rule bvl-plot" x="{left}" y="{top}" width="{PLOT_W}" height="{PLOT_H}" '
                 f'data-x0="{_num(x0)}" data-x1="{_num(x1)}" data-y0="{_num(y0)}" data-y1="{_num(y1)}" '
                 f'data-points="{count}"/>')
    if color_by == "kind":
        groups = [(kind, KIND_COLORS[kind], kinds == kind) for kind in ("key", "query")]
        legend = [(kind, KIND_COLORS[kind], KIND_NAMES[kind]) for kind in KINDS]
    else:
        index, labels = position_bins(positions)
        groups = [(kind, color, (kinds == kind) & (index == b)) for kind in ("key", "query")
                  for b, color in enumerate(POSITION_COLORS)]
        legend = [(kind, "", KIND_NAMES[kind]) for kind in KINDS]
        legend += [("bin", color, label) for color, label in zip(POSITION_COLORS, labels)]
    parts.append(f'<g class="bvl-points" opacity="0.8" data-points="{count}">')
    for kind, color, chosen in groups:
        at = np.flatnonzero(chosen)
        if not len(at):
            continue
        coords = np.column_stack([px[at], py[at]]).ravel().tolist()
        path = ("M%.1f %.1fh0" * len(at)) % tuple(coords)
        parts.append(f'<path class="bvl-point-set" data-kind="{kind}" data-count="{len(at)}" fill="none" '
                     f'stroke="{color}" stroke-width="{POINT_SIZE[kind]}" stroke-linecap="{CAPS[kind]}" d="{path}"/>')
    parts.append("</g>")
    if selected is not None and 0 <= int(selected) < count:
        sx, sy = float(px[int(selected)]), float(py[int(selected)])
        parts.append(f'<g class="bvl-selected-point" data-index="{int(selected)}">'
                     f'<circle class="bvl-heatmap-mark-halo" cx="{sx:.1f}" cy="{sy:.1f}" r="7"/>'
                     f'<circle class="bvl-heatmap-mark-line" cx="{sx:.1f}" cy="{sy:.1f}" r="7"/></g>')
    parts.append(_legend(legend, left + PLOT_W + 24, top + 8))
    parts.append("</svg>")
    return "".join(parts)


def _legend(entries: Sequence[tuple[str, str, str]], x: float, y: float) -> str:
    """One row per (kind or 'bin', colour, label): a dot or a square (in the text's colour where `colour` is ""), or a
    colour swatch, and the label."""
    parts = ['<g class="bvl-legend">']
    for index, (kind, color, label) in enumerate(entries):
        ty = y + index * 18
        if kind in CAPS:
            paint = f'stroke="{color}"' if color else 'class="bvl-legend-shape"'  # no colour: the text's
            parts.append(f'<path {paint} stroke-width="{POINT_SIZE[kind] + 2}" stroke-linecap="{CAPS[kind]}" '
                         f'd="M{x + 6} {ty - 4}h0"/>')
        else:
            parts.append(f'<rect x="{x}" y="{ty - 10}" width="12" height="12" fill="{color}"/>')
        parts.append(f'<text class="bvl-legend-label" x="{x + 18}" y="{ty}">{escape(label)}</text>')
    parts.append("</g>")
    return "".join(parts)
