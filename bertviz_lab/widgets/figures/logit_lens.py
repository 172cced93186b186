"""The logit lens as one SVG drawing: at one position of a text, the k most likely tokens after every layer (rows:
the embeddings, then layer 1 to L; columns: rank 1 to k), each cell coloured by its probability, the last row marked
as the model's own prediction; optionally a narrow column that follows one token (its probability and rank) through
the layers.

The figure follows the cell grid's contract (figures/cell_grid.py): every cell is a `bvl-cell` carrying its row,
column and the exact numbers as `data-tip` (and a <title>), so hover reads them without the kernel. Probabilities are
written as the shortest text that reads back as the same float32 the lens computed, so a tip is exact, not rounded.
Text takes the theme's colours from figure.css; only cells carry colours of their own (the Blues palette), with the
ink that reads on each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.atlas import colour_codes
from bertviz_lab.widgets.figures.cell_grid import CELL_CLASS, cell_attributes, cell_title, exact
from bertviz_lab.widgets.figures.contrast import ink_class, ink_on
from bertviz_lab.widgets.figures.heatmap import BAR_W, LABEL_FONT, NOTE_FONT, TITLE_FONT, colorbar, figure_header
from bertviz_lab.widgets.figures.text import escape, short_token, text_width

CELL_H = 24  # px per layer row
MIN_CELL_W, PAD = 52, 12  # a rank column is as wide as its longest (shortened) token plus PAD, at least MIN_CELL_W
TRACK_W, TRACK_GAP = 56, 14  # the tracked token's column, and the gap before it
BAR_MIN_H = 120
BAR_TICKS = [(i / 4, f"{i / 4:g}") for i in range(5)]
BAR_TITLE = "probability"


@dataclass(frozen=True)
class TrackedToken:
    """One vocabulary entry followed through the layers at the lens's position: per layer (embeddings first) its
    probability, its rank (1 = the most likely token) and its logit."""

    token: str
    id: int
    probs: list[float]
    ranks: list[int]
    logits: list[float]


def layer_name(layer: int) -> str:
    """A row's name: "embeddings" for layer 0, "layer l" after encoder layer l."""
    return "embeddings" if layer == 0 else f"layer {layer}"


def cell_tip(layer: int, rank: int, token: str, prob: float, logit: float | None = None) -> str:
    """What hover shows on a cell: "layer 4 · rank 2 · paris · p = 0.312456 (logit 7.1234)", values exact."""
    tip = f"{layer_name(layer)} · rank {rank} · {token} · p = {exact(prob)}"
    return tip + (f" (logit {exact(logit)})" if logit is not None else "")


def track_tip(layer: int, tracked: TrackedToken) -> str:
    """What hover shows on the tracked token's cell of a layer."""
    return (f"{layer_name(layer)} · {tracked.token} (followed) · rank {tracked.ranks[layer]} · "
            f"p = {exact(tracked.probs[layer])} (logit {exact(tracked.logits[layer])})")


def fill(prob: float) -> str:
    """The Blues colour of a probability (0..1)."""
    red, green, blue = D.PALETTE[int(colour_codes(np.array([prob]), 1.0)[0])]
    return f"#{red:02x}{green:02x}{blue:02x}"


def _tokens(row: Any) -> list[str]:
    tokens = getattr(row, "tokens", None)
    return list(tokens) if tokens is not None else [str(i) for i in row.ids]


def _selected_mark(row: int, col: int, x: float, y: float, w: float, h: float) -> str:
    """The outline of the opened cell, drawn as the heatmap's and the atlas's (heatmap.css)."""
    at = f'x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}"'
    return (f'<g class="bvl-selected-cell" data-row="{row}" data-col="{col}"><rect class="bvl-heatmap-mark-halo" {at}/>'
            f'<rect class="bvl-heatmap-mark-line" {at}/></g>')


