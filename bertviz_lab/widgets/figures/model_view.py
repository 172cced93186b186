"""The model view as one SVG drawing: every layer × head attention map as a small embedded PNG under one colour
scale, its labels and colour bar, and what head ablation did: heads switched off (veiled, crossed, "off"), a badge
per head saying how far its attention moved, and lines saying what the model's predictions did.

What the live view reads from the drawing (no kernel round trip for hover or clicks):
- root: data-layers, data-heads, data-ablated (heads off, "0:3,1:7"), data-badges (how many badges are drawn);
- each head `g.bvl-thumb`: data-layer, data-head, data-off ("true" where switched off), data-change (how far its
  attention moved, where heads are off).
"""

from __future__ import annotations

import base64
import math
from typing import Sequence

import numpy as np

from bertviz_lab.widgets.figures.contrast import ink_class, ink_on
from bertviz_lab.widgets.figures.heatmap import BAR_MIN_H, BAR_W, LABEL_FONT, NOTE_FONT, colorbar, figure_header, png
from bertviz_lab.widgets.figures.text import escape, text_width

THUMB, GAP, LABEL_W, HEADER_H = 52, 6, 90, 20  # px: a thumbnail's side, between two, layer labels, head labels
OFF_FILL = "#c62828"  # the "off" label's box: a data colour with its own ink, the same in every theme
BADGE_FILL = "#ffffff"
BADGE_MIN = 0.005  # changes below this get no badge


def badge_text(change: float) -> str:
    """A head's attention change as its badge says it: Δ.12, Δ.05, Δ1."""
    return "Δ1" if change >= 0.995 else "Δ" + f"{change:.2f}".lstrip("0")


def _ink(fill: str) -> str:
    ink = ink_on(fill)
    return f'class="{ink_class(ink)}" fill="{ink}"'


def _thumb(codes: np.ndarray, palette: np.ndarray, x: float, y: float) -> str:
    data = base64.b64encode(png(codes, palette)).decode("ascii")
    return (f'<image x="{x}" y="{y}" width="{THUMB}" height="{THUMB}" preserveAspectRatio="none" '
            f'image-rendering="optimizeSpeed" style="image-rendering:pixelated" href="data:image/png;base64,{data}"/>'
            f'<rect class="bvl-grid" x="{x}" y="{y}" width="{THUMB}" height="{THUMB}"/>')


def _off_mark(x: float, y: float) -> str:
    cx, cy = x + THUMB / 2, y + THUMB / 2
    return (f'<g class="bvl-ablated"><rect class="bvl-ablated-veil" x="{x}" y="{y}" width="{THUMB}" height="{THUMB}"/>'
            f'<g class="bvl-warn-line" stroke-width="2" fill="none"><rect x="{x + 1}" y="{y + 1}" width="{THUMB - 2}" '
            f'height="{THUMB - 2}"/><line x1="{x}" y1="{y}" x2="{x + THUMB}" y2="{y + THUMB}"/>'
            f'<line x1="{x + THUMB}" y1="{y}" x2="{x}" y2="{y + THUMB}"/></g>'
            f'<rect x="{cx - 14}" y="{cy - 8}" width="28" height="16" rx="3" fill="{OFF_FILL}"/>'
            f'<text x="{cx}" y="{cy + 4}" text-anchor="middle" font-size="12" font-weight="bold" '
            f'{_ink(OFF_FILL)}>off</text></g>')


def _badge(change: float, x: float, y: float) -> str:
    return (f'<g class="bvl-badge"><rect x="{x + 1}" y="{y + THUMB - 14}" width="34" height="13" rx="2" '
            f'fill="{BADGE_FILL}"/><text x="{x + 3}" y="{y + THUMB - 4}" font-size="10" {_ink(BADGE_FILL)}>'
            f"{badge_text(change)}</text></g>")


