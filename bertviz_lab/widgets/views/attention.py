"""The attention panel's three browser views (anywidget): the heatmap, the bertviz-style head view, the model view.

Each draws only from its synced traitlets (front ends in views/*.js), so a page reload, a second tab or Notebook 7
draws the same figure, and each can write the same figure as a standalone SVG document for a paper. They receive
compact binary buffers (8-bit codes, 16-bit indices); token text is always set with textContent, never parsed as HTML.
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
    NOTE_FONT,
    _label,
    cell_size,
    colorbar,
    heatmap_layout,
    heatmap_svg,
    png,
    tick_labels,
)
from bertviz_lab.widgets.figures.text import escape, short_token
from bertviz_lab.widgets.views.front_end import css, esm


def _array(buffer: bytes | memoryview, dtype: Any) -> np.ndarray:
    return np.frombuffer(bytes(buffer), dtype=dtype)


class HeatmapView(anywidget.AnyWidget):
    """One attention matrix as 8-bit colour codes with what turns them back into weights (see
    attention_data.HeatmapCodes), token labels, title and colour bar; hover asks the kernel for the exact weight."""

    _esm = esm("heatmap.js")
    _css = css("heatmap")
    codes = traitlets.Bytes(b"").tag(sync=True)  # uint8 (rows, cols), row-major
    mode = traitlets.Unicode("linear").tag(sync=True)  # linear | row | log
    scale = traitlets.Float(0.0).tag(sync=True)  # linear: weight = code × scale
    row_scales = traitlets.Bytes(b"").tag(sync=True)  # float32 (rows,): "row": weight = code × row_scales[row]
    log_range = traitlets.List(traitlets.Float(), default_value=[0.0, 0.0]).tag(sync=True)  # "log": (floor, top)
    overflow_index = traitlets.Bytes(b"").tag(sync=True)  # uint32: cells above the colour range (code 255) ...
    overflow_values = traitlets.Bytes(b"").tag(sync=True)  # float32: ... and their exact weights
    palette = traitlets.Bytes(D.PALETTE.tobytes()).tag(sync=True)  # (256, 3) uint8 colours of the codes
    row_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)  # query tokens, top to bottom
    col_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)  # key tokens, left to right
    row_positions = traitlets.List(traitlets.Int()).tag(sync=True)  # their positions in the input
    col_positions = traitlets.List(traitlets.Int()).tag(sync=True)
    row_ticks = traitlets.List().tag(sync=True)  # [index, label] of the labels drawn (thinned out at large n)
    col_ticks = traitlets.List().tag(sync=True)
    bar_ticks = traitlets.List().tag(sync=True)  # [position 0..1 from the bottom, weight as text]
    bar_title = traitlets.Unicode("attention weight").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    note = traitlets.Unicode("").tag(sync=True)
    geometry = traitlets.Dict().tag(sync=True)  # heatmap_layout(): the same pixel positions as the SVG

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.values = np.zeros((0, 0), dtype=np.float32)  # the exact weights on screen (kernel side only)
        self.on_msg(self._answer)

    def show(self, matrix: np.ndarray, row_tokens: Sequence[str], col_tokens: Sequence[str],
             row_positions: Sequence[int], col_positions: Sequence[int], title: str, note: str = "",
             mode: str = "linear", ignore_rows: np.ndarray | None = None,
             ignore_cols: np.ndarray | None = None) -> None:
        """Send a matrix in one message: the front end never draws half-updated state."""
        encoded = D.encode_heatmap(matrix, mode, ignore_rows, ignore_cols)
        bar_ticks, bar_title = D.colorbar_ticks(encoded)
        rows, cols = encoded.codes.shape
        cell = cell_size(rows, cols)
        row_ticks = tick_labels(list(row_tokens), list(row_positions), cell)
        col_ticks = tick_labels(list(col_tokens), list(col_positions), cell)
        self.values = np.asarray(matrix, dtype=np.float32)
        with self.hold_sync():
            self.codes = encoded.codes.tobytes()
            self.mode, self.scale = encoded.mode, encoded.scale
            self.row_scales, self.log_range = encoded.row_scales.tobytes(), list(encoded.log_range)
            self.overflow_index = encoded.overflow_index.tobytes()
            self.overflow_values = encoded.overflow_values.tobytes()
            self.row_tokens, self.col_tokens = list(row_tokens), list(col_tokens)
            self.row_positions, self.col_positions = [int(p) for p in row_positions], [int(p) for p in col_positions]
            self.row_ticks, self.col_ticks = [list(t) for t in row_ticks], [list(t) for t in col_ticks]
            self.bar_ticks, self.bar_title = [list(t) for t in bar_ticks], bar_title
            self.title, self.note = title, note
            self.geometry = heatmap_layout(rows, cols, row_ticks, col_ticks, title, note, bar_ticks)

    def encoded(self) -> D.HeatmapCodes:
        """The synced state as HeatmapCodes, exactly what the front end holds."""
        rows, cols = len(self.row_tokens), len(self.col_tokens)
        return D.HeatmapCodes(_array(self.codes, np.uint8).reshape(rows, cols), self.mode, self.scale,
                              _array(self.row_scales, np.float32), (self.log_range[0], self.log_range[1]),
                              _array(self.overflow_index, np.uint32), _array(self.overflow_values, np.float32))

    def weights(self) -> np.ndarray:
        """The weights the front end reads back from the synced codes (hover, colour bar), as float64."""
        return D.decode_heatmap(self.encoded())

    def digest(self) -> str:
        """The fingerprint the front end writes to data-digest after drawing these codes."""
        return D.digest(_array(self.codes, np.uint8))

    def _answer(self, _: Any, content: dict, buffers: list) -> None:
        """Hover asks for a cell's exact weight: the 8-bit codes only carry it to within one colour step."""
        if not isinstance(content, dict) or content.get("type") != "weight":
            return
        row, col = content.get("row"), content.get("col")
        if not (isinstance(row, int) and isinstance(col, int) and 0 <= row < self.values.shape[0]
                and 0 <= col < self.values.shape[1]):
            return
        self.send({"type": "weight", "row": row, "col": col, "seq": content.get("seq"),
                   "value": float(self.values[row, col])})

    def to_svg(self) -> str:
        """The figure on screen as a standalone SVG document (cells exact to the colour, tooltips exact)."""
        state = {name: getattr(self, name) for name in (
            "codes", "palette", "geometry", "row_tokens", "col_tokens", "row_positions", "col_positions", "row_ticks",
            "col_ticks", "title", "note", "bar_ticks", "bar_title")}
        exact = self.values if self.values.shape == (len(self.row_tokens), len(self.col_tokens)) else None
        return heatmap_svg(state, exact)