def logit_lens_svg(rows: Sequence[Any], position: int, position_token: str, title: str = "", note: str = "",
                   selected: tuple[int, int] | None = None, actual: str | None = None,
                   logits: Sequence[Sequence[float]] | None = None, track: TrackedToken | None = None) -> str:
    """The logit lens at one position as a standalone SVG document.

    rows: per layer, embeddings first, something with `layer`, `ids`, `probs` and `tokens` (trace.LayerTop; ids
    stand in for missing tokens); logits (optional, per row, per rank) adds each cell's logit to its tip. selected
    (row, col) outlines that cell; actual (the input's own token there) outlines, dashed, every cell that predicts
    it; track adds a column that follows one token through the layers (its cells open nothing).
    """
    if not rows:
        raise ValueError("the logit lens figure needs at least one layer's row")
    k = len(rows[0].ids)
    token_rows = [_tokens(row) for row in rows]
    title = title or f"logit lens · position {position} · {position_token}"
    names = [layer_name(int(row.layer)) for row in rows]
    names[-1] += " · prediction"
    label_w = math.ceil(max(text_width(name, LABEL_FONT, monospace=True) for name in names)) + 10
    widest = max((text_width(short_token(t), LABEL_FONT, monospace=True) for tokens in token_rows for t in tokens),
                 default=0)
    cell_w = max(MIN_CELL_W, math.ceil(widest) + PAD)
    track_head = f"p({short_token(track.token)})" if track is not None else ""
    track_w = max(TRACK_W, math.ceil(text_width(track_head, LABEL_FONT, monospace=True)) + 8) if track else 0
    top = 30 + (NOTE_FONT + 8 if note else 0) + 34  # room for the axis title and the rank numbers
    left = 12 + label_w
    width, height = k * cell_w, len(rows) * CELL_H
    track_x = left + width + TRACK_GAP
    grid_right = track_x + track_w if track is not None else left + width
    bar_x, bar_h = grid_right + 24, max(height, BAR_MIN_H)
    legend_y = top + max(height, bar_h) + 22
    legend = "last row: the model's prediction" + (
        f" · dashed: the input's token {short_token(actual)}" if actual is not None else "")
    total_w = max(bar_x + BAR_W + 6 + 40 + 28, math.ceil(text_width(title, TITLE_FONT)) + 24,
                  math.ceil(text_width(note, NOTE_FONT)) + 20, math.ceil(text_width(legend, NOTE_FONT)) + 20)
    total_h = legend_y + 10
    parts = figure_header("bvl-logit-lens", {"total_w": total_w, "total_h": total_h}, title, note)
    parts[0] = parts[0].replace("<svg ", f'<svg data-position="{int(position)}" data-k="{k}" ', 1)
    parts.append(f'<text class="bvl-axis-title" x="{left + width / 2:g}" y="{top - 22}" font-size="12" '
                 'text-anchor="middle">rank</text>')
    for c in range(k):
        parts.append(f'<text class="bvl-tick bvl-mono" x="{left + (c + 0.5) * cell_w:g}" y="{top - 6}" '
                     f'text-anchor="middle">{c + 1}</text>')
    for r, name in enumerate(names):
        css = "bvl-tick bvl-mono" + (" bvl-lens-prediction" if r == len(rows) - 1 else "")
        weight = ' font-weight="bold"' if r == len(rows) - 1 else ""
        parts.append(f'<text class="{css}" x="{left - 6}" y="{top + (r + 0.5) * CELL_H + 4:g}" '
                     f'text-anchor="end"{weight}>{escape(name)}</text>')
    parts.append(f'<g class="bvl-lens-cells" data-rows="{len(rows)}" data-cols="{k}">')
    for r, (row, tokens) in enumerate(zip(rows, token_rows)):
        for c, (token, prob) in enumerate(zip(tokens, row.probs)):
            colour = fill(prob)
            logit = float(logits[r][c]) if logits is not None else None
            tip = cell_tip(int(row.layer), c + 1, token, prob, logit)
            x, y = left + c * cell_w, top + r * CELL_H
            parts.append(f'<g class="{CELL_CLASS} bvl-lens-cell"{cell_attributes(r, c, tip)}>{cell_title(tip)}'
                         f'<rect x="{x}" y="{y}" width="{cell_w}" height="{CELL_H}" fill="{colour}"/>'
                         f'<text class="{ink_class(ink_on(colour))} bvl-mono" x="{x + cell_w / 2:g}" '
                         f'y="{y + CELL_H / 2 + 4:g}" text-anchor="middle">{escape(short_token(token))}</text></g>')
    parts.append("</g>")
    parts.append(f'<rect class="bvl-rule bvl-frame" x="{left}" y="{top}" width="{width}" height="{height}" '
                 'stroke-width="0.5"/>')
    last_y = top + (len(rows) - 1) * CELL_H
    parts.append(f'<line class="bvl-rule" x1="{left}" y1="{last_y}" x2="{left + width}" y2="{last_y}" '
                 'stroke-width="1.5"/>')
    if actual is not None:
        for r, tokens in enumerate(token_rows):
            for c, token in enumerate(tokens):
                if token == actual:  # outlined in the ink that reads on the cell's own colour
                    ink = ink_class(ink_on(fill(rows[r].probs[c])))
                    parts.append(f'<rect class="bvl-lens-actual {ink}" data-row="{r}" data-col="{c}" '
                                 f'x="{left + c * cell_w + 2}" y="{top + r * CELL_H + 2}" width="{cell_w - 4}" '
                                 f'height="{CELL_H - 4}"/>')
    if track is not None:
        parts.append(_track_column(rows, track, track_head, track_x, top, track_w, k))
    if selected is not None and 0 <= selected[0] < len(rows) and 0 <= selected[1] < k:
        r, c = int(selected[0]), int(selected[1])
        parts.append(_selected_mark(r, c, left + c * cell_w, top + r * CELL_H, cell_w, CELL_H))
    parts.append(colorbar(bar_x, top, bar_h, D.PALETTE, BAR_TICKS, BAR_TITLE))
    parts.append(f'<text class="bvl-note bvl-muted" x="8" y="{legend_y}" font-size="{NOTE_FONT}">'
                 f"{escape(legend)}</text>")
    parts.append("</svg>")
    return "".join(parts)


