"""The bertviz-style head view as one SVG drawing: title, note, one chip per head of the layer (the legend, and what
the live view clicks to show or hide a head), query tokens left, key tokens right, and a line per (query, key) of
each shown head whose opacity is the weight.

A long text is drawn as a window of WINDOW_ROWS rows around the selected query (the same rows of keys beside them),
not as one tall image: a line to a key outside the window ends at the edge of the key column, where a label counts
the lines that leave it and says which keys they go to; labels above and below the query column count the rows left
out.

What the live view reads from the drawing (no kernel round trip for hover):
- root: data-heads (the heads shown, "1,3"), data-lines (how many lines are drawn), data-query (the selected query's
  row, -1 for none), data-first (the window's first row), data-rows (rows in the window), data-queries (all rows);
- each chip `g.bvl-head-chip`: data-head, data-on ("true"/"false");
- each token `text.bvl-token`: data-side ("query"/"key"), data-index (its row in that column);
- lines: `g.bvl-head-lines[data-head]` > `g[data-q]` (the query row) > `line[data-key]` (the key row).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from bertviz_lab.widgets.figures.contrast import ink_class, ink_on
from bertviz_lab.widgets.figures.heatmap import NOTE_FONT, figure_header
from bertviz_lab.widgets.figures.palette import HEAD_COLORS
from bertviz_lab.widgets.figures.text import escape, short_token, text_width

ROW_H, COL_W, GAP = 18, 150, 180  # px: one token row; each token column; between the two columns (the lines)
CHIP_W, CHIP_H, CHIP_PITCH, CHIP_ROW = 58, 18, 64, 24
TOKEN_FONT = 12
MIN_OPACITY = 0.01  # lines fainter than this (after dividing by the strongest shown) are not drawn
WINDOW_ROWS = 32  # query rows drawn at once: 576 px of tokens whatever the text's length
EDGE = 10  # px beyond a column's first or last row where the lines to keys outside the window end


def window_first(query: int, first: int, count: int, rows: int = WINDOW_ROWS) -> int:
    """The first row of a window of `rows` among `count` that shows `query`, moved as little as it takes from `first`
    (a query of -1 moves nothing)."""
    if query >= first + rows:
        first = query - rows + 1
    elif 0 <= query < first:
        first = query
    return max(0, min(first, count - rows))


def head_color(head: int) -> str:
    """The colour of a head's chip and lines."""
    return HEAD_COLORS[head % len(HEAD_COLORS)]


def strongest(weights: np.ndarray, heads: Sequence[int]) -> float:
    """The largest weight among the shown heads' lines: a line's opacity is its weight ÷ this."""
    shown = sorted({h for h in heads if 0 <= h < weights.shape[0]})
    if not shown or weights.size == 0:
        return 0.0
    return float(weights[shown].max(initial=0.0))


def head_view_title(title: str, heads: Sequence[int]) -> str:
    """The title with the heads on: 'layer 1 · heads 1, 2'."""
    on = sorted(set(heads))
    names = ", ".join(str(h) for h in on) or "none (click a head)"
    return f"{title} · head{'s' if len(on) != 1 else ''} {names}"


def head_view_note(weights: np.ndarray, heads: Sequence[int], min_weight: float = 0.0) -> str:
    """How to read the lines: what their opacity is divided by, how many keys each query keeps."""
    top = strongest(weights, heads)
    if not top:
        return ""
    kept = f", weights from {min_weight:g}" if min_weight > 0 else ""
    return (f"line opacity: attention weight ÷ {top:.3f} (the strongest line shown); the {weights.shape[-1]} "
            f"strongest keys of each query{kept}")


def _chip(head: int, on: bool, x: float, y: float) -> str:
    color = head_color(head)
    if on:
        box = f'<rect x="{x}" y="{y}" width="{CHIP_W}" height="{CHIP_H}" rx="4" fill="{color}" stroke="{color}"/>'
        ink = f' class="{ink_class(ink_on(color))}" fill="{ink_on(color)}"'
    else:  # an outline in the head's colour on the theme's ground, the theme's text colour
        box = (f'<rect class="bvl-chip-off" x="{x}" y="{y}" width="{CHIP_W}" height="{CHIP_H}" rx="4" '
               f'stroke="{color}" stroke-width="2"/>')
        ink = ""
    return (f'<g class="bvl-head-chip" data-head="{head}" data-on="{str(on).lower()}">{box}'
            f'<text x="{x + CHIP_W / 2}" y="{y + 13}" text-anchor="middle" font-size="12"{ink}>head {head}</text>'
            "</g>")


def _token(token: str, side: str, index: int, y: float, selected: bool = False) -> str:
    label = short_token(token)
    whole = f"<title>{escape(token)}</title>" if label != token else ""  # a cut token keeps its text for hover
    mark = " bvl-selected" if selected else ""
    weight = ' font-weight="bold"' if selected else ""
    return (f'<text class="bvl-token bvl-{side}{mark}" data-side="{side}" data-index="{index}" y="{y:g}"{weight}>'
            f"{escape(label)}{whole}</text>")


def _left_out(count: int, what: str, x: float, y: float, anchor: str) -> str:
    """A muted label that counts the rows or lines a window leaves out, '' for none."""
    if not count:
        return ""
    return (f'<text class="bvl-off-window bvl-muted" x="{x:g}" y="{y:g}" text-anchor="{anchor}" '
            f'font-size="{TOKEN_FONT - 1}">{escape(what)}</text>')


