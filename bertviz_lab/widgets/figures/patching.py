"""Activation patching as figures (the causal tracing of ROME, Meng et al. 2022): how much of the clean run's metric
comes back when one cell of the corrupted run is copied from the clean run.

`patching_svg` draws layers (rows, layer 0 at the top: the output of layer l, as the hook points number them) by the
clean text's tokens (columns; a position where the corrupted text differs is starred, and its tip names the
corrupted token); `head_grid_svg` draws layers by heads, for point="head_out". Both colour the normalized effect,
(effect - corrupted) / (clean - corrupted): 0 restores nothing, 1 restores the clean metric, and a cell may
overshoot either way.

Colours: ColorBrewer RdBu reversed (attention_data.DIVERGING, the neuron view's scale): red where patching restores
the clean answer, blue where it pushes further from it, near-white where it does nothing. It is a diverging scale
that readers with red-green colour blindness still read (blue against red), and its two ends and its middle each
carry an ink (contrast.ink_on) that reads on them, so the value labels of the head grid and the hatch of a clipped
cell read in the light and the dark theme alike; everything else takes the theme's colours (figure.css). The scale
is fixed at -1 .. 1, so two figures compare at a glance; a cell beyond it keeps the end colour and is hatched (as
heatmap.clipped_marks marks the attention heatmap's clipped cells), and a line under the figure names the extremes.

Every cell follows figures.cell_grid's contract (class bvl-cell, data-row = layer, data-col = position or head,
data-tip with the exact values, a <title>), so the causal views' one front end hovers, moves and opens them.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.atlas import LABELLED_CELL, cell_side
from bertviz_lab.widgets.figures.cell_grid import CELL_CLASS, cell_attributes, cell_title
from bertviz_lab.widgets.figures.cell_grid import exact as exact_number
from bertviz_lab.widgets.figures.contrast import ink_class, ink_on
from bertviz_lab.widgets.figures.heatmap import (
    LABEL_FONT,
    NOTE_FONT,
    cell_sides,
    clipped_marks,
    colorbar,
    figure_header,
    heatmap_layout,
    tick_labels,
)
from bertviz_lab.widgets.figures.text import escape, minus, text_width

# point -> what its cells are, for the panel's toggle and the figure's axis (hook points: trace.patching.POINTS)
POINT_LABELS = {
    "hidden": "residual stream",
    "attn_out": "attention output",
    "mlp_out": "MLP output",
    "head_out": "attention heads",
}
POINT_TITLES = {  # what a row of the figure patches, in its default title
    "hidden": "residual stream after each layer",
    "attn_out": "attention output of each layer",
    "mlp_out": "MLP output of each layer",
    "head_out": "each head's output",
}
SCALE_TOP = 1.0  # the colour bar spans -1 .. 1 in units of the clean metric restored
BAR_TITLE = "clean metric restored"
DIFFERS_MARK = "*"  # after a column label where the corrupted text has another token


def exact(value: float) -> str:
    """A value as the patching tips and lines show it: exact, with at least four decimals."""
    return exact_number(value, decimals=4)


def _hex(code: int) -> str:
    red, green, blue = D.DIVERGING[code]
    return f"#{red:02x}{green:02x}{blue:02x}"


def colour_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes of the diverging palette, cells beyond the scale) of normalized effects; a non-finite cell gets the
    middle code and is not clipped (it is drawn as no value)."""
    finite = np.isfinite(values)
    clean = np.where(finite, values, 0.0)
    clipped = finite & (np.abs(clean) > SCALE_TOP * (1 + 1e-9))
    return D.diverging_codes(clean, SCALE_TOP), clipped


def clipped_paths(codes: np.ndarray, clipped: np.ndarray, left: float, top: float, cell_w: int,
                  cell_h: int) -> str:
    """The hatch of the clipped cells, one path per ink: the ink that reads on each end of the scale (ink_on)."""
    by_ink: dict[str, np.ndarray] = {}
    for code in sorted(set(codes[clipped].tolist())):
        ink = ink_on(_hex(int(code)))
        by_ink[ink] = by_ink.get(ink, np.zeros_like(clipped)) | (clipped & (codes == code))
    return "".join(clipped_marks(np.where(mine, D.OVER_CODE, 0).astype(np.uint8), left, top, cell_w, cell_h,
                                 css_class=ink_class(ink)) for ink, mine in sorted(by_ink.items()))


