"""The head atlas as one SVG drawing: a layer × head grid of one corpus statistic (every head's token-weighted mean
over the corpus), each cell labelled with its value, a titled colour bar in the statistic's unit, and, for a chosen
head, the texts where it does most (or least) of it.

The figure follows the attention heatmap's rules (figures/heatmap.py): the drawing is the whole figure, the live view
shows this very document and the static copy and exports hold it; text takes the theme's colours from figure.css and
only the cells carry colours of their own (ColorBrewer Blues, the one sequential palette of every view), with the ink
that reads on each.

What the live view's hover and keys need is written into the drawing as data- attributes: the grid (class
bvl-atlas-cells) has data-rows (layers), data-cols (heads), data-x, data-y (its top-left corner) and data-cell (a
cell's side), in the SVG's pixels; each cell (<rect class="bvl-atlas-cell">) has data-layer, data-head and
data-value; each listed text (<g class="bvl-top-text">) has data-index, data-text-id and data-value.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from bertviz_lab.kernels.head_statistics import statistic
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.caption import shortened
from bertviz_lab.widgets.figures.contrast import ink_class, ink_on
from bertviz_lab.widgets.figures.heatmap import BAR_W, LABEL_FONT, NOTE_FONT, TITLE_FONT, colorbar, figure_header
from bertviz_lab.widgets.figures.tables import require_columns
from bertviz_lab.widgets.figures.text import escape, text_width

MAX_GRID, MIN_CELL, MAX_CELL = 600, 14, 40  # the grid is at most MAX_GRID px a side
LABELLED_CELL = 30  # px: from this cell size up a cell carries its value as text
TOP_TEXT_CHARS = 70  # a listed text is cut to about this many characters (hover and the tooltip keep it whole)
ROW_H = 20  # px per listed text


def check_stat(stat: Any) -> str:
    """`stat` when it names one of kernels.head_statistics.STATISTICS; else a one-line error naming them."""
    return statistic(stat).name


def bar_title(stat: str) -> str:
    """The colour bar's title: what the statistic measures and its unit, e.g. "weight on [CLS] (share of attention)"."""
    shown = statistic(stat)
    return f"{shown.label} ({shown.unit})"


def value_text(value: float) -> str:
    """A value as hover and the tooltips show it: four decimals."""
    return "nan" if not math.isfinite(value) else f"{value:.4f}"


def scale_top(values: np.ndarray) -> float:
    """The top of the colour scale: the largest value rounded up to 1, 2, 2.5 or 5 times a power of ten (1 for none)."""
    finite = values[np.isfinite(values)]
    largest = float(finite.max()) if finite.size else 0.0
    if largest <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(largest))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= largest * (1 - 1e-12))


def colour_codes(values: np.ndarray, top: float) -> np.ndarray:
    """Codes 0..254 of the Blues palette for values on the scale 0..top (NaN as 0)."""
    clean = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0)
    return np.rint(np.clip(clean / top, 0.0, 1.0) * D.TOP_CODE).astype(np.uint8)


def _hex(code: int) -> str:
    red, green, blue = D.PALETTE[code]
    return f"#{red:02x}{green:02x}{blue:02x}"


def stat_grid(stats: Any, stat: str) -> tuple[list[int], list[int], np.ndarray, np.ndarray]:
    """(layers, heads, values (L, H), queries (L, H)) of one statistic from a head_stats() table; NaN where a head
    was not analysed."""
    check_stat(stat)
    require_columns(stats, ("layer", "head", stat, "queries"), "head statistics",
                    f"it needs layer, head, {stat} and queries")
    layers = sorted(int(v) for v in set(stats["layer"].tolist()))
    heads = sorted(int(v) for v in set(stats["head"].tolist()))
    values = np.full((len(layers), len(heads)), np.nan)
    queries = np.zeros((len(layers), len(heads)), dtype=np.int64)
    row, col = {v: i for i, v in enumerate(layers)}, {v: i for i, v in enumerate(heads)}
    for layer, head, value, count in zip(stats["layer"].tolist(), stats["head"].tolist(), stats[stat].tolist(),
                                         stats["queries"].tolist()):
        values[row[int(layer)], col[int(head)]] = float(value)
        queries[row[int(layer)], col[int(head)]] = int(count)
    return layers, heads, values, queries


