"""The bertviz-style head view as one SVG drawing: title, note, one chip per head of the layer (the legend, and what
the live view clicks to show or hide a head), query tokens left, key tokens right, and a line per (query, key) of
each shown head whose opacity is the weight.

What the live view reads from the drawing (no kernel round trip for hover):
- root: data-heads (the heads shown, "1,3"), data-lines (how many lines are drawn);
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


def head_view_note(weights: np.ndarray, heads: Sequence[int]) -> str:
    """How to read the lines: what their opacity is divided by, how many keys each query keeps."""
    top = strongest(weights, heads)
    if not top:
        return ""
    return (f"line opacity: attention weight ÷ {top:.3f} (the strongest line shown); the {weights.shape[-1]} "
            "strongest keys of each query")


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


def _token(token: str, side: str, index: int, y: float) -> str:
    label = short_token(token)
    whole = f"<title>{escape(token)}</title>" if label != token else ""  # a cut token keeps its text for hover
    return (f'<text class="bvl-token bvl-{side}" data-side="{side}" data-index="{index}" y="{y:g}">'
            f"{escape(label)}{whole}</text>")


def head_view_svg(query_tokens: Sequence[str], key_tokens: Sequence[str], indices: np.ndarray, weights: np.ndarray,
                  heads: Sequence[int], title: str) -> str:
    """The head view as a standalone SVG document.

    indices (num_heads, queries, k): each query's k strongest keys as rows of key_tokens; weights (same shape): their
    attention weights; heads: the heads shown (chips of the others are drawn as outlines); title: what is shown
    (the heads on are added to it).
    """
    indices, weights = np.asarray(indices), np.asarray(weights, dtype=np.float64)
    num_heads = indices.shape[0] if indices.ndim == 3 else 0
    if indices.shape != weights.shape or (num_heads and indices.shape[1] != len(query_tokens)):
        raise ValueError(f"indices {indices.shape} and weights {weights.shape} must both be (heads, "
                         f"{len(query_tokens)} queries, k)")
    shown = sorted({h for h in heads if 0 <= h < num_heads})
    full_title, note = head_view_title(title, shown), head_view_note(weights, shown)
    chips_y = 30 + NOTE_FONT + 8
    width = math.ceil(max(COL_W * 2 + GAP, text_width(full_title, 14) + 24, text_width(note, NOTE_FONT) + 24))
    per_row = max(1, (width - 8) // CHIP_PITCH)
    top = chips_y + math.ceil(max(num_heads, 1) / per_row) * CHIP_ROW + 8
    height = top + max(len(query_tokens), len(key_tokens), 1) * ROW_H + 8
    top_weight = strongest(weights, shown)
    lines: list[str] = []
    drawn = 0
    for head in shown if top_weight else ():
        lines.append(f'<g class="bvl-head-lines" data-head="{head}" stroke="{head_color(head)}" stroke-width="2">')
        for q in range(len(query_tokens)):
            row = []
            for key, weight in zip(indices[head, q].tolist(), (weights[head, q] / top_weight).tolist()):
                if weight >= MIN_OPACITY:
                    opacity = f"{weight:.3f}".removeprefix("0")
                    row.append(f'<line y1="{(q + 0.5) * ROW_H:g}" x2="{GAP}" y2="{(key + 0.5) * ROW_H:g}" '
                               f'stroke-opacity="{opacity}" data-key="{key}"/>')
            if row:
                lines.append(f'<g data-q="{q}">{"".join(row)}</g>')
                drawn += len(row)
        lines.append("</g>")
    box = {"total_w": width, "total_h": height}
    parts = figure_header("bvl-head-view", box, full_title, note)
    parts[0] = parts[0].replace(">", f' data-heads="{",".join(map(str, shown))}" data-lines="{drawn}">', 1)
    parts.append('<g class="bvl-head-legend">')
    parts.extend(_chip(h, h in shown, 8 + CHIP_PITCH * (h % per_row), chips_y + CHIP_ROW * (h // per_row))
                 for h in range(num_heads))
    parts.append(f'</g><g class="bvl-lines" transform="translate({COL_W},{top})">{"".join(lines)}</g>')
    parts.append(f'<g class="bvl-tokens" font-size="{TOKEN_FONT}">')
    columns = (("query", query_tokens, COL_W - 6, "end"), ("key", key_tokens, COL_W + GAP + 6, "start"))
    for side, column, x, anchor in columns:
        parts.append(f'<g transform="translate({x},{top + 4})" text-anchor="{anchor}">')
        parts.extend(_token(token, side, i, (i + 0.5) * ROW_H) for i, token in enumerate(column))
        parts.append("</g>")
    parts.append("</g></svg>")
    return "".join(parts)