def clipped_line(values: np.ndarray, clipped: np.ndarray) -> str:
    """What the line under a figure with clipped cells says: how many, and the extremes beyond the scale."""
    if not clipped.any():
        return ""
    beyond = values[clipped]
    return (f"hatched: {int(clipped.sum())} cell{'s' if clipped.sum() != 1 else ''} beyond the scale "
            f"(−1 … 1): min {minus(f'{float(beyond.min()):.4g}')}, max {minus(f'{float(beyond.max()):.4g}')}")


def metric_text(effect: np.ndarray | None, clean: float | None, corrupted: float | None, row: int,
                col: int) -> str:
    """The tip's bracket: the patched metric and the two references, exact ('' where they are not given)."""
    if effect is None or clean is None or corrupted is None:
        return ""
    return f" (metric {exact(effect[row, col])}; clean {exact(clean)}, corrupted {exact(corrupted)})"


def _cell(x: float, y: float, w: int, h: int, row: int, col: int, tip: str, value: float, code: int) -> str:
    """One cell: its colour, or the theme's ground where it has no value (not patched; nothing to restore)."""
    finite = math.isfinite(value)
    fill = f' fill="{_hex(code)}"' if finite else ""
    classes = CELL_CLASS if finite else f"{CELL_CLASS} bvl-ground"
    return (f'<rect class="{classes}" x="{x}" y="{y}" width="{w}" height="{h}"{fill}'
            f"{cell_attributes(row, col, tip, opens=finite)}>{cell_title(tip)}</rect>")


def _selected_mark(selected: Sequence[int] | None, rows: int, cols: int, left: float, top: float, cell_w: int,
                   cell_h: int) -> str:
    """The outline of the opened cell, drawn as the heatmap marks its chosen cell."""
    if selected is None:
        return ""
    r, c = int(selected[0]), int(selected[1])
    if not (0 <= r < rows and 0 <= c < cols):
        return ""
    at = f'x="{left + c * cell_w}" y="{top + r * cell_h}" width="{cell_w}" height="{cell_h}"'
    return (f'<g class="bvl-selected-cell" data-row="{r}" data-col="{c}">'
            f'<rect class="bvl-heatmap-mark-halo" {at}/><rect class="bvl-heatmap-mark-line" {at}/></g>')


def _grid(values: np.ndarray, what: str) -> np.ndarray:
    grid = np.asarray(values, dtype=np.float64)
    if grid.ndim != 2 or 0 in grid.shape:
        raise ValueError(f"{what} must be a non-empty (layers, columns) array, got shape {grid.shape}.")
    return grid