class HeadView(anywidget.AnyWidget):
    """Query tokens on the left, key tokens on the right, a line per (query, key) per shown head; opacity = weight.

    The lines of every head are sent once; the head chips in the browser toggle `heads` (click) or isolate one
    (double click) without a round trip, and Python sees the choice in `heads`.
    """

    _esm = esm("head_view.js")
    _css = css("head_view")
    query_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    key_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    num_heads = traitlets.Int(0).tag(sync=True)
    heads = traitlets.List(traitlets.Int()).tag(sync=True)  # the heads shown, chosen with the chips
    colors = traitlets.List(traitlets.Unicode()).tag(sync=True)  # one per head of the layer
    k = traitlets.Int(1).tag(sync=True)
    indices = traitlets.Bytes(b"").tag(sync=True)  # uint16 (num_heads, queries, k), positions in key_tokens
    weights = traitlets.Bytes(b"").tag(sync=True)  # uint8 (num_heads, queries, k), 255 = probability 1
    title = traitlets.Unicode("").tag(sync=True)
    geometry = traitlets.Dict({"row_h": 18, "col_w": 150, "gap": 180, "top": 8, "min_weight": 0.01}).tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._open_listeners: list[Any] = []
        self.on_msg(self._front_end_message)

    def on_open(self, callback: Any) -> None:
        """Call `callback(query_index, head)` when a query token (head: the first shown, or -1) or a line is clicked:
        the panel opens the neuron view there."""
        self._open_listeners.append(callback)

    def _front_end_message(self, _: Any, content: dict, buffers: list) -> None:
        if not isinstance(content, dict) or content.get("type") != "open":
            return
        query, head = content.get("query"), content.get("head", -1)
        if not (isinstance(query, int) and isinstance(head, int) and 0 <= query < len(self.query_tokens)
                and -1 <= head < self.num_heads):
            return
        for callback in self._open_listeners:
            callback(query, head)

    def lines(self) -> tuple[np.ndarray, np.ndarray]:
        """Decoded (indices, weights 0..1), each (num_heads, queries, k)."""
        shape = (self.num_heads, len(self.query_tokens), self.k)
        return (_array(self.indices, np.uint16).reshape(shape),
                _array(self.weights, np.uint8).reshape(shape).astype(np.float64) / 255)

    def strongest(self) -> float:
        """The largest weight among the shown heads' lines: line opacity is weight ÷ this."""
        if not self.num_heads or not self.heads or not len(self.query_tokens):
            return 0.0
        return float(self.lines()[1][sorted(h for h in self.heads if h < self.num_heads)].max(initial=0.0))

    def note(self) -> str:
        """How to read the lines (the view shows the same under its title)."""
        strongest = self.strongest()
        if not strongest:
            return ""
        return (f"line opacity: attention weight ÷ {strongest:.3f} (the strongest line shown); the {self.k} strongest "
                "keys of each query")

    def full_title(self) -> str:
        """The title as the view shows it: layer, pair direction, the heads on."""
        heads = ", ".join(str(h) for h in sorted(self.heads)) or "none (click a head)"
        return f"{self.title} · head{'s' if len(self.heads) != 1 else ''} {heads}"

    def to_svg(self) -> str:
        """The head view as a standalone SVG document: chips of the shown heads, token columns, lines."""
        box = self.geometry
        row_h, col_w, gap, min_weight = box["row_h"], box["col_w"], box["gap"], box["min_weight"]
        queries, keys = self.query_tokens, self.key_tokens
        heads = sorted(h for h in self.heads if h < self.num_heads)
        chips_y, top = 30 + NOTE_FONT + 8, 52 + NOTE_FONT + 8 + box["top"]
        note, strongest = self.note(), self.strongest()
        width = max(col_w * 2 + gap, math.ceil(len(self.full_title()) * 7.6) + 20, 16 + 64 * len(heads),
                    math.ceil(len(note) * 6.4) + 20)
        height = top + max(len(queries), len(keys), 1) * row_h + box["top"]
        parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="bvl-head-view" width="{width}" height="{height}" '
                 f'font-family="monospace" font-size="12"><rect width="100%" height="100%" fill="#fff"/>'
                 f'<text class="bvl-title" x="8" y="20" font-size="14" font-family="sans-serif" font-weight="bold">'
                 f"{escape(self.full_title())}</text>"
                 f'<text class="bvl-note" x="8" y="{20 + NOTE_FONT + 6}" font-size="{NOTE_FONT}" '
                 f'font-family="sans-serif" fill="#555">{escape(note)}</text>']
        for slot, head in enumerate(heads):
            x = 8 + 64 * slot
            parts.append(f'<g class="bvl-head-chip"><rect x="{x}" y="{chips_y}" width="58" height="16" rx="4" '
                         f'fill="{escape(self.colors[head % len(self.colors)])}"/><text x="{x + 29}" '
                         f'y="{chips_y + 12}" text-anchor="middle" fill="#fff" font-family="sans-serif">head {head}'
                         "</text></g>")
        index, weight = self.lines() if self.num_heads else (np.zeros((0, 0, 0)), np.zeros((0, 0, 0)))
        parts.append('<g class="bvl-lines">')
        for head in heads if strongest else ():
            color = escape(self.colors[head % len(self.colors)])
            parts.append(f'<g stroke="{color}" stroke-width="2">')
            for q in range(len(queries)):
                for j in range(self.k):
                    w = weight[head, q, j] / strongest
                    if not w >= min_weight:
                        continue
                    y1, y2 = top + (q + 0.5) * row_h, top + (int(index[head, q, j]) + 0.5) * row_h
                    parts.append(f'<line x1="{col_w}" y1="{y1:g}" x2="{col_w + gap}" y2="{y2:g}" '
                                 f'stroke-opacity="{w:.3f}"/>')
            parts.append("</g>")
        parts.append("</g>")
        for side, tokens, x, anchor in (("query", queries, col_w - 6, "end"), ("key", keys, col_w + gap + 6, "start")):
            for i, token in enumerate(tokens):
                parts.append(f'<text class="bvl-token bvl-{side}" x="{x}" y="{top + (i + 0.5) * row_h + 4:g}" '
                             f'text-anchor="{anchor}">{_label(short_token(token), token)}</text>')
        parts.append("</svg>")
        return "".join(parts)


