"""The neuron view: inside one attention head, how one query token's vector q meets each key's vector k_j.

For the selected layer, head and query it shows q, every shown key's k_j, their elementwise product q ⊙ k_j (its sum
over the dimensions, divided by √d, is the score), the score q·k_j/√d and the softmax weight, as bertviz's neuron
view does. Only the selected query's rows travel to the browser: q (d floats), K of the shown keys (n × d), the
products of that query (n × d), and n scores and weights, as float32 binary buffers. The live view (views/
neuron_view.js) and the SVG export draw from the same synced state and the same layout.
"""

from __future__ import annotations

import base64
import math
from typing import Any, Sequence

import anywidget
import numpy as np
import traitlets

from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.heatmap import (
    BAR_MIN_H,
    BAR_W,
    LABEL_FONT,
    NOTE_FONT,
    RECT_LIMIT,
    _label_width,
    colorbar,
    figure_header,
    png,
    tick_labels,
)
from bertviz_lab.widgets.figures.text import escape, short_token
from bertviz_lab.widgets.views.front_end import css, esm

MAX_ROWS_H = 640  # px: the key rows fill at most this height, at one whole pixel (or more) per row
MAX_ROW_H, MAX_CELL_W = 16, 12
BLOCK_W = 288  # px: a vector block is at most this wide
BAR_ZONE = 64  # px of the score and weight bars; their numbers follow when rows are tall enough
NUMBER_ROW_H = 12  # rows at least this tall print the score and weight beside their bars
POSITIVE, NEGATIVE, WEIGHT = "#d6604d", "#4393c3", "#2171b5"