def patching_svg(normalized: np.ndarray, tokens: Sequence[str], positions: Sequence[int] | None = None,
                 title: str = "", note: str = "", point: str = "hidden", selected: Sequence[int] | None = None, *,
                 corrupted_tokens: Sequence[str] | None = None, effect: np.ndarray | None = None,
                 clean: float | None = None, corrupted: float | None = None) -> str:
    """The layer × token map of one patching run as a standalone SVG document.

    normalized (layers, seq): the share of the clean metric each cell restores; tokens: the clean text's tokens;
    positions: their positions (default 0..seq-1), for labels and tips; corrupted_tokens: the corrupted text's (a
    position where they differ is starred); effect, clean, corrupted: the raw metric per cell and of the two runs,
    written into each tip; selected (layer, column) outlines that cell.
    """
    values = _grid(normalized, "normalized")
    layers, seq = values.shape
    tokens = [str(t) for t in tokens]
    positions = list(range(seq)) if positions is None else [int(p) for p in positions]
    if len(tokens) != seq or len(positions) != seq:
        raise ValueError(f"normalized has {seq} columns but {len(tokens)} tokens and {len(positions)} positions.")
    if corrupted_tokens is not None and len(corrupted_tokens) != seq:
        raise ValueError(f"corrupted_tokens has {len(corrupted_tokens)} tokens, the clean text {seq}.")
    effects = None if effect is None else _grid(effect, "effect").reshape(layers, seq)
    differs = [corrupted_tokens is not None and str(corrupted_tokens[c]) != tokens[c] for c in range(seq)]
    codes, clipped = colour_codes(values)
    cell_w, cell_h = cell_sides(layers, seq)
    row_ticks = [(r, f"layer {r}") for r in range(layers)]
    col_ticks = [(c, text + (DIFFERS_MARK if differs[c] else ""))
                 for c, text in tick_labels(tokens, positions, cell_w)]
    bar_ticks = D.diverging_ticks(SCALE_TOP)
    title = title or f"activation patching · {POINT_TITLES.get(point, point)}"
    box = heatmap_layout(layers, seq, row_ticks, col_ticks, title, note, bar_ticks, (cell_w, cell_h))
    left, top = box["left"], box["top"]
    width, height = seq * cell_w, layers * cell_h
    starred = [f"{positions[c]}·{tokens[c]} → {corrupted_tokens[c]}" for c in range(seq)
               if differs[c] and corrupted_tokens is not None]
    lines = [line for line in (f"{DIFFERS_MARK} corrupted: " + ", ".join(starred) if starred else "",
                               clipped_line(values, clipped)) if line]
    lines_y = top + height + box["col_label_h"] + 40
    box["total_h"] = max(box["total_h"], lines_y + 16 * len(lines) + 4)
    box["total_w"] = max(box["total_w"], *(math.ceil(text_width(line, NOTE_FONT)) + 20 for line in lines), 0)
    parts = figure_header("bvl-patching", box, title, note)
    parts.append(f'<g class="bvl-patching-cells" data-rows="{layers}" data-cols="{seq}" data-x="{left}" '
                 f'data-y="{top}" data-cell-w="{cell_w}" data-cell-h="{cell_h}" data-point="{escape(point)}" '
                 'shape-rendering="crispEdges">')
    for r in range(layers):
        for c in range(seq):
            token = f"{positions[c]}·{tokens[c]}" + (f" (corrupted: {corrupted_tokens[c]})"
                                                      if differs[c] and corrupted_tokens is not None else "")
            tip = (f"layer {r} · {token} · restores {exact(values[r, c])}"
                   + metric_text(effects, clean, corrupted, r, c))
            parts.append(_cell(left + c * cell_w, top + r * cell_h, cell_w, cell_h, r, c, tip, values[r, c],
                               int(codes[r, c])))
    parts.append("</g>")
    parts.append(clipped_paths(codes, clipped, left, top, cell_w, cell_h))
    parts.append(f'<rect class="bvl-rule bvl-frame" x="{left}" y="{top}" width="{width}" height="{height}" '
                 'stroke-width="0.5"/>')
    parts.append(_selected_mark(selected, layers, seq, left, top, cell_w, cell_h))
    for r, text in row_ticks:
        y = top + (r + 0.5) * cell_h + LABEL_FONT * 0.35
        parts.append(f'<text class="bvl-tick bvl-mono" x="{left - 4}" y="{y:.1f}" text-anchor="end">'
                     f"{escape(text)}</text>")
    for c, text in col_ticks:
        x = left + (c + 0.5) * cell_w + LABEL_FONT * 0.35
        weight = ' font-weight="bold"' if differs[c] else ""
        parts.append(f'<text class="bvl-token" transform="translate({x:.1f},{top + height + 4}) rotate(-90)" '
                     f'text-anchor="end"{weight}>{escape(text)}<title>{escape(tokens[c])}</title></text>')
    axis = 'class="bvl-axis-title" font-size="12" text-anchor="middle"'
    parts.append(f'<text {axis} x="{left + width / 2:.1f}" y="{top + height + box["col_label_h"] + 20}">'
                 "token of the clean text</text>")
    for index, line in enumerate(lines):
        parts.append(f'<text class="bvl-note bvl-muted" x="8" y="{lines_y + 16 * index}" font-size="{NOTE_FONT}">'
                     f"{escape(line)}</text>")
    parts.append(colorbar(box["bar_x"], top, box["bar_h"], D.DIVERGING, bar_ticks, BAR_TITLE))
    parts.append("</svg>")
    return "".join(parts)