def head_view_svg(query_tokens: Sequence[str], key_tokens: Sequence[str], indices: np.ndarray, weights: np.ndarray,
                  heads: Sequence[int], title: str, query: int = -1, first: int = 0,
                  rows: int = WINDOW_ROWS, query_positions: Sequence[int] | None = None,
                  min_weight: float = 0.0, title_heads: bool = True) -> str:
    """The head view as a standalone SVG document.

    indices (num_heads, queries, k): each query's k strongest keys as rows of key_tokens; weights (same shape): their
    attention weights; heads: the heads shown (chips of the others are drawn as outlines); title: what is shown
    (the heads on, and the window of a long text, are added to it); query: the selected query row (-1: none);
    first: the window's first row (window_first moves it to a query); rows: rows in the window; query_positions:
    the query rows' positions in the input, which the title of a window names (default: the rows); min_weight:
    lines of a smaller attention weight are left out (an offline page of every layer stays a few MB);
    title_heads: the title names the heads on (a page that switches heads itself leaves them out).
    """
    indices, weights = np.asarray(indices), np.asarray(weights, dtype=np.float64)
    num_heads = indices.shape[0] if indices.ndim == 3 else 0
    if indices.shape != weights.shape or (num_heads and indices.shape[1] != len(query_tokens)):
        raise ValueError(f"indices {indices.shape} and weights {weights.shape} must both be (heads, "
                         f"{len(query_tokens)} queries, k)")
    if rows < 1:
        raise ValueError(f"rows must be at least 1, got {rows}")
    shown = sorted({h for h in heads if 0 <= h < num_heads})
    n_queries, n_keys = len(query_tokens), len(key_tokens)
    first = max(0, min(first, n_queries - rows))
    q_end = min(n_queries, first + rows)
    k_first = max(0, min(first, n_keys - rows))
    k_end = min(n_keys, k_first + rows)
    windowed = n_queries > rows or n_keys > rows
    full_title = head_view_title(title, shown) if title_heads else title
    if windowed and q_end > first:
        named = list(range(n_queries)) if query_positions is None else list(query_positions)
        full_title += f" · queries {named[first]}–{named[q_end - 1]} of {n_queries}"
    note = head_view_note(weights, shown, min_weight)
    chips_y = 30 + NOTE_FONT + 8
    width = math.ceil(max(COL_W * 2 + GAP, text_width(full_title, 14) + 24, text_width(note, NOTE_FONT) + 24))
    per_row = max(1, (width - 8) // CHIP_PITCH)
    top = chips_y + math.ceil(max(num_heads, 1) / per_row) * CHIP_ROW + 8 + (ROW_H if windowed else 0)
    column_h = max(q_end - first, k_end - k_first, 1) * ROW_H
    height = top + column_h + 8 + (ROW_H if windowed else 0)
    top_weight = strongest(weights, shown)
    lines: list[str] = []
    drawn, above, below = 0, 0, 0
    for head in shown if top_weight else ():
        lines.append(f'<g class="bvl-head-lines" data-head="{head}" stroke="{head_color(head)}" stroke-width="2">')
        for q in range(first, q_end):
            row = []
            for key, weight, absolute in zip(indices[head, q].tolist(), (weights[head, q] / top_weight).tolist(),
                                             weights[head, q].tolist()):
                if weight >= MIN_OPACITY and absolute >= min_weight:
                    if key < k_first:
                        y2, above = -EDGE, above + 1
                    elif key >= k_end:
                        y2, below = column_h + EDGE, below + 1
                    else:
                        y2 = (key - k_first + 0.5) * ROW_H
                    opacity = f"{weight:.3f}".removeprefix("0")
                    row.append(f'<line y1="{(q - first + 0.5) * ROW_H:g}" x2="{GAP}" y2="{y2:g}" '
                               f'stroke-opacity="{opacity}" data-key="{key}"/>')
            if row:
                lines.append(f'<g data-q="{q}">{"".join(row)}</g>')
                drawn += len(row)
        lines.append("</g>")
    box = {"total_w": width, "total_h": height}
    parts = figure_header("bvl-head-view", box, full_title, note)
    parts[0] = parts[0].replace(">", f' data-heads="{",".join(map(str, shown))}" data-lines="{drawn}" '
                                     f'data-query="{query}" data-first="{first}" data-rows="{rows}" '
                                     f'data-queries="{n_queries}">', 1)
    parts.append('<g class="bvl-head-legend">')
    parts.extend(_chip(h, h in shown, 8 + CHIP_PITCH * (h % per_row), chips_y + CHIP_ROW * (h // per_row))
                 for h in range(num_heads))
    parts.append(f'</g><g class="bvl-lines" transform="translate({COL_W},{top})">{"".join(lines)}</g>')
    parts.append(f'<g class="bvl-tokens" font-size="{TOKEN_FONT}">')
    columns = (("query", query_tokens, first, q_end, COL_W - 6, "end"),
               ("key", key_tokens, k_first, k_end, COL_W + GAP + 6, "start"))
    for side, column, start, end, x, anchor in columns:
        parts.append(f'<g transform="translate({x},{top + 4})" text-anchor="{anchor}">')
        parts.extend(_token(column[i], side, i, (i - start + 0.5) * ROW_H, side == "query" and i == query)
                     for i in range(start, end))
        parts.append("</g>")
    if windowed:
        y_above, y_below = top - 6, top + column_h + ROW_H - 4
        q_x, k_x = COL_W - 6, COL_W + GAP + 6
        parts.append(_left_out(first, f"↑ {first} earlier queries", q_x, y_above, "end"))
        parts.append(_left_out(n_queries - q_end, f"↓ {n_queries - q_end} later queries", q_x, y_below, "end"))
        parts.append(_left_out(above, f"↑ {above} lines to keys 0–{k_first - 1}", k_x, y_above, "start"))
        parts.append(_left_out(below, f"↓ {below} lines to keys {k_end}–{n_keys - 1}", k_x, y_below, "start"))
    parts.append("</g></svg>")
    return "".join(parts)