def model_view_svg(codes: np.ndarray, palette: np.ndarray, bar_ticks: Sequence[Sequence], bar_title: str,
                   title: str, hint: str, lines: Sequence[str] = (), ablated: Sequence[Sequence[int]] = (),
                   changes: np.ndarray | None = None, badge_min: float = BADGE_MIN,
                   selected: Sequence[int] | None = None, layer_names: Sequence[int] = (),
                   head_names: Sequence[int] = ()) -> str:
    """The model view as a standalone SVG document.

    codes (L, H, s, s): each head's map as palette codes (one PNG each); palette (256, 3); bar_ticks (position 0..1,
    label) and bar_title: the one colour bar; hint: how to read a map; lines: what the ablation did; ablated: the
    (layer, head) pairs switched off; changes (L, H): how far each head's attention moved (a badge where it is at
    least badge_min and the head is on); selected: the (layer, head) open in the heatmap, outlined; layer_names,
    head_names: the model's numbers of the rows and columns drawn, where only some layers or heads are (default 0..);
    a map may be (rows, cols), a cross attention's, stretched to the square thumbnail.
    """
    codes = np.asarray(codes, dtype=np.uint8)
    if codes.ndim != 4:  # (rows, cols) may differ: a cross attention's map, stretched to the square thumbnail
        raise ValueError(f"codes must be (layers, heads, rows, cols), got shape {codes.shape}")
    L, H = codes.shape[:2]
    if changes is not None and np.shape(changes) != (L, H):
        raise ValueError(f"changes must be ({L}, {H}), one per head, got shape {np.shape(changes)}")
    off = {(int(layer), int(head)) for layer, head in ablated}
    layer_names = list(layer_names) or list(range(L))
    head_names = list(head_names) or list(range(H))
    lines = list(lines)
    line_y = [20 + (NOTE_FONT + 6) + (i + 1) * (NOTE_FONT + 4) for i in range(len(lines))]
    top = 30 + NOTE_FONT + 8 + HEADER_H + len(lines) * (NOTE_FONT + 4)
    grid_w, grid_h = H * (THUMB + GAP), L * (THUMB + GAP)
    bar_h = max(grid_h - GAP, BAR_MIN_H, text_width(bar_title, 12) + 12)  # the bar as long as its title
    bar_x = LABEL_W + grid_w + 16
    tick_w = max((text_width(str(t[1]), LABEL_FONT, monospace=True) for t in bar_ticks), default=6)
    width = math.ceil(max(bar_x + BAR_W + 6 + tick_w + 40, text_width(title, 14) + 24, text_width(hint, NOTE_FONT) + 24,
                          *(text_width(line, NOTE_FONT) + 24 for line in lines)))
    height = top + max(grid_h, bar_h) + 10
    grid, badges = [], 0
    for layer in range(L):
        y = top + layer * (THUMB + GAP)
        grid.append(f'<text class="bvl-layer-label" x="{LABEL_W - 8}" y="{y + THUMB / 2 + 4}" text-anchor="end">'
                    f"layer {layer_names[layer]}</text>")
        for head in range(H):
            x = LABEL_W + head * (THUMB + GAP)
            is_off = (layer, head) in off
            data = f'data-layer="{layer}" data-head="{head}"' + (' data-off="true"' if is_off else "")
            if changes is not None:
                data += f' data-change="{float(changes[layer, head]):.4f}"'
            grid.append(f'<g class="bvl-thumb" {data}>' + _thumb(codes[layer, head], palette, x, y))
            if selected is not None and tuple(selected) == (layer, head):
                grid.append(f'<rect class="bvl-selected" x="{x - 1}" y="{y - 1}" width="{THUMB + 2}" '
                            f'height="{THUMB + 2}"/>')
            if is_off:
                grid.append(_off_mark(x, y))
            elif changes is not None and changes[layer, head] >= badge_min:
                grid.append(_badge(float(changes[layer, head]), x, y))
                badges += 1
            grid.append("</g>")
    parts = figure_header("bvl-model-view", {"total_w": width, "total_h": height}, title, hint)
    heads_off = ",".join(f"{layer}:{head}" for layer, head in sorted(off))
    parts[0] = parts[0].replace(">", f' data-layers="{L}" data-heads="{H}" data-ablated="{heads_off}" '
                                     f'data-badges="{badges}">', 1)
    parts.extend(f'<text class="bvl-ablation-line" x="8" y="{y}" font-size="{NOTE_FONT}">{escape(line)}</text>'
                 for line, y in zip(lines, line_y))
    parts.append(f'<text class="bvl-axes-hint bvl-muted" x="8" y="{top - 6}">query ↓ key →</text>')
    parts.extend(f'<text class="bvl-head-label" x="{LABEL_W + h * (THUMB + GAP) + THUMB / 2}" y="{top - 6}" '
                 f'text-anchor="middle">head {head_names[h]}</text>' for h in range(H))
    parts.extend(grid)
    parts.append(colorbar(bar_x, top, bar_h, palette, [tuple(t) for t in bar_ticks], bar_title))
    parts.append("</svg>")
    return "".join(parts)
