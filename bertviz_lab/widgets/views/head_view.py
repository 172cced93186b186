"""The bertviz-style head view in the browser: query tokens left, key tokens right, a line per weight."""

from __future__ import annotations

import math
from typing import Any

import anywidget
import numpy as np
import traitlets

from bertviz_lab.widgets.figures.heatmap import (
    NOTE_FONT,
    _label,
)
from bertviz_lab.widgets.figures.text import escape, short_token
from bertviz_lab.widgets.views.front_end import css, esm


def _array(buffer: bytes | memoryview, dtype: Any) -> np.ndarray:
    return np.frombuffer(bytes(buffer), dtype=dtype)


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
