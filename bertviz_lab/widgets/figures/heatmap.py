"""The attention heatmap as one SVG drawing: title, token axes, cells (one <rect> each, or one embedded PNG when
there are many), colour bar; and the pieces other attention figures share (PNG of palette codes, colour bar, header)."""

from __future__ import annotations

import base64
import math
import struct
import zlib
from typing import Any, Sequence

import numpy as np

from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.text import escape, short_token

LABEL_FONT = 11  # px, monospace: ~0.6 em a character
CHAR_W = 6.7
TITLE_FONT, NOTE_FONT = 14, 12
MAX_SIDE, MAX_CELL = 600, 28  # the matrix is at most MAX_SIDE px a side, at one whole pixel (or more) per cell
LABEL_PITCH = 13  # px between two token labels; at small cells only every k-th token is labelled
MAX_LABEL_CHARS = 16
RECT_LIMIT = 64 * 64  # up to this many cells the SVG draws one <rect> each, beyond one embedded PNG
BAR_W, BAR_MIN_H = 14, 160


# drawing: the layout is computed here once and sent to the browser too, so live view and SVG are one drawing ---
def png(codes: np.ndarray, palette: np.ndarray) -> bytes:
    """A palette PNG (colour type 3) with one pixel per code: zlib-compressed rows, no imaging library needed."""
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    height, width = codes.shape

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = np.concatenate([np.zeros((height, 1), np.uint8), codes], axis=1)  # filter byte 0 before each row
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 3, 0, 0, 0))
            + chunk(b"PLTE", np.ascontiguousarray(palette, dtype=np.uint8).tobytes())
            + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) + chunk(b"IEND", b""))


def _label(text: str, token: str) -> str:
    """An escaped label; a cut token keeps its whole text as the label's tooltip."""
    return escape(text) + (f"<title>{escape(token)}</title>" if token not in text else "")