class ModelView(anywidget.AnyWidget):
    """Every layer × head as a thumbnail under one shared colour scale; clicking one sets `selected` = [layer, head].

    With `click_mode` "ablate" (or a shift-click in any mode) a click switches that head off or on again instead: the
    front end toggles it in `ablated`, and the panel runs the text again without those heads. `changes` then gives a
    badge per head (how far its attention moved) and `lines` what the model's predictions did.
    """

    _esm = esm("model_view.js")
    _css = css("model_view")
    num_layers = traitlets.Int(0).tag(sync=True)
    num_heads = traitlets.Int(0).tag(sync=True)
    size = traitlets.Int(1).tag(sync=True)
    thumbnails = traitlets.Bytes(b"").tag(sync=True)  # uint8 (layers, heads, size, size): weight = code × scale
    scale = traitlets.Float(0.0).tag(sync=True)
    palette = traitlets.Bytes(D.PALETTE.tobytes()).tag(sync=True)
    bar_ticks = traitlets.List().tag(sync=True)
    bar_title = traitlets.Unicode("attention weight").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    hint = traitlets.Unicode("").tag(sync=True)  # what a thumbnail's rows and columns are (its tooltip)
    zero_code = traitlets.Int(0).tag(sync=True)  # the code of weight 0: 0, or 127 for differences (diverging)
    selected = traitlets.List(traitlets.Int(), default_value=[0, 0]).tag(sync=True)
    click_mode = traitlets.Unicode("open").tag(sync=True)  # open: a click opens the head; ablate: switches it off
    ablated = traitlets.List(traitlets.List(traitlets.Int())).tag(sync=True)  # [[layer, head], ...] switched off
    changes = traitlets.Bytes(b"").tag(sync=True)  # float32 (L, H): how far each head's attention moved, or empty
    badge_min = traitlets.Float(0.005).tag(sync=True)  # changes below this get no badge
    lines = traitlets.List(traitlets.Unicode()).tag(sync=True)  # what the ablation did to the predictions
    geometry = traitlets.Dict({"thumb": 52, "gap": 6, "label_w": 90, "header_h": 20, "top": 30}).tag(sync=True)

    def decoded(self) -> np.ndarray:
        """Thumbnails as weights (L, H, s, s) (or changes, with zero_code 127); code 255 reads as the scale's top."""
        shape = (self.num_layers, self.num_heads, self.size, self.size)
        codes = _array(self.thumbnails, np.uint8).reshape(shape).astype(np.float64)
        return (np.minimum(codes, D.TOP_CODE) - self.zero_code) * self.scale

    def head_changes(self) -> np.ndarray | None:
        """The (L, H) changes the badges show, or None when no head is off."""
        if not self.changes:
            return None
        return _array(self.changes, np.float32).reshape(self.num_layers, self.num_heads)

    def to_svg(self) -> str:
        """The model view as a standalone SVG document: labelled grid of thumbnails (PNG), one titled colour bar."""
        box = self.geometry
        thumb, gap, label_w, header_h = box["thumb"], box["gap"], box["label_w"], box["header_h"]
        L, H, s = self.num_layers, self.num_heads, self.size
        top = box["top"] + NOTE_FONT + 8 + header_h + len(self.lines) * (NOTE_FONT + 4)
        grid_w, grid_h = H * (thumb + gap), L * (thumb + gap)
        bar_h = max(grid_h - gap, BAR_MIN_H)
        bar_x = label_w + grid_w + 16
        width = max(bar_x + BAR_W + 90, math.ceil(len(self.title) * 7.6) + 20, math.ceil(len(self.hint) * 6.4) + 20,
                    *(math.ceil(len(line) * 6.4) + 20 for line in self.lines))
        height = top + max(grid_h, bar_h) + 10
        palette = _array(self.palette, np.uint8).reshape(256, 3)
        codes = _array(self.thumbnails, np.uint8).reshape(L, H, s, s)
        parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="bvl-model-view" width="{width}" height="{height}" '
                 'font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="#fff"/>'
                 f'<text class="bvl-title" x="8" y="20" font-size="14" font-weight="bold">{escape(self.title)}</text>'
                 f'<text class="bvl-note" x="8" y="{20 + NOTE_FONT + 6}" font-size="{NOTE_FONT}" fill="#555">'
                 f"{escape(self.hint)}</text>"
                 f'<text class="bvl-axes-hint" x="8" y="{top - 6}" font-size="11" '
                 'fill="#555">query ↓ key →</text>']
        for index, line in enumerate(self.lines):
            y = 20 + (NOTE_FONT + 6) + (index + 1) * (NOTE_FONT + 4)
            parts.append(f'<text class="bvl-ablation-line" x="8" y="{y}" font-size="{NOTE_FONT}" fill="#333">'
                         f"{escape(line)}</text>")
        off = {(layer, head) for layer, head in self.ablated}
        changes = self.head_changes()
        for h in range(H):
            parts.append(f'<text class="bvl-head-label" x="{label_w + h * (thumb + gap) + thumb / 2}" y="{top - 6}" '
                         f'text-anchor="middle">head {h}</text>')
        for layer in range(L):
            y = top + layer * (thumb + gap)
            parts.append(f'<text class="bvl-layer-label" x="{label_w - 8}" y="{y + thumb / 2 + 4}" '
                         f'text-anchor="end">layer {layer}</text>')
            for h in range(H):
                data = base64.b64encode(png(codes[layer, h], palette)).decode("ascii")
                x = label_w + h * (thumb + gap)
                parts.append(f'<image class="bvl-thumb" x="{x}" y="{y}" width="{thumb}" height="{thumb}" '
                             f'preserveAspectRatio="none" image-rendering="optimizeSpeed" '
                             f'style="image-rendering:pixelated" href="data:image/png;base64,{data}"/>'
                             f'<rect x="{x}" y="{y}" width="{thumb}" height="{thumb}" fill="none" stroke="#ccc"/>')
                if (layer, h) in off:
                    parts.append(f'<g class="bvl-ablated"><rect x="{x}" y="{y}" width="{thumb}" height="{thumb}" '
                                 'fill="#fff" fill-opacity="0.55" stroke="#d62728" stroke-width="2"/>'
                                 f'<line x1="{x}" y1="{y}" x2="{x + thumb}" y2="{y + thumb}" stroke="#d62728"/>'
                                 f'<line x1="{x + thumb}" y1="{y}" x2="{x}" y2="{y + thumb}" stroke="#d62728"/>'
                                 f'<text x="{x + thumb / 2}" y="{y + thumb / 2 + 4}" text-anchor="middle" '
                                 'font-weight="bold" fill="#d62728">off</text></g>')
                elif changes is not None and changes[layer, h] >= self.badge_min:
                    parts.append(f'<g class="bvl-badge"><rect x="{x + 1}" y="{y + thumb - 14}" width="34" '
                                 'height="13" rx="2" fill="#fff" fill-opacity="0.85"/>'
                                 f'<text x="{x + 3}" y="{y + thumb - 4}" font-size="10" fill="#111">'
                                 f"{badge_text(float(changes[layer, h]))}</text></g>")
        parts.append(colorbar(bar_x, top, bar_h, palette, [tuple(t) for t in self.bar_ticks], self.bar_title))
        parts.append("</svg>")
        return "".join(parts)


def badge_text(change: float) -> str:
    """A head's attention change as its badge says it: Δ.12, Δ.05, Δ1."""
    return "Δ1" if change >= 0.995 else "Δ" + f"{change:.2f}".lstrip("0")