def neuron_layout(rows: int, head_size: int, key_ticks: Sequence[Sequence[Any]], query_label: str, title: str,
                  note: str, vector_ticks: Sequence[Sequence[Any]], product_ticks: Sequence[Sequence[Any]]
                  ) -> dict[str, int]:
    """Pixel positions of the blocks, bars, labels and colour bars (the live view draws with the same numbers)."""
    row_h = max(1, min(MAX_ROW_H, MAX_ROWS_H // max(rows, 1)))
    cell_w = max(2, min(MAX_CELL_W, BLOCK_W // max(head_size, 1)))
    label_w = max(_label_width(key_ticks), _label_width([(0, query_label)]))
    top = 30 + (NOTE_FONT + 8 if note else 0)
    header_y, q_y, q_h = top + 14, top + 22, 14
    keys_top = q_y + q_h + 12
    k_x = 8 + label_w + 6
    block_w = head_size * cell_w
    p_x = k_x + block_w + 24
    s_x = p_x + block_w + 28
    w_x = s_x + BAR_ZONE + 48
    bar_x = w_x + BAR_ZONE + 56
    bar_h = max(keys_top - q_y + rows * row_h, BAR_MIN_H)
    bar2_x = bar_x + BAR_W + 6 + _label_width(vector_ticks) + 34
    total_w = max(bar2_x + BAR_W + 6 + _label_width(product_ticks) + 28, math.ceil(len(title) * 7.6) + 20,
                  math.ceil(len(note) * 6.4) + 20)
    total_h = max(keys_top + rows * row_h + 30, q_y + bar_h + 10)
    return {"row_h": row_h, "cell_w": cell_w, "label_w": label_w, "top": top, "header_y": header_y, "q_y": q_y,
            "q_h": q_h, "keys_top": keys_top, "k_x": k_x, "p_x": p_x, "s_x": s_x, "w_x": w_x, "block_w": block_w,
            "bar_zone": BAR_ZONE, "bar_x": bar_x, "bar2_x": bar2_x, "bar_w": BAR_W, "bar_h": bar_h,
            "total_w": total_w, "total_h": total_h}


def _hex(color: np.ndarray) -> str:
    return "#%02x%02x%02x" % tuple(int(c) for c in color)


def _block(x: int, y: int, cell_w: int, row_h: int, values: np.ndarray, top: float, palette: np.ndarray,
           labels: Sequence[str], what: str, css: str) -> str:
    """A (rows, d) block of vectors as coloured cells: one <rect> each (value as tooltip) or one palette PNG."""
    codes = D.diverging_codes(values, top)
    rows, cols = codes.shape
    if not rows or not cols:
        return ""
    if rows * cols > RECT_LIMIT:
        data = base64.b64encode(png(codes, palette)).decode("ascii")
        return (f'<image class="{css}" x="{x}" y="{y}" width="{cols * cell_w}" height="{rows * row_h}" '
                'preserveAspectRatio="none" image-rendering="optimizeSpeed" style="image-rendering:pixelated" '
                f'href="data:image/png;base64,{data}"/>')
    parts = [f'<g class="{css}" shape-rendering="crispEdges">']
    for r in range(rows):
        for c in range(cols):
            parts.append(f'<rect x="{x + c * cell_w}" y="{y + r * row_h}" width="{cell_w}" height="{row_h}" '
                         f'fill="{_hex(palette[codes[r, c]])}"><title>{escape(labels[r])} · dimension {c}: '
                         f'{what} = {float(values[r, c]):.4g}</title></rect>')
    parts.append("</g>")
    return "".join(parts)


def neuron_svg(state: dict[str, Any], rows: D.NeuronRows) -> str:
    """A neuron view's synced state as a standalone SVG document: title, q, K, q ⊙ K, scores, weights, colour bars."""
    box = state["geometry"]
    palette = np.frombuffer(bytes(state["palette"]), dtype=np.uint8).reshape(256, 3)
    tokens, positions = state["key_tokens"], state["key_positions"]
    n, d = rows.k.shape if rows.k.ndim == 2 else (0, 0)
    row_h, cell_w, keys_top = box["row_h"], box["cell_w"], box["keys_top"]
    query_label = f"{state['query_position']}·{state['query_token']}"
    named = [f"key {p}·{t}" for p, t in zip(positions, tokens)]
    parts = figure_header("bvl-neuron-view", box, state["title"], state["note"])
    header = 'class="bvl-header" font-family="sans-serif" font-size="12" fill="#333"'
    for x, text in ((box["k_x"], "q (top), k_j (one row per key) · dimensions →"), (box["p_x"], "q ⊙ k_j"),
                    (box["s_x"], "q·k_j/√d"), (box["w_x"], weight_header(state["weight_top"]))):
        parts.append(f'<text {header} x="{x}" y="{box["header_y"]}">{escape(text)}</text>')
    parts.append(f'<text class="bvl-token bvl-query" x="{box["k_x"] - 6}" y="{box["q_y"] + box["q_h"] - 3}" '
                 f'text-anchor="end" font-weight="bold" fill="#d62728">q · {escape(short_token(query_label))}'
                 f"<title>query {escape(query_label)}</title></text>")
    parts.append(_block(box["k_x"], box["q_y"], cell_w, box["q_h"], rows.q[None, :], state["vector_top"], palette,
                        [f"query {query_label}"], "q", "bvl-q"))
    parts.append(_block(box["k_x"], keys_top, cell_w, row_h, rows.k, state["vector_top"], palette, named, "k",
                        "bvl-k"))
    parts.append(_block(box["p_x"], keys_top, cell_w, row_h, rows.products, state["product_top"], palette, named,
                        "q ⊙ k", "bvl-products"))
    for x in (box["k_x"], box["p_x"]):
        parts.append(f'<rect x="{x}" y="{keys_top}" width="{d * cell_w}" height="{n * row_h}" fill="none" '
                     'stroke="#888" stroke-width="0.5"/>')
    zone, centre = box["bar_zone"], box["s_x"] + box["bar_zone"] / 2
    parts.append(f'<line x1="{centre}" x2="{centre}" y1="{keys_top}" y2="{keys_top + n * row_h}" stroke="#bbb"/>')
    numbers = row_h >= NUMBER_ROW_H
    score_top = state["score_top"]
    parts.append('<g class="bvl-scores" shape-rendering="crispEdges">')
    for r in range(n):
        y, score, weight = keys_top + r * row_h, float(rows.scores[r]), float(rows.weights[r])
        width = abs(score) / score_top * zone / 2
        tip = f"<title>{escape(named[r])}: q·k/√d = {score:.4g}, softmax = {weight:.4g}</title>"
        parts.append(f'<rect x="{centre - width if score < 0 else centre:.2f}" y="{y}" width="{width:.2f}" '
                     f'height="{max(row_h - (1 if row_h > 3 else 0), 1)}" '
                     f'fill="{NEGATIVE if score < 0 else POSITIVE}">{tip}</rect>'
                     f'<rect x="{box["w_x"]}" y="{y}" width="{weight / state["weight_top"] * zone:.2f}" '
                     f'height="{max(row_h - (1 if row_h > 3 else 0), 1)}" fill="{WEIGHT}">{tip}</rect>')
        if numbers:
            parts.append(f'<text class="bvl-score" x="{box["s_x"] + zone + 4}" y="{y + row_h - 4}">{score:.2f}</text>'
                         f'<text class="bvl-weight" x="{box["w_x"] + zone + 4}" y="{y + row_h - 4}">{weight:.3f}'
                         "</text>")
    parts.append("</g>")
    for r, text in state["key_ticks"]:
        mine = ' font-weight="bold" fill="#d62728"' if state["query_row"] == r else ""
        parts.append(f'<text class="bvl-token bvl-key" x="{box["k_x"] - 6}" '
                     f'y="{keys_top + (r + 0.5) * row_h + LABEL_FONT * 0.35:.1f}" text-anchor="end"{mine}>'
                     f"{escape(text)}"
                     f"<title>{escape(named[r])}</title></text>")
    if 0 <= state["query_row"] < n and row_h >= 3:
        y = keys_top + state["query_row"] * row_h
        parts.append(f'<rect class="bvl-query-row" x="{box["k_x"] - 1}" y="{y - 0.5}" '
                     f'width="{box["w_x"] + zone + (44 if numbers else 0) - box["k_x"] + 2}" height="{row_h + 1}" '
                     'fill="none" '
                     'stroke="#d62728" stroke-width="1"/>')
    parts.append(colorbar(box["bar_x"], box["q_y"], box["bar_h"], palette, state["vector_ticks"],
                          "q, k: value per dimension"))
    parts.append(colorbar(box["bar2_x"], box["q_y"], box["bar_h"], palette, state["product_ticks"],
                          "q ⊙ k: product per dimension"))
    parts.append("</svg>")
    return "".join(parts)


def weight_header(weight_top: float) -> str:
    """The softmax column's header: its bars are scaled to the largest weight shown, so diffuse heads stay visible."""
    return f"softmax · bar ÷ {weight_top:.3g}"


def _floats(buffer: bytes | memoryview, shape: tuple[int, ...]) -> np.ndarray:
    return np.frombuffer(bytes(buffer), dtype=np.float32).reshape(shape)


class NeuronView(anywidget.AnyWidget):
    """q, K, q ⊙ K, scores and softmax weights of one query in one head, as float32 buffers, with labels, layout and
    the tops of the two diverging colour scales; clicking a key's token asks the panel to make it the query."""

    _esm = esm("neuron_view.js")
    _css = css("neuron_view")
    key_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)  # the shown keys, top to bottom
    key_positions = traitlets.List(traitlets.Int()).tag(sync=True)  # their positions in the input
    key_ticks = traitlets.List().tag(sync=True)  # [row, label] of the labels drawn (thinned out at large n)
    query_token = traitlets.Unicode("").tag(sync=True)
    query_position = traitlets.Int(0).tag(sync=True)
    query_row = traitlets.Int(-1).tag(sync=True)  # the query's own row among the keys (-1: not shown)
    head_size = traitlets.Int(0).tag(sync=True)
    q = traitlets.Bytes(b"").tag(sync=True)  # float32 (d,)
    k = traitlets.Bytes(b"").tag(sync=True)  # float32 (n, d)
    products = traitlets.Bytes(b"").tag(sync=True)  # float32 (n, d): q ⊙ k_j
    scores = traitlets.Bytes(b"").tag(sync=True)  # float32 (n,): q·k_j / √d
    weights = traitlets.Bytes(b"").tag(sync=True)  # float32 (n,): softmax weights
    vector_top = traitlets.Float(1.0).tag(sync=True)  # |value| at the ends of the q, k colour scale
    product_top = traitlets.Float(1.0).tag(sync=True)  # |value| at the ends of the q ⊙ k colour scale
    score_top = traitlets.Float(1.0).tag(sync=True)  # |score| of a full-length score bar
    weight_top = traitlets.Float(1.0).tag(sync=True)  # the weight of a full-length softmax bar (the largest shown)
    palette = traitlets.Bytes(D.DIVERGING.tobytes()).tag(sync=True)  # (256, 3): code 127 is zero
    vector_ticks = traitlets.List().tag(sync=True)  # [position 0..1 from the bottom, value as text]
    product_ticks = traitlets.List().tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    note = traitlets.Unicode("").tag(sync=True)
    geometry = traitlets.Dict().tag(sync=True)  # neuron_layout(): the same pixel positions as the SVG

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._query_listeners: list[Any] = []
        self.on_msg(self._front_end_message)

    def show(self, rows: D.NeuronRows, key_tokens: Sequence[str], key_positions: Sequence[int], query_token: str,
             query_position: int, title: str, note: str = "") -> None:
        """Send one query's rows in one message: the front end never draws half-updated state."""
        n, d = rows.k.shape
        vector_top = D.symmetric_top(rows.q, rows.k)
        product_top = D.symmetric_top(rows.products)
        row_h = max(1, min(MAX_ROW_H, MAX_ROWS_H // max(n, 1)))
        key_ticks = tick_labels(list(key_tokens), list(key_positions), row_h)
        vector_ticks, product_ticks = D.diverging_ticks(vector_top), D.diverging_ticks(product_top)
        positions = [int(p) for p in key_positions]
        with self.hold_sync():
            self.key_tokens, self.key_positions = list(key_tokens), positions
            self.key_ticks = [list(t) for t in key_ticks]
            self.query_token, self.query_position = query_token, int(query_position)
            self.query_row = positions.index(int(query_position)) if int(query_position) in positions else -1
            self.head_size = d
            self.q = np.ascontiguousarray(rows.q, np.float32).tobytes()
            self.k = np.ascontiguousarray(rows.k, np.float32).tobytes()
            self.products = np.ascontiguousarray(rows.products, np.float32).tobytes()
            self.scores = np.ascontiguousarray(rows.scores, np.float32).tobytes()
            self.weights = np.ascontiguousarray(rows.weights, np.float32).tobytes()
            self.vector_top, self.product_top = vector_top, product_top
            self.score_top = D.symmetric_top(rows.scores)
            self.weight_top = D.symmetric_top(rows.weights)
            self.vector_ticks, self.product_ticks = [list(t) for t in vector_ticks], [list(t) for t in product_ticks]
            self.title, self.note = title, note
            self.geometry = neuron_layout(n, d, key_ticks, "q · " + short_token(f"{query_position}·{query_token}"),
                                          title, note, vector_ticks, product_ticks)

    def clear(self, message: str) -> None:
        """Nothing to draw (no q and k to be had): the view says why instead."""
        with self.hold_sync():
            self.key_tokens, self.key_positions, self.key_ticks = [], [], []
            self.q = self.k = self.products = self.scores = self.weights = b""
            self.head_size, self.title, self.note, self.geometry = 0, message, "", {}

    def rows(self) -> D.NeuronRows:
        """The synced buffers as arrays, exactly what the front end draws."""
        n, d = len(self.key_tokens), self.head_size
        return D.NeuronRows(_floats(self.q, (d,)), _floats(self.k, (n, d)), _floats(self.products, (n, d)),
                            _floats(self.scores, (n,)), _floats(self.weights, (n,)))

    def on_query(self, callback: Any) -> None:
        """Call `callback(position)` when a key's token is clicked in the browser (the panel makes it the query)."""
        self._query_listeners.append(callback)

    def _front_end_message(self, _: Any, content: dict, buffers: list) -> None:
        if not isinstance(content, dict) or content.get("type") != "query":
            return
        position = content.get("position")
        if isinstance(position, int) and position in self.key_positions:
            for callback in self._query_listeners:
                callback(position)

    def to_svg(self) -> str:
        """The figure on screen as a standalone SVG document (cell tooltips carry the exact values)."""
        state = {name: getattr(self, name) for name in (
            "geometry", "palette", "key_tokens", "key_positions", "key_ticks", "query_token", "query_position",
            "query_row", "title", "note", "vector_top", "product_top", "score_top", "weight_top", "vector_ticks",
            "product_ticks")}
        if not self.geometry:
            return ('<svg xmlns="http://www.w3.org/2000/svg" class="bvl-neuron-view" width="420" height="40">'
                    f'<text x="8" y="24" font-family="sans-serif">{escape(self.title or "no query chosen")}</text>'
                    "</svg>")
        return neuron_svg(state, self.rows())
