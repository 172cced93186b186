"""The attention heatmap as one SVG drawing: title, token axes, cells (one <rect> each, or one embedded PNG when
there are many), colour bar; and the pieces other attention figures share (PNG of palette codes, colour bar, header).

The drawing is the whole figure: the live view shows this very document, the static copy and exports hold it. A long
text is read through a window (a range of query rows and key columns): the colour scale stays the whole matrix's, so
panning keeps colours comparable, and every token in a window of up to ~45 is labelled. Cells beyond the colour scale
(clipped [CLS]/[SEP]) are drawn in the overflow colour with a hatch and an outline, and the colour bar's overflow end
names their largest true value.
"""

from __future__ import annotations

import base64
import math
import struct
import zlib
from typing import Any, Sequence

import numpy as np

from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.palette import OVERFLOW_COLOR
from bertviz_lab.widgets.figures.text import escape, short_token

LABEL_FONT = 11  # px, monospace: ~0.6 em a character
CHAR_W = 6.7
TITLE_FONT, NOTE_FONT = 14, 12
MAX_SIDE, MAX_CELL = 600, 28  # the matrix is at most MAX_SIDE px a side, at one whole pixel (or more) per cell
LABEL_PITCH = 13  # px between two token labels; at small cells only every k-th token is labelled
RECT_LIMIT = 64 * 64  # up to this many cells the SVG draws one <rect> each, beyond one embedded PNG
BAR_W, BAR_MIN_H = 14, 160
OVER_H, OVER_GAP = 14, 6  # px: the colour bar's overflow end, and the gap between it and the scale
MIN_MARKED_CELL = 3  # px: from this cell size up, a clipped cell also carries an outline and a hatch (its ink,
# heatmap.css's .bvl-clipped-mark, is the one that reads on the overflow colour: ink_on(OVERFLOW_COLOR))


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


