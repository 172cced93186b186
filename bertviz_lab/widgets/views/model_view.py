"""The model view in the browser: every layer x head as a thumbnail, with head ablation marks."""

from __future__ import annotations

import base64
import math
from typing import Any

import anywidget
import numpy as np
import traitlets

from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.heatmap import (
    BAR_MIN_H,
    BAR_W,
    NOTE_FONT,
    colorbar,
    png,
)
from bertviz_lab.widgets.figures.text import escape
from bertviz_lab.widgets.views.front_end import css, esm


def _array(buffer: bytes | memoryview, dtype: Any) -> np.ndarray:
    return np.frombuffer(bytes(buffer), dtype=dtype)


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