def cell_size(rows: int, cols: int) -> int:
    """Whole pixels per cell, so a canvas of one pixel per cell scales up without blur."""
    return max(1, min(MAX_CELL, MAX_SIDE // max(rows, cols, 1)))


def tick_labels(tokens: Sequence[str], positions: Sequence[int], cell: int) -> list[tuple[int, str]]:
    """(index, text) of the labels drawn along an axis: all where they fit, else every k-th with its position."""
    stride = max(1, math.ceil(LABEL_PITCH / cell))
    if stride == 1:
        return [(i, short_token(t)) for i, t in enumerate(tokens)]
    return [(i, f"{positions[i]}·{short_token(tokens[i])}") for i in range(0, len(tokens), stride)]


def _label_width(ticks: Sequence[Sequence[Any]]) -> int:
    return math.ceil(max((len(t[1]) for t in ticks), default=1) * CHAR_W) + 6


def heatmap_layout(rows: int, cols: int, row_ticks: Sequence[tuple[int, str]], col_ticks: Sequence[tuple[int, str]],
                   title: str, note: str, bar_ticks: Sequence[tuple[float, str]]) -> dict[str, int]:
    """Pixel positions of the matrix, labels, title and colour bar (the live view draws with the same numbers)."""
    cell = cell_size(rows, cols)
    row_w, col_h = _label_width(row_ticks), _label_width(col_ticks)
    top = 30 + (NOTE_FONT + 8 if note else 0)
    left = 24 + row_w
    width, height = cols * cell, rows * cell
    bar_h = max(height, BAR_MIN_H)
    bar_x = left + width + 24
    total_w = max(bar_x + BAR_W + 6 + _label_width(bar_ticks) + 28, math.ceil(len(title) * 7.6) + 20,
                  math.ceil(len(note) * 6.4) + 20)
    total_h = top + max(height + 6 + col_h + 24, bar_h) + 10
    return {"cell": cell, "left": left, "top": top, "width": width, "height": height, "row_label_w": row_w,
            "col_label_h": col_h, "bar_x": bar_x, "bar_w": BAR_W, "bar_h": bar_h, "total_w": total_w,
            "total_h": total_h}


def colorbar(x: float, y: float, height: float, palette: np.ndarray, ticks: Sequence[Sequence[Any]],
             title: str) -> str:
    """A vertical colour bar (code 0 at the bottom), ticks in real weights at their positions, a rotated title.

    The bands are data colours; frame, ticks and labels take the theme's colours from figure.css.
    """
    bands = 128  # stacked bands rather than a gradient: no element ids to clash between figures on one page
    parts = ['<g class="bvl-colorbar"><g shape-rendering="crispEdges">']
    for band in range(bands):
        red, green, blue = palette[round(band * D.TOP_CODE / (bands - 1))]
        y0, y1 = y + height * (1 - (band + 1) / bands), y + height * (1 - band / bands)
        parts.append(f'<rect x="{x}" y="{y0:.2f}" width="{BAR_W}" height="{y1 - y0 + 0.3:.2f}" '
                     f'fill="#{red:02x}{green:02x}{blue:02x}"/>')
    parts.append(f'</g><rect class="bvl-rule" x="{x}" y="{y}" width="{BAR_W}" height="{height}" stroke-width="0.5"/>')
    for position, label in ticks:
        ty = y + height * (1 - position)
        parts.append(f'<line class="bvl-rule" x1="{x + BAR_W}" y1="{ty:.1f}" x2="{x + BAR_W + 4}" y2="{ty:.1f}"/>'
                     f'<text class="bvl-colorbar-tick bvl-mono" x="{x + BAR_W + 6}" y="{ty + 4:.1f}" '
                     f'font-size="{LABEL_FONT}">{escape(label)}</text>')
    cx, cy = x + BAR_W + 6 + _label_width(ticks) + 12, y + height / 2
    parts.append(f'<text class="bvl-colorbar-title" transform="translate({cx:.1f},{cy:.1f}) rotate(90)" '
                 f'text-anchor="middle" font-size="12">{escape(title)}</text></g>')
    return "".join(parts)


def figure_header(css_class: str, box: dict[str, Any], title: str, note: str) -> list[str]:
    """The opening of a figure's SVG: its size, root classes `bvl-fig <css_class>`, the theme's ground, the title and
    the note under it (escaped); colours and fonts come from figure.css."""
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="bvl-fig {escape(css_class)}" width="{box["total_w"]}" '
             f'height="{box["total_h"]}" font-size="{LABEL_FONT}">'
             '<rect class="bvl-ground" width="100%" height="100%"/>'
             f'<text class="bvl-title" x="8" y="20" font-size="{TITLE_FONT}" font-weight="bold">{escape(title)}</text>']
    if note:
        parts.append(f'<text class="bvl-note bvl-muted" x="8" y="{20 + NOTE_FONT + 6}" font-size="{NOTE_FONT}">'
                     f"{escape(note)}</text>")
    return parts


def heatmap_svg(state: dict[str, Any], values: np.ndarray | None = None) -> str:
    """A heatmap view's synced state as a standalone SVG document: title, axes, token labels, cells, colour bar.

    values, the exact weights, become each cell's tooltip where cells are drawn one by one.
    """
    box = state["geometry"]
    rows, cols = len(state["row_tokens"]), len(state["col_tokens"])
    codes = np.frombuffer(bytes(state["codes"]), dtype=np.uint8).reshape(rows, cols)
    palette = np.frombuffer(bytes(state["palette"]), dtype=np.uint8).reshape(256, 3)
    cell, left, top = box["cell"], box["left"], box["top"]
    parts = figure_header("bvl-heatmap", box, state["title"], state["note"])
    if rows * cols <= RECT_LIMIT:
        parts.append('<g class="bvl-cells" shape-rendering="crispEdges">')
        for r in range(rows):
            for c in range(cols):
                red, green, blue = palette[codes[r, c]]
                tip = "" if values is None else (
                    f"<title>{escape(state['row_tokens'][r])} → {escape(state['col_tokens'][c])}: "
                    f"{D.weight_text(float(values[r, c]))}</title>")
                parts.append(f'<rect x="{left + c * cell}" y="{top + r * cell}" width="{cell}" height="{cell}" '
                             f'fill="#{red:02x}{green:02x}{blue:02x}">{tip}</rect>')
        parts.append("</g>")
    elif rows and cols:
        data = base64.b64encode(png(codes, palette)).decode("ascii")
        parts.append(f'<image class="bvl-cells" x="{left}" y="{top}" width="{cols * cell}" height="{rows * cell}" '
                     'preserveAspectRatio="none" image-rendering="optimizeSpeed" style="image-rendering:pixelated" '
                     f'href="data:image/png;base64,{data}"/>')
    parts.append(f'<rect x="{left}" y="{top}" width="{cols * cell}" height="{rows * cell}" fill="none" '
                 'stroke="#888" stroke-width="0.5"/>')
    for r, text in state["row_ticks"]:
        y = top + (r + 0.5) * cell + LABEL_FONT * 0.35
        parts.append(f'<text class="bvl-token bvl-query" x="{left - 4}" y="{y:.1f}" text-anchor="end">'
                     f"{_label(text, state['row_tokens'][r])}</text>")
    for c, text in state["col_ticks"]:
        x = left + (c + 0.5) * cell + LABEL_FONT * 0.35
        parts.append(f'<text class="bvl-token bvl-key" transform="translate({x:.1f},{top + rows * cell + 4}) '
                     f'rotate(-90)" text-anchor="end">{_label(text, state["col_tokens"][c])}</text>')
    axis = 'font-family="sans-serif" font-size="12" fill="#333" text-anchor="middle" class="bvl-axis-title"'
    parts.append(f'<text transform="translate(12,{top + rows * cell / 2:.1f}) rotate(-90)" {axis}>query</text>')
    parts.append(f'<text x="{left + cols * cell / 2:.1f}" y="{top + rows * cell + box["col_label_h"] + 20}" '
                 f"{axis}>key</text>")
    parts.append(colorbar(box["bar_x"], top, box["bar_h"], palette, state["bar_ticks"], state["bar_title"]))
    parts.append("</svg>")
    return "".join(parts)