def cell_sides(rows: int, cols: int) -> tuple[int, int]:
    """Whole pixels (width, height) of a cell of a window, each side on its own: a band of 32 queries against every
    key gets rows tall enough to label, whatever its width."""
    return max(1, min(MAX_CELL, MAX_SIDE // max(cols, 1))), max(1, min(MAX_CELL, MAX_SIDE // max(rows, 1)))


def tick_labels(tokens: Sequence[str], positions: Sequence[int], cell: int,
                numbered: bool = False) -> list[tuple[int, str]]:
    """(index, text) of the labels drawn along an axis: all where they fit (with their positions when `numbered`),
    else every k-th with its position."""
    stride = max(1, math.ceil(LABEL_PITCH / cell))
    if stride == 1:
        if numbered:
            return [(i, f"{positions[i]}·{short_token(t)}") for i, t in enumerate(tokens)]
        return [(i, short_token(t)) for i, t in enumerate(tokens)]
    return [(i, f"{positions[i]}·{short_token(tokens[i])}") for i in range(0, len(tokens), stride)]


def _label_width(ticks: Sequence[Sequence[Any]]) -> int:
    return math.ceil(max((len(t[1]) for t in ticks), default=1) * CHAR_W) + 6


def heatmap_layout(rows: int, cols: int, row_ticks: Sequence[tuple[int, str]], col_ticks: Sequence[tuple[int, str]],
                   title: str, note: str, bar_ticks: Sequence[tuple[float, str]],
                   sides: tuple[int, int] | None = None) -> dict[str, int]:
    """Pixel positions of the matrix, labels, title and colour bar; `sides` (width, height) of a cell where they
    differ (default: square cells of cell_size)."""
    cell = cell_size(rows, cols)
    cell_w, cell_h = sides or (cell, cell)
    row_w, col_h = _label_width(row_ticks), _label_width(col_ticks)
    top = 30 + (NOTE_FONT + 8 if note else 0)
    left = 24 + row_w
    width, height = cols * cell_w, rows * cell_h
    bar_h = max(height, BAR_MIN_H)
    bar_x = left + width + 24
    total_w = max(bar_x + BAR_W + 6 + _label_width(bar_ticks) + 28, math.ceil(len(title) * 7.6) + 20,
                  math.ceil(len(note) * 6.4) + 20)
    total_h = top + max(height + 6 + col_h + 24, bar_h) + 10
    return {"cell": cell_h, "cell_w": cell_w, "left": left, "top": top, "width": width, "height": height,
            "row_label_w": row_w, "col_label_h": col_h, "bar_x": bar_x, "bar_w": BAR_W, "bar_h": bar_h,
            "total_w": total_w, "total_h": total_h}


def overflow_label(top: float) -> str:
    """What the colour bar's overflow end says: the cells beyond the scale are clipped, and their largest value."""
    return f"clipped, max {top:.3g}"


def colorbar(x: float, y: float, height: float, palette: np.ndarray, ticks: Sequence[Sequence[Any]],
             title: str, overflow: float | None = None) -> str:
    """A vertical colour bar (code 0 at the bottom), ticks in real weights at their positions, a rotated title; with
    `overflow` (the largest value beyond the scale) an overflow end on top, hatched as the clipped cells are, that
    names it.

    The bands are data colours; frame, ticks and labels take the theme's colours from figure.css.
    """
    bands = 128  # stacked bands rather than a gradient: no element ids to clash between figures on one page
    parts = ['<g class="bvl-colorbar">']
    labels = list(ticks)
    if overflow is not None:
        label = overflow_label(overflow)
        parts.append(f'<g class="bvl-colorbar-overflow" data-max="{overflow:.6g}">'
                     f'<rect x="{x}" y="{y}" width="{BAR_W}" height="{OVER_H}" fill="{OVERFLOW_COLOR}"/>'
                     f'<path class="bvl-clipped-mark" d="{_hatch(x, y, BAR_W, OVER_H)}"/>'
                     f'<rect class="bvl-rule" x="{x}" y="{y}" width="{BAR_W}" height="{OVER_H}" stroke-width="0.5"/>'
                     f'<text class="bvl-colorbar-overflow-label bvl-mono" x="{x + BAR_W + 6}" y="{y + OVER_H - 3}" '
                     f'font-size="{LABEL_FONT}">{escape(label)}</text></g>')
        y, height = y + OVER_H + OVER_GAP, height - OVER_H - OVER_GAP
        labels.append((0.0, label))
    parts.append('<g shape-rendering="crispEdges">')
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
    cx, cy = x + BAR_W + 6 + _label_width(labels) + 12, y + height / 2
    parts.append(f'<text class="bvl-colorbar-title" transform="translate({cx:.1f},{cy:.1f}) rotate(90)" '
                 f'text-anchor="middle" font-size="12">{escape(title)}</text></g>')
    return "".join(parts)


def band_colors(palette: np.ndarray, bands: int = 64) -> list[str]:
    """`bands` colours of a palette of codes, evenly from code 0 to the top one, as #rrggbb."""
    return ["#%02x%02x%02x" % tuple(palette[round(band * D.TOP_CODE / (bands - 1))]) for band in range(bands)]


def colorbar_across(x: float, y: float, width: float, height: float, colors: Sequence[str],
                    ticks: Sequence[Sequence[Any]], title: str, title_x: float | None = None, title_gap: float = 5,
                    title_font: int = LABEL_FONT) -> str:
    """A horizontal colour bar of stacked bands of `colors` (left to right) with its title above (at `title_x`,
    default the bar's left, `title_gap` px over it) and ticks (position 0..1 from the left, label) below: for
    figures that have no room on their right. Stacked bands rather than a gradient: no element ids to clash between
    figures on one page."""
    bands = len(colors)
    parts = [f'<g class="bvl-colorbar"><text class="bvl-colorbar-title" x="{x if title_x is None else title_x}" '
             f'y="{y - title_gap}" font-size="{title_font}">{escape(title)}</text><g shape-rendering="crispEdges">']
    for band, color in enumerate(colors):
        parts.append(f'<rect x="{x + width * band / bands:.2f}" y="{y}" width="{width / bands + 0.3:.2f}" '
                     f'height="{height}" fill="{color}"/>')
    parts.append(f'</g><rect class="bvl-rule" x="{x}" y="{y}" width="{width}" height="{height}" stroke-width="0.5"/>')
    for position, label in ticks:
        tx = x + width * position
        parts.append(f'<line class="bvl-rule" x1="{tx:.1f}" y1="{y + height}" x2="{tx:.1f}" y2="{y + height + 4}"/>'
                     f'<text class="bvl-colorbar-tick bvl-mono" x="{tx:.1f}" y="{y + height + 15}" '
                     f'text-anchor="middle" font-size="{LABEL_FONT}">{escape(label)}</text>')
    parts.append("</g>")
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


def _hatch(x: float, y: float, width: float, height: float) -> str:
    """Path data of a box's hatch: its two diagonals' halves from the lower left, inside the box."""
    return (f"M{x:g},{y + height:g}l{width:g},{-height:g}M{x:g},{y + height / 2:g}l{width / 2:g},{-height / 2:g}"
            f"M{x + width / 2:g},{y + height:g}l{width / 2:g},{-height / 2:g}")


def clipped_marks(codes: np.ndarray, left: float, top: float, cell_w: int, cell_h: int, css_class: str = "") -> str:
    """One path that outlines and hatches every cell beyond the colour scale (code 255), or '' when none is or the
    cells are too small to carry a mark (their overflow colour still sets them apart). Each cell's outline is the
    subpath `M{x},{y}h{width}v{height}h-{width}z`, inset half a pixel; `css_class` is added to the path's class (an
    ink class where the clipped cells' colour needs another ink than the overflow colour's black)."""
    rows, cols = np.nonzero(codes == D.OVER_CODE)
    if not len(rows) or min(cell_w, cell_h) < MIN_MARKED_CELL:
        return ""
    w, h = cell_w - 1, cell_h - 1
    parts = []
    for r, c in zip(rows.tolist(), cols.tolist()):
        x, y = left + c * cell_w + 0.5, top + r * cell_h + 0.5
        parts.append(f"M{x:g},{y:g}h{w}v{h}h-{w}z" + (_hatch(x, y, w, h) if min(w, h) >= 7 else ""))
    classes = f"bvl-clipped-mark {escape(css_class)}" if css_class else "bvl-clipped-mark"
    return f'<path class="{classes}" data-cells="{len(rows)}" d="{"".join(parts)}"/>'


def window_slices(window: Sequence[int] | None, rows: int, cols: int) -> tuple[slice, slice]:
    """The rows and columns (matrix indices) a window (row_start, row_end, col_start, col_end; ends excluded) shows;
    None shows all."""
    if window is None:
        return slice(0, rows), slice(0, cols)
    r0, r1, c0, c1 = (int(v) for v in window)
    if not (0 <= r0 < r1 <= rows and 0 <= c0 < c1 <= cols):
        raise ValueError(f"window {tuple(window)} must be (row_start, row_end, col_start, col_end) with "
                         f"0 <= start < end <= {rows} rows and {cols} columns")
    return slice(r0, r1), slice(c0, c1)


def window_title(title: str, row_positions: Sequence[int], col_positions: Sequence[int],
                 window: Sequence[int] | None) -> str:
    """The title of a drawing with its window, by token position (ends included):
    'layer 3 · … · queries 96–127 · keys 96–127 of 512'."""
    if window is None:
        return title
    rows, cols = window_slices(window, len(row_positions), len(col_positions))
    total = max(len(row_positions), len(col_positions))
    return (f"{title} · queries {row_positions[rows.start]}–{row_positions[rows.stop - 1]} · "
            f"keys {col_positions[cols.start]}–{col_positions[cols.stop - 1]} of {total}")


def heatmap_svg(matrix: np.ndarray, row_tokens: Sequence[str], col_tokens: Sequence[str],
                row_positions: Sequence[int], col_positions: Sequence[int], title: str, note: str = "",
                mode: str = "linear", ignore_rows: np.ndarray | None = None,
                ignore_cols: np.ndarray | None = None, window: Sequence[int] | None = None,
                selected: tuple[int, int] | None = None) -> str:
    """One attention matrix as a standalone SVG document: title, note, token axes, cells, frame, colour bar.

    mode and ignore_rows/ignore_cols ([CLS]/[SEP] when clipped) choose the colours (attention_data.encode_heatmap),
    over the whole matrix; window (row_start, row_end, col_start, col_end; matrix indices, ends excluded) draws only
    those rows and columns (each side of a cell sized on its own), and the title says which; selected (row, col)
    outlines that cell.
    The cell area (class bvl-cells) says where its cells are for hover: data-rows, data-cols (the cells drawn),
    data-row0, data-col0 (the first one's row and column in the matrix), data-x, data-y (its top-left corner) and
    data-cell-w, data-cell-h (a cell's sides; data-cell too where they are equal), all in the SVG's pixels; data-top
    is the weight at the top of a single colour scale (absent for the per-row scale).
    """
    all_rows, all_cols = len(row_tokens), len(col_tokens)
    values = np.asarray(matrix, dtype=np.float64).reshape(all_rows, all_cols)
    encoded = D.encode_heatmap(values, mode, ignore_rows, ignore_cols)
    row_span, col_span = window_slices(window, all_rows, all_cols)
    title = window_title(title, row_positions, col_positions, window)
    codes = encoded.codes[row_span, col_span]
    shown = D.HeatmapCodes(codes, encoded.mode, encoded.scale, encoded.row_scales[row_span] if mode == "row"
                           else encoded.row_scales, encoded.log_range)
    over = D.overflow_max(values[row_span, col_span], shown)
    bar_ticks, bar_title = D.colorbar_ticks(encoded)
    bar_labels = bar_ticks + ([(0.0, overflow_label(over))] if over is not None else [])
    rows, cols = codes.shape
    cell = cell_size(rows, cols)
    cell_w, cell_h = cell_sides(rows, cols) if window is not None else (cell, cell)
    row_tokens, col_tokens = list(row_tokens)[row_span], list(col_tokens)[col_span]
    row_positions, col_positions = list(row_positions)[row_span], list(col_positions)[col_span]
    row_ticks = tick_labels(row_tokens, row_positions, cell_h, numbered=window is not None)
    col_ticks = tick_labels(col_tokens, col_positions, cell_w, numbered=window is not None)
    box = heatmap_layout(rows, cols, row_ticks, col_ticks, title, note, bar_labels, (cell_w, cell_h))
    left, top = box["left"], box["top"]
    width, height = cols * cell_w, rows * cell_h
    parts = figure_header("bvl-heatmap", box, title, note)
    scale_top = D.scale_top(encoded)
    area = (f'class="bvl-cells" data-rows="{rows}" data-cols="{cols}" data-row0="{row_span.start}" '
            f'data-col0="{col_span.start}" data-x="{left}" data-y="{top}" data-cell-w="{cell_w}" '
            f'data-cell-h="{cell_h}"' + (f' data-cell="{cell_w}"' if cell_w == cell_h else "")
            + (f' data-top="{scale_top:.6g}"' if scale_top is not None else ""))
    if rows * cols <= RECT_LIMIT:
        parts.append(f'<g {area} shape-rendering="crispEdges">')
        colours = [f"#{r:02x}{g:02x}{b:02x}" for r, g, b in D.HEATMAP_PALETTE]
        for r in range(rows):
            for c in range(cols):
                parts.append(f'<rect x="{left + c * cell_w}" y="{top + r * cell_h}" width="{cell_w}" height="{cell_h}" '
                             f'fill="{colours[codes[r, c]]}"/>')
        parts.append("</g>")
    else:
        data = base64.b64encode(png(codes, D.HEATMAP_PALETTE)).decode("ascii")
        parts.append(f'<image {area} x="{left}" y="{top}" width="{width}" height="{height}" '
                     'preserveAspectRatio="none" image-rendering="optimizeSpeed" style="image-rendering:pixelated" '
                     f'href="data:image/png;base64,{data}"/>')
    parts.append(clipped_marks(codes, left, top, cell_w, cell_h))
    parts.append(f'<rect class="bvl-rule bvl-frame" x="{left}" y="{top}" width="{width}" height="{height}" '
                 'stroke-width="0.5"/>')
    if selected is not None:
        r, c = selected[0] - row_span.start, selected[1] - col_span.start
        if 0 <= r < rows and 0 <= c < cols:
            at = f'x="{left + c * cell_w}" y="{top + r * cell_h}" width="{cell_w}" height="{cell_h}"'
            parts.append(f'<g class="bvl-selected-cell" data-row="{selected[0]}" data-col="{selected[1]}">'
                         f'<rect class="bvl-heatmap-mark-halo" {at}/><rect class="bvl-heatmap-mark-line" {at}/></g>')
    for r, text in row_ticks:
        y = top + (r + 0.5) * cell_h + LABEL_FONT * 0.35
        parts.append(f'<text class="bvl-token bvl-query" x="{left - 4}" y="{y:.1f}" text-anchor="end">'
                     f"{_label(text, row_tokens[r])}</text>")
    for c, text in col_ticks:
        x = left + (c + 0.5) * cell_w + LABEL_FONT * 0.35
        parts.append(f'<text class="bvl-token bvl-key" transform="translate({x:.1f},{top + height + 4}) '
                     f'rotate(-90)" text-anchor="end">{_label(text, col_tokens[c])}</text>')
    axis = 'class="bvl-axis-title" font-size="12" text-anchor="middle"'
    parts.append(f'<text {axis} transform="translate(12,{top + height / 2:.1f}) rotate(-90)">query</text>')
    parts.append(f'<text {axis} x="{left + width / 2:.1f}" y="{top + height + box["col_label_h"] + 20}">key</text>')
    parts.append(colorbar(box["bar_x"], top, box["bar_h"], D.HEATMAP_PALETTE, bar_ticks, bar_title, over))
    parts.append("</svg>")
    return "".join(parts)
