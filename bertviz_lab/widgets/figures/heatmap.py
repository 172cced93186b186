"""The attention heatmap as one SVG drawing: title, token axes, cells (one <rect> each, or one embedded PNG when
there are many), colour bar; and the pieces other attention figures share (PNG of palette codes, colour bar, header).

The drawing is the whole figure: the live view shows this very document, the static copy and exports hold it.
"""

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
RECT_LIMIT = 64 * 64  # up to this many cells the SVG draws one <rect> each, beyond one embedded PNG
BAR_W, BAR_MIN_H = 14, 160


def png(codes: np.ndarray, palette: np.ndarray) -> bytes:
    """A palette PNG (colour type 3) with one pixel per code: zlib-compressed rows, no imaging library needed.

    zlib's fastest level: a 512 x 512 map in 6 ms instead of 14 ms, for 3% more bytes (it is drawn on every change)."""
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    height, width = codes.shape

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = np.concatenate([np.zeros((height, 1), np.uint8), codes], axis=1)  # filter byte 0 before each row
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 3, 0, 0, 0))
            + chunk(b"PLTE", np.ascontiguousarray(palette, dtype=np.uint8).tobytes())
            + chunk(b"IDAT", zlib.compress(rows.tobytes(), 1)) + chunk(b"IEND", b""))


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
    """Pixel positions of the matrix, labels, title and colour bar."""
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


def heatmap_svg(matrix: np.ndarray, row_tokens: Sequence[str], col_tokens: Sequence[str],
                row_positions: Sequence[int], col_positions: Sequence[int], title: str, note: str = "",
                mode: str = "linear", ignore_rows: np.ndarray | None = None,
                ignore_cols: np.ndarray | None = None) -> str:
    """One attention matrix as a standalone SVG document: title, note, token axes, cells, frame, colour bar.

    mode and ignore_rows/ignore_cols ([CLS]/[SEP] when clipped) choose the colours (attention_data.encode_heatmap).
    The cell area (class bvl-cells) says where its cells are for hover: data-rows, data-cols, data-x, data-y (its
    top-left corner) and data-cell (the side of one cell), all in the SVG's pixels.
    """
    rows, cols = len(row_tokens), len(col_tokens)
    values = np.asarray(matrix, dtype=np.float64).reshape(rows, cols)
    encoded = D.encode_heatmap(values, mode, ignore_rows, ignore_cols)
    bar_ticks, bar_title = D.colorbar_ticks(encoded)
    cell = cell_size(rows, cols)
    row_ticks = tick_labels(list(row_tokens), list(row_positions), cell)
    col_ticks = tick_labels(list(col_tokens), list(col_positions), cell)
    box = heatmap_layout(rows, cols, row_ticks, col_ticks, title, note, bar_ticks)
    left, top = box["left"], box["top"]
    width, height = cols * cell, rows * cell
    parts = figure_header("bvl-heatmap", box, title, note)
    area = (f'class="bvl-cells" data-rows="{rows}" data-cols="{cols}" data-x="{left}" data-y="{top}" '
            f'data-cell="{cell}"')
    if rows * cols <= RECT_LIMIT:
        parts.append(f'<g {area} shape-rendering="crispEdges">')
        colours = [f"#{r:02x}{g:02x}{b:02x}" for r, g, b in D.PALETTE]
        for r in range(rows):
            for c in range(cols):
                parts.append(f'<rect x="{left + c * cell}" y="{top + r * cell}" width="{cell}" height="{cell}" '
                             f'fill="{colours[encoded.codes[r, c]]}"/>')
        parts.append("</g>")
    else:
        data = base64.b64encode(png(encoded.codes, D.PALETTE)).decode("ascii")
        parts.append(f'<image {area} x="{left}" y="{top}" width="{width}" height="{height}" '
                     'preserveAspectRatio="none" image-rendering="optimizeSpeed" style="image-rendering:pixelated" '
                     f'href="data:image/png;base64,{data}"/>')
    parts.append(f'<rect class="bvl-rule bvl-frame" x="{left}" y="{top}" width="{width}" height="{height}" '
                 'stroke-width="0.5"/>')
    for r, text in row_ticks:
        y = top + (r + 0.5) * cell + LABEL_FONT * 0.35
        parts.append(f'<text class="bvl-token bvl-query" x="{left - 4}" y="{y:.1f}" text-anchor="end">'
                     f"{_label(text, row_tokens[r])}</text>")
    for c, text in col_ticks:
        x = left + (c + 0.5) * cell + LABEL_FONT * 0.35
        parts.append(f'<text class="bvl-token bvl-key" transform="translate({x:.1f},{top + height + 4}) '
                     f'rotate(-90)" text-anchor="end">{_label(text, col_tokens[c])}</text>')
    axis = 'class="bvl-axis-title" font-size="12" text-anchor="middle"'
    parts.append(f'<text {axis} transform="translate(12,{top + height / 2:.1f}) rotate(-90)">query</text>')
    parts.append(f'<text {axis} x="{left + width / 2:.1f}" y="{top + height + box["col_label_h"] + 20}">key</text>')
    parts.append(colorbar(box["bar_x"], top, box["bar_h"], D.PALETTE, bar_ticks, bar_title))
    parts.append("</svg>")
    return "".join(parts)