def cell_side(layers: int, heads: int) -> int:
    """Whole pixels per cell: the grid fits MAX_GRID a side, MIN_CELL to MAX_CELL per cell."""
    return max(MIN_CELL, min(MAX_CELL, MAX_GRID // max(layers, heads, 1)))


def _bar_ticks(top: float) -> list[tuple[float, str]]:
    step = top / 4 if top > 0 else 1.0
    return [(i / 4, f"{round(i * step, 12):g}") for i in range(5)]


def atlas_svg(stats: Any, stat: str, title: str = "", note: str = "", selected: Sequence[int] | None = None,
              top_texts: Any = None, largest: bool = True) -> str:
    """The atlas of one statistic from a head_stats() table as a standalone SVG document.

    selected (layer, head) outlines that head; top_texts (a top_texts() table: text_id, text, value, queries) lists
    its texts under the grid, where the most (largest) or least of the statistic happens.
    """
    layers, heads, values, queries = stat_grid(stats, stat)
    top = scale_top(values)
    codes = colour_codes(values, top)
    cell = cell_side(len(layers), len(heads))
    shown = statistic(stat)
    title = title or f"head atlas · {shown.label}"
    bar_ticks = _bar_ticks(top)
    tick_w = math.ceil(max(text_width(label, LABEL_FONT, monospace=True) for _, label in bar_ticks))
    label_w = math.ceil(text_width(str(max(layers, default=0)), LABEL_FONT, monospace=True)) + 8
    top_y = 34 + (NOTE_FONT + 8 if note else 0) + 18  # room for the head numbers above the grid
    left = 24 + label_w
    width, height = len(heads) * cell, len(layers) * cell
    bar_h = max(height, 160)
    bar_x = left + width + 24
    rows = [] if top_texts is None or selected is None else list(zip(
        top_texts["text_id"].tolist(), top_texts["text"].tolist(), top_texts["value"].tolist()))
    list_y = top_y + max(height, bar_h) + 28
    list_h = (ROW_H * (len(rows) + 1) + 12) if selected is not None else 0
    total_w = max(bar_x + BAR_W + 6 + tick_w + 34, math.ceil(text_width(title, TITLE_FONT)) + 24,
                  math.ceil(text_width(note, NOTE_FONT)) + 20, 620 if rows else 0)
    total_h = list_y + list_h + 6
    parts = figure_header("bvl-atlas", {"total_w": total_w, "total_h": total_h}, title, note)
    parts.insert(1, f'<desc>{escape(bar_title(stat))}</desc>')
    parts.append(f'<text class="bvl-axis-title" x="{left + width / 2:g}" y="{top_y - 20}" font-size="12" '
                 'text-anchor="middle">head</text>')
    parts.append(f'<text class="bvl-axis-title" font-size="12" text-anchor="middle" '
                 f'transform="translate(12,{top_y + height / 2:g}) rotate(-90)">layer</text>')
    for c, head in enumerate(heads):
        parts.append(f'<text class="bvl-tick bvl-mono" x="{left + (c + 0.5) * cell:g}" y="{top_y - 5}" '
                     f'text-anchor="middle">{head}</text>')
    for r, layer in enumerate(layers):
        parts.append(f'<text class="bvl-tick bvl-mono" x="{left - 5}" y="{top_y + (r + 0.5) * cell + 4:g}" '
                     f'text-anchor="end">{layer}</text>')
    parts.append(f'<g class="bvl-atlas-cells" data-rows="{len(layers)}" data-cols="{len(heads)}" data-x="{left}" '
                 f'data-y="{top_y}" data-cell="{cell}" data-layers="{" ".join(map(str, layers))}" '
                 f'data-heads="{" ".join(map(str, heads))}" shape-rendering="crispEdges">')
    labelled = cell >= LABELLED_CELL
    for r, layer in enumerate(layers):
        for c, head in enumerate(heads):
            value, fill = float(values[r, c]), _hex(int(codes[r, c]))
            x, y = left + c * cell, top_y + r * cell
            tip = (f"layer {layer} · head {head}\n{shown.label}: {value_text(value)} {shown.unit}"
                   f"\nmean over {int(queries[r, c]):,} queries")
            parts.append(f'<rect class="bvl-atlas-cell" x="{x}" y="{y}" width="{cell}" height="{cell}" '
                         f'fill="{fill}" data-layer="{layer}" data-head="{head}" data-value="{value:.6g}">'
                         f'<title>{escape(tip)}</title></rect>')
    parts.append("</g>")
    if labelled:
        parts.append('<g class="bvl-atlas-labels" pointer-events="none">')
        for r in range(len(layers)):
            for c in range(len(heads)):
                value = float(values[r, c])
                ink = ink_class(ink_on(_hex(int(codes[r, c]))))
                label = "–" if not math.isfinite(value) else f"{value:.2f}"[:4 if value < 10 else 5]
                parts.append(f'<text class="{ink} bvl-mono" x="{left + (c + 0.5) * cell:g}" '
                             f'y="{top_y + (r + 0.5) * cell + 3.5:g}" font-size="10" text-anchor="middle">'
                             f"{escape(label)}</text>")
        parts.append("</g>")
    parts.append(f'<rect class="bvl-rule bvl-frame" x="{left}" y="{top_y}" width="{width}" height="{height}" '
                 'stroke-width="0.5"/>')
    if selected is not None and int(selected[0]) in layers and int(selected[1]) in heads:
        r, c = layers.index(int(selected[0])), heads.index(int(selected[1]))
        at = f'x="{left + c * cell}" y="{top_y + r * cell}" width="{cell}" height="{cell}"'
        parts.append(f'<g class="bvl-selected-cell" data-layer="{int(selected[0])}" data-head="{int(selected[1])}">'
                     f'<rect class="bvl-heatmap-mark-halo" {at}/><rect class="bvl-heatmap-mark-line" {at}/></g>')
    parts.append(colorbar(bar_x, top_y, bar_h, D.PALETTE, bar_ticks, bar_title(stat)))
    if selected is not None:
        parts.append(top_texts_list(rows, int(selected[0]), int(selected[1]), stat, largest, list_y, total_w))
    parts.append("</svg>")
    return "".join(parts)


def top_texts_list(rows: Sequence[tuple[int, str, float]], layer: int, head: int, stat: str, largest: bool,
                   y: float, width: float) -> str:
    """The chosen head's texts as rows (value, text id, the text cut to fit), under a heading that says which."""
    which = "most" if largest else "least"
    heading = f"texts where layer {layer} · head {head} has the {which} {statistic(stat).label}"
    parts = [f'<g class="bvl-top-texts" data-layer="{layer}" data-head="{head}">',
             f'<text class="bvl-top-texts-title" x="8" y="{y:g}" font-size="12" font-weight="bold">'
             f"{escape(heading)}</text>"]
    if not rows:
        parts.append(f'<text class="bvl-muted" x="8" y="{y + ROW_H:g}">no text</text>')
    for index, (text_id, text, value) in enumerate(rows):
        ty = y + (index + 1) * ROW_H
        parts.append(f'<g class="bvl-top-text" data-index="{index}" data-text-id="{int(text_id)}" '
                     f'data-value="{float(value):.6g}">'
                     f'<rect class="bvl-row-hit" x="4" y="{ty - 14:g}" width="{width - 8:g}" height="{ROW_H - 2}"/>'
                     f'<text class="bvl-mono" x="8" y="{ty:g}">{escape(value_text(float(value)))}</text>'
                     f'<text class="bvl-mono bvl-muted" x="70" y="{ty:g}">#{int(text_id)}</text>'
                     f'<text x="130" y="{ty:g}">{escape(shortened(text, TOP_TEXT_CHARS))}'
                     f"<title>{escape(text)}</title></text></g>")
    parts.append("</g>")
    return "".join(parts)