def head_grid_svg(normalized: np.ndarray, title: str = "", note: str = "", selected: Sequence[int] | None = None,
                  *, effect: np.ndarray | None = None, clean: float | None = None,
                  corrupted: float | None = None) -> str:
    """The layer × head grid of one head_out patching run as a standalone SVG document (the head atlas's layout):
    each head patched at every position (or the positions patch() was given); cells large enough carry their value.

    effect, clean, corrupted: the raw metric per head and of the two runs, written into each tip; selected
    (layer, head) outlines that head.
    """
    values = _grid(normalized, "normalized")
    layers, heads = values.shape
    effects = None if effect is None else _grid(effect, "effect").reshape(layers, heads)
    codes, clipped = colour_codes(values)
    cell = cell_side(layers, heads)
    bar_ticks = D.diverging_ticks(SCALE_TOP)
    title = title or f"activation patching · {POINT_TITLES['head_out']}"
    label_w = math.ceil(text_width(f"layer {layers - 1}", LABEL_FONT, monospace=True)) + 8
    top = 34 + (NOTE_FONT + 8 if note else 0) + 18  # room for the head numbers above the grid
    left = 24 + label_w
    width, height = heads * cell, layers * cell
    bar_h = max(height, 160)
    bar_x = left + width + 24
    line = clipped_line(values, clipped)
    line_y = top + max(height, bar_h) + 22
    tick_w = math.ceil(max(text_width(label, LABEL_FONT, monospace=True) for _, label in bar_ticks))
    box = {"total_w": max(bar_x + 14 + 6 + tick_w + 34, math.ceil(text_width(title, 14)) + 24,
                          math.ceil(text_width(note, NOTE_FONT)) + 20, math.ceil(text_width(line, NOTE_FONT)) + 20),
           "total_h": line_y + (16 if line else 0) + 4}
    parts = figure_header("bvl-patching bvl-patching-heads", box, title, note)
    parts.append(f'<text class="bvl-axis-title" x="{left + width / 2:g}" y="{top - 20}" font-size="12" '
                 'text-anchor="middle">head</text>')
    for c in range(heads):
        parts.append(f'<text class="bvl-tick bvl-mono" x="{left + (c + 0.5) * cell:g}" y="{top - 5}" '
                     f'text-anchor="middle">{c}</text>')
    for r in range(layers):
        parts.append(f'<text class="bvl-tick bvl-mono" x="{left - 5}" y="{top + (r + 0.5) * cell + 4:g}" '
                     f'text-anchor="end">layer {r}</text>')
    parts.append(f'<g class="bvl-patching-cells" data-rows="{layers}" data-cols="{heads}" data-x="{left}" '
                 f'data-y="{top}" data-cell-w="{cell}" data-cell-h="{cell}" data-point="head_out" '
                 'shape-rendering="crispEdges">')
    for r in range(layers):
        for c in range(heads):
            tip = f"layer {r} · head {c} · restores {exact(values[r, c])}" + metric_text(effects, clean, corrupted,
                                                                                         r, c)
            parts.append(_cell(left + c * cell, top + r * cell, cell, cell, r, c, tip, values[r, c],
                               int(codes[r, c])))
    parts.append("</g>")
    if cell >= LABELLED_CELL:
        parts.append('<g class="bvl-patching-labels" pointer-events="none">')
        for r in range(layers):
            for c in range(heads):
                value = float(values[r, c])
                if not math.isfinite(value):
                    continue
                ink = ink_class(ink_on(_hex(int(codes[r, c]))))
                parts.append(f'<text class="{ink} bvl-mono" x="{left + (c + 0.5) * cell:g}" '
                             f'y="{top + (r + 0.5) * cell + 3.5:g}" font-size="10" text-anchor="middle">'
                             f"{escape(minus(f'{value:.2f}'.replace('-0.00', '0.00')))}</text>")
        parts.append("</g>")
    parts.append(clipped_paths(codes, clipped, left, top, cell, cell))
    parts.append(f'<rect class="bvl-rule bvl-frame" x="{left}" y="{top}" width="{width}" height="{height}" '
                 'stroke-width="0.5"/>')
    parts.append(_selected_mark(selected, layers, heads, left, top, cell, cell))
    if line:
        parts.append(f'<text class="bvl-note bvl-muted" x="8" y="{line_y}" font-size="{NOTE_FONT}">'
                     f"{escape(line)}</text>")
    parts.append(colorbar(bar_x, top, bar_h, D.DIVERGING, bar_ticks, BAR_TITLE))
    parts.append("</svg>")
    return "".join(parts)