def _track_column(rows: Sequence[Any], track: TrackedToken, head: str, x: float, top: float, w: float,
                  col: int) -> str:
    """The followed token's column: its probability as the cell's colour, its rank as the cell's text."""
    parts = [f'<g class="bvl-lens-track" data-token="{escape(track.token)}" data-id="{int(track.id)}">',
             f'<text class="bvl-tick bvl-mono" x="{x + w / 2:g}" y="{top - 6}" text-anchor="middle">'
             f"{escape(head)}<title>{escape(track.token)}</title></text>"]
    for r, row in enumerate(rows):
        layer = int(row.layer)
        colour, tip = fill(track.probs[layer]), track_tip(layer, track)
        y = top + r * CELL_H
        parts.append(f'<g class="{CELL_CLASS} bvl-lens-track-cell"{cell_attributes(r, col, tip, opens=False)}>'
                     f'{cell_title(tip)}<rect x="{x}" y="{y}" width="{w}" height="{CELL_H}" fill="{colour}"/>'
                     f'<text class="{ink_class(ink_on(colour))} bvl-mono" x="{x + w / 2:g}" y="{y + CELL_H / 2 + 4:g}" '
                     f'text-anchor="middle">#{track.ranks[layer]}</text></g>')
    parts.append(f'<rect class="bvl-rule" x="{x}" y="{top}" width="{w}" height="{len(rows) * CELL_H}" '
                 'stroke-width="0.5"/></g>')
    return "".join(parts)
