"""The neuron view as one SVG drawing: inside one attention head, how one query's vector q meets each key's k_j.

For one query it draws q (top row), every shown key's k_j (one row per key), their elementwise product q ⊙ k_j (its
sum over the dimensions, divided by √d, is the score), the score q·k_j/√d as a bar from a centre line, the softmax
weight as a bar, the key tokens and the two diverging colour scales. The vector blocks are one embedded PNG each.

What the live view's hover and keys need is written into the drawing as data- attributes:
- root: data-title, data-query (the query's position), data-rows (key rows drawn), data-head-size, data-keys (every
  key shown, in or out of the window), data-first (the window's first row among them), data-query-row (the query's
  row among them, -1 for none);
- each vector block (<image class="bvl-block">): data-block (q, k or products), data-x, data-y, data-rows,
  data-cols, data-cell-w, data-row-h (its top-left corner and cell size, in the SVG's pixels);
- the key rows (<g class="bvl-key-rows">, score and weight bars, one row per key, top to bottom): data-x, data-y,
  data-row-h, data-rows and data-right (where the rows are);
- each key label (text.bvl-key): data-index (its row in the window) and data-position (the key's position in the
  input);
- the lines counting the keys above and below a window (text.bvl-off-window): data-where, data-count.
"""

from __future__ import annotations

import base64
import math
from typing import Any, Sequence

import numpy as np

from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.head_view import window_first
from bertviz_lab.widgets.figures.heatmap import (
    CHAR_W,
    LABEL_FONT,
    NOTE_FONT,
    band_colors,
    colorbar_across,
    figure_header,
    png,
    tick_labels,
)
from bertviz_lab.widgets.figures.text import escape, minus

MAX_ROWS_H = 640  # px: the key rows fill at most this height, at one whole pixel (or more) per row
WINDOW_KEYS = 48  # key rows drawn at once: 13 px each, numbers printed, whatever the text's length
MAX_ROW_H, MAX_CELL_W = 16, 12
BLOCK_W = 192  # px: a vector block is at most this wide (6 px a dimension at 32, 3 px at 64)
BAR_ZONE = 48  # px of the score and weight bars; their numbers follow when rows are tall enough
NUMBER_ROW_H = 12  # rows at least this tall print the score and weight beside their bars
NUMBER_W = 40  # px of the numbers printed after a bar
EDGE_ROW = 16  # px of the line that counts the keys above (or below) a window
SCALE_W, SCALE_H = 176, 10  # px of each horizontal colour bar, under its block
HEADER_CHAR_W = 6.6  # px a character of a 12 px header, for the figure's width
POSITIVE, NEGATIVE, WEIGHT = "#d6604d", "#4393c3", "#2171b5"  # data colours: score above / below zero, weight
VECTOR_SCALE, PRODUCT_SCALE = "q, k: value per dimension", "q ⊙ k: product per dimension"


def row_height(rows: int) -> int:
    """Whole pixels per key row: as tall as fits in MAX_ROWS_H, at least one."""
    return max(1, min(MAX_ROW_H, MAX_ROWS_H // max(rows, 1)))


def key_window(keys: int, first: int, query_row: int = -1) -> tuple[int, int]:
    """(first, count) of the key rows drawn: every key of a short text; of a long one WINDOW_KEYS from `first`, moved
    as little as it takes to show the query's row (-1: none)."""
    count = min(keys, WINDOW_KEYS)
    return window_first(query_row, first, keys, count), count


def _label_width(texts: Sequence[str]) -> int:
    return math.ceil(max((len(t) for t in texts), default=1) * CHAR_W) + 6


def note_lines(note: str) -> list[str]:
    """The note under the title, one line per part (a long note would widen the figure past a notebook's column)."""
    return [line for line in note.split("\n") if line]


def neuron_layout(rows: int, head_size: int, key_labels: Sequence[str], title: str, note: str,
                  headers: Sequence[str], windowed: bool = False) -> dict[str, int]:
    """Pixel positions of the blocks, bars, labels and colour bars of a figure with `rows` key rows of `head_size`:
    at most ~790 px wide (a notebook's output column) with 16-character tokens; `headers` are the four column
    headers (the last one may run past the weight bars)."""
    row_h = row_height(rows)
    cell_w = max(2, min(MAX_CELL_W, BLOCK_W // max(head_size, 1)))
    label_w = _label_width([*key_labels, "q"])
    lines = note_lines(note)
    top = 30 + len(lines) * (NOTE_FONT + 6) + (2 if lines else 0)
    header_y, q_y, q_h = top + 14, top + 22, 14
    keys_top = q_y + q_h + 10 + (EDGE_ROW if windowed else 0)
    k_x = 8 + label_w + 6
    block_w = head_size * cell_w
    p_x = k_x + block_w + 12
    numbers = row_h >= NUMBER_ROW_H
    number_w = NUMBER_W if numbers else 0
    s_x = p_x + block_w + 16
    w_x = s_x + BAR_ZONE + number_w + 6
    row_right = w_x + BAR_ZONE + number_w
    rows_end = keys_top + rows * row_h + (EDGE_ROW if windowed else 0)
    scale_y = rows_end + 26  # the colour bars' titles above them, ticks below
    total_w = max(row_right + 8, p_x + SCALE_W + 30, math.ceil(w_x + len(headers[-1]) * HEADER_CHAR_W) + 8,
                  math.ceil(len(title) * 7.6) + 20, *(math.ceil(len(line) * 6.4) + 20 for line in lines))
    total_h = scale_y + SCALE_H + 24
    return {"row_h": row_h, "cell_w": cell_w, "label_w": label_w, "top": top, "header_y": header_y, "q_y": q_y,
            "q_h": q_h, "keys_top": keys_top, "k_x": k_x, "p_x": p_x, "s_x": s_x, "w_x": w_x, "block_w": block_w,
            "row_right": row_right, "numbers": int(numbers), "rows_end": rows_end, "scale_y": scale_y,
            "total_w": total_w, "total_h": total_h}


def weight_header(weight_top: float) -> str:
    """The softmax column's header: its bars are scaled to the largest weight shown, so diffuse heads stay visible."""
    return f"softmax · bar ÷ {weight_top:.3g}"


def _block(name: str, x: int, y: int, cell_w: int, row_h: int, values: np.ndarray, top: float) -> str:
    """A (rows, d) block of vectors as one palette PNG, one pixel per value, scaled up without smoothing."""
    codes = D.diverging_codes(values, top)
    rows, cols = codes.shape
    if not rows or not cols:
        return ""
    data = base64.b64encode(png(codes, D.DIVERGING)).decode("ascii")
    return (f'<image class="bvl-block bvl-{name}" data-block="{name}" data-x="{x}" data-y="{y}" data-rows="{rows}" '
            f'data-cols="{cols}" data-cell-w="{cell_w}" data-row-h="{row_h}" x="{x}" y="{y}" '
            f'width="{cols * cell_w}" height="{rows * row_h}" preserveAspectRatio="none" '
            f'image-rendering="optimizeSpeed" href="data:image/png;base64,{data}"/>')


def _root_data(svg_open: str, attributes: dict[str, Any]) -> str:
    """The figure's opening <svg ...> tag with data- attributes added (escaped)."""
    extra = " ".join(f'data-{name}="{escape(value)}"' for name, value in attributes.items())
    return svg_open.replace("<svg ", f"<svg {extra} ", 1)


def _off_window(x: int, y: int, count: int, where: str, weight: float) -> str:
    """The muted line that counts the keys a window leaves out above or below, and their share of the softmax."""
    if count <= 0:
        return ""
    arrow = "↑" if where == "above" else "↓"
    text = f"{arrow} {count} more key{'s' if count != 1 else ''} {where} · softmax {weight:.3g} in all"
    return (f'<text class="bvl-off-window bvl-muted" data-where="{where}" data-count="{count}" x="{x}" y="{y}" '
            f'font-size="{LABEL_FONT}">{escape(text)}</text>')


def neuron_svg(rows: D.NeuronRows, key_tokens: Sequence[str], key_positions: Sequence[int], query_token: str,
               query_position: int, title: str, note: str = "", first: int = 0) -> str:
    """One query's q, the keys' k_j, q ⊙ k_j, scores and softmax weights as a standalone SVG document.

    `rows` holds every key; a long text draws WINDOW_KEYS of them from `first` (key_window), on colour scales and bar
    lengths of all the keys, so moving the window keeps every colour and bar comparable. `note` may hold several
    lines, separated by newlines."""
    total, d = rows.k.shape if rows.k.ndim == 2 else (0, 0)
    if len(key_tokens) != total or len(key_positions) != total:
        raise ValueError(f"there are {total} key rows but {len(key_tokens)} key tokens and {len(key_positions)} "
                         "positions; give one token and position per row")
    every_position = [int(p) for p in key_positions]
    query_at = every_position.index(int(query_position)) if int(query_position) in every_position else -1
    first, n = key_window(total, first)
    shown = slice(first, first + n)
    positions, tokens = every_position[shown], list(key_tokens[shown])
    vector_top, product_top = D.symmetric_top(rows.q, rows.k), D.symmetric_top(rows.products)
    score_top, weight_top = D.symmetric_top(rows.scores), D.symmetric_top(rows.weights)
    vector_ticks, product_ticks = D.diverging_ticks(vector_top), D.diverging_ticks(product_top)
    row_h = row_height(n)
    key_ticks = tick_labels(tokens, positions, row_h)
    headers = ("k_j · dimensions →", "q ⊙ k_j", "q·k_j/√d", weight_header(weight_top))
    windowed = n < total
    box = neuron_layout(n, d, [t[1] for t in key_ticks], title, note, headers, windowed)
    keys_top, cell_w = box["keys_top"], box["cell_w"]
    query_row = query_at - first if first <= query_at < first + n else -1
    parts = _header(box, title, note)
    parts[0] = _root_data(parts[0], {"title": title, "query": int(query_position), "rows": n, "head-size": d,
                                     "first": first, "keys": total, "query-row": query_at})
    for x, text in zip((box["k_x"], box["p_x"], box["s_x"], box["w_x"]), headers):
        parts.append(f'<text class="bvl-header" x="{x}" y="{box["header_y"]}" font-size="12">{escape(text)}</text>')
    parts.append(f'<text class="bvl-token bvl-query-label bvl-mark" x="{box["k_x"] - 6}" '
                 f'y="{box["q_y"] + box["q_h"] - 3}" text-anchor="end" font-weight="bold">q'
                 f"<title>query {escape(f'{query_position}·{query_token}')}</title></text>")
    parts.append(_block("q", box["k_x"], box["q_y"], cell_w, box["q_h"], rows.q[None, :], vector_top))
    parts.append(_block("k", box["k_x"], keys_top, cell_w, row_h, rows.k[shown], vector_top))
    parts.append(_block("products", box["p_x"], keys_top, cell_w, row_h, rows.products[shown], product_top))
    for x in (box["k_x"], box["p_x"]):
        parts.append(f'<rect class="bvl-rule bvl-frame" x="{x}" y="{keys_top}" width="{d * cell_w}" '
                     f'height="{n * row_h}" stroke-width="0.5"/>')
    if windowed:
        weights = rows.weights.astype(np.float64)
        parts.append(_off_window(box["k_x"], keys_top - 4, first, "above", float(weights[:first].sum())))
        parts.append(_off_window(box["k_x"], keys_top + n * row_h + LABEL_FONT + 2, total - first - n, "below",
                                 float(weights[first + n:].sum())))
    centre = box["s_x"] + BAR_ZONE / 2
    parts.append(f'<line class="bvl-grid" x1="{centre}" x2="{centre}" y1="{keys_top}" y2="{keys_top + n * row_h}"/>')
    numbers = bool(box["numbers"])
    row_right = box["row_right"]
    bar_h = max(row_h - (1 if row_h > 3 else 0), 1)
    parts.append(f'<g class="bvl-key-rows" shape-rendering="crispEdges" data-x="{box["k_x"]}" data-y="{keys_top}" '
                 f'data-row-h="{row_h}" data-rows="{n}" data-right="{row_right}">')
    score_bars, weight_bars = ['<g class="bvl-score-bars">'], [f'<g class="bvl-weight-bars" fill="{WEIGHT}">']
    printed: list[str] = []
    number_x = (box["s_x"] + BAR_ZONE + 4, box["w_x"] + BAR_ZONE + 4)
    for r in range(n):
        y, score, weight = keys_top + r * row_h, float(rows.scores[first + r]), float(rows.weights[first + r])
        width = abs(score) / score_top * BAR_ZONE / 2
        score_bars.append(f'<rect x="{centre - width if score < 0 else centre:.2f}" y="{y}" width="{width:.2f}" '
                      f'height="{bar_h}" fill="{NEGATIVE if score < 0 else POSITIVE}"/>')
        weight_bars.append(f'<rect x="{box["w_x"]}" y="{y}" width="{weight / weight_top * BAR_ZONE:.2f}" '
                       f'height="{bar_h}"/>')
        if numbers:
            printed.append(f'<text class="bvl-score bvl-mono" x="{number_x[0]}" y="{y + row_h - 3}">'
                           f'{minus(f"{score:.2f}")}</text><text class="bvl-weight bvl-mono" x="{number_x[1]}" '
                           f'y="{y + row_h - 3}">{weight:.3f}</text>')
    parts += [*score_bars, "</g>", *weight_bars, "</g>", *printed, "</g>"]
    for r, text in key_ticks:
        mark = " bvl-mark" if r == query_row else ""
        weight_attr = ' font-weight="bold"' if r == query_row else ""
        parts.append(f'<text class="bvl-token bvl-key{mark}" data-index="{r}" data-position="{positions[r]}" '
                     f'x="{box["k_x"] - 6}" y="{keys_top + (r + 0.5) * row_h + LABEL_FONT * 0.35:.1f}" '
                     f'text-anchor="end"{weight_attr}>{escape(text)}</text>')
    if 0 <= query_row < n and row_h >= 3:
        parts.append(f'<rect class="bvl-query-row" x="{box["k_x"] - 1}" y="{keys_top + query_row * row_h - 0.5}" '
                     f'width="{row_right - box["k_x"] + 2}" height="{row_h + 1}" fill="none" stroke-width="1"/>')
    colors = band_colors(D.DIVERGING)
    parts.append(colorbar_across(box["k_x"], box["scale_y"], SCALE_W, SCALE_H, colors, vector_ticks, VECTOR_SCALE))
    parts.append(colorbar_across(box["p_x"], box["scale_y"], SCALE_W, SCALE_H, colors, product_ticks, PRODUCT_SCALE))
    parts.append("</svg>")
    return "".join(parts)


def _header(box: dict[str, Any], title: str, note: str) -> list[str]:
    """figure_header with the note's lines one under the other."""
    lines = note_lines(note)
    parts = figure_header("bvl-neuron", box, title, lines[0] if lines else "")
    for index, line in enumerate(lines[1:], start=2):
        parts.append(f'<text class="bvl-note bvl-muted" x="8" y="{20 + index * (NOTE_FONT + 6)}" '
                     f'font-size="{NOTE_FONT}">{escape(line)}</text>')
    return parts


def neuron_message_svg(message: str) -> str:
    """The figure when there is nothing to draw (no q and k to be had): a line saying why, as a standalone SVG."""
    width = math.ceil(len(message) * 7.2) + 24
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="bvl-fig bvl-neuron" width="{max(width, 320)}" '
            f'height="40" data-title="{escape(message)}" data-rows="0">'
            '<rect class="bvl-ground" width="100%" height="100%"/>'
            f'<text class="bvl-title bvl-warn" x="8" y="24" font-size="12">{escape(message)}</text></svg>')
