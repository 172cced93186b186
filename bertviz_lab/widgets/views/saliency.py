"""The saliency figure: a text's tokens coloured by their scores, as one SVG drawing, and its browser view."""

from __future__ import annotations

import math
from typing import Any

import anywidget
import numpy as np
import traitlets

from bertviz_lab.widgets.figures.charts import nice_ticks
from bertviz_lab.widgets.figures.text import escape, short_token, text_width
from bertviz_lab.widgets.views.front_end import css, esm

# drawing: one layout, computed here and sent to the browser, so the live view and the SVG are one drawing
FONT, TITLE_FONT, NOTE_FONT = 13, 14, 12
PAD_X, BOX_H, GAP, LINE_H = 5, 22, 4, 30
WRAP_W = 720  # px of tokens per line before wrapping
MARGIN, GUTTER = 10, 24  # left margin; room for the A / B labels of a sentence pair
BAR_W, BAR_H = 260, 12
# ColorBrewer RdBu (9 classes), blue for negative, near-white at zero, red for positive
ANCHORS = ("#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7", "#f4a582", "#d6604d", "#b2182b")
CODES = 255  # palette entries; code 127 is exactly zero


def _palette() -> np.ndarray:
    anchors = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for c in ANCHORS], dtype=float)
    at = np.linspace(0, 1, len(anchors))
    t = np.linspace(0, 1, CODES)
    return np.rint(np.stack([np.interp(t, at, anchors[:, k]) for k in range(3)], axis=1)).astype(np.uint8)


PALETTE = _palette()  # (CODES, 3) uint8


def color_code(value: float, limit: float) -> int:
    """The palette index of a score on the symmetric scale [-limit, limit] (the middle code is zero)."""
    if not limit > 0 or not math.isfinite(value):
        return CODES // 2
    t = min(1.0, max(-1.0, value / limit))
    return int(round((t + 1) / 2 * (CODES - 1)))


def hex_color(code: int) -> str:
    """#rrggbb of a palette code."""
    red, green, blue = PALETTE[code]
    return f"#{red:02x}{green:02x}{blue:02x}"


def score_text(value: float) -> str:
    """A score as hover shows it: seven significant digits, all a float32 holds."""
    return f"{value:.7g}"


def _tick_text(value: float) -> str:
    return "0" if value == 0 else f"{value:.3g}"


def colorbar_ticks(limit: float) -> list[list[Any]]:
    """[position 0..1 from the left, label] of the colour bar: -limit, 0, +limit and round values between."""
    if not limit > 0:
        return [[0.5, "0"]]
    ticks = {0.0: -limit, 0.5: 0.0, 1.0: limit}
    for value in nice_ticks(-limit, limit, 4):
        position = (value + limit) / (2 * limit)
        if all(abs(position - kept) >= 0.15 for kept in ticks):
            ticks[position] = value
    return [[position, _tick_text(ticks[position])] for position in sorted(ticks)]


# drawing ---------------------------------------------------------------------------------------------------------
def _text_w(text: str, size: float, monospace: bool = False) -> float:
    return text_width(text, size, monospace=monospace)


def saliency_layout(labels: list[str], segments: list[int], title: str, subtitle: str, note: str,
                    bar_ticks: list[list[Any]], bar_title: str) -> tuple[list[list[float]], list[list[Any]], dict]:
    """Boxes [x, y, width] of the tokens in reading order, wrapped at WRAP_W (sentence B on a line of its own), the
    A / B labels [y, text] in the gutter, and the figure's geometry (the live view draws with the same numbers)."""
    pair = any(segments)
    left = MARGIN + (GUTTER if pair else 0)
    lines = [line for line in (title, subtitle, note) if line]
    top = 8 + 20 * len(lines) + 10
    boxes: list[list[float]] = []
    gutter: list[list[Any]] = []
    x, y, right = float(left), float(top), float(left)
    for index, label in enumerate(labels):
        width = math.ceil(_text_w(label, FONT, monospace=True)) + 2 * PAD_X
        new_segment = pair and index > 0 and segments[index] != segments[index - 1]
        if index and (new_segment or (x > left and x + width > left + WRAP_W)):
            x, y = float(left), y + LINE_H
        if pair and (index == 0 or new_segment):
            gutter.append([y, "B" if segments[index] else "A"])
        boxes.append([x, y, width])
        right = max(right, x + width)
        x += width + GAP
    tokens_bottom = (y + BOX_H) if labels else top
    bar_title_y = tokens_bottom + 24
    bar_y = bar_title_y + 8
    half_tick = max((_text_w(t[1], 11, monospace=True) for t in bar_ticks), default=0) / 2
    bar_x = math.ceil(MARGIN + half_tick)
    total_w = math.ceil(max(right + MARGIN, bar_x + BAR_W + half_tick + MARGIN,
                            _text_w(title, TITLE_FONT) * 1.05 + 2 * MARGIN,
                            _text_w(subtitle, NOTE_FONT) * 1.05 + 2 * MARGIN,
                            _text_w(note, NOTE_FONT) * 1.05 + 2 * MARGIN,
                            _text_w(bar_title, NOTE_FONT) * 1.05 + 2 * MARGIN))
    geometry = {"left": left, "top": top, "box_h": BOX_H, "font": FONT, "bar_x": bar_x, "bar_y": bar_y,
                "bar_w": BAR_W, "bar_h": BAR_H, "bar_title_y": bar_title_y, "total_w": total_w,
                "total_h": math.ceil(bar_y + BAR_H + 26)}
    return boxes, gutter, geometry


def _header(state: dict[str, Any]) -> list[tuple[str, str, int, str, str]]:
    """(class, text, font size, weight, colour) of the title lines shown."""
    rows = [("bvl-title", state["title"], TITLE_FONT, "bold", "#111"),
            ("bvl-subtitle", state["subtitle"], NOTE_FONT, "normal", "#222"),
            ("bvl-note", state["note"], NOTE_FONT, "normal", "#555")]
    return [row for row in rows if row[1]]


def saliency_svg(state: dict[str, Any]) -> str:
    """A saliency view's synced state as a standalone SVG document: title, target, tokens coloured by their score
    (each with its exact score as a tooltip), A / B labels and the colour bar; or the error when there is one."""
    box = state["geometry"] or {"total_w": 480, "total_h": 80}
    width, height = box["total_w"], box["total_h"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="bvl-saliency" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="{FONT}">'
             '<rect width="100%" height="100%" fill="#fff"/>']
    y = 8
    for css_class, text, size, weight, color in _header(state):
        y += 20
        parts.append(f'<text class="{css_class}" x="{MARGIN}" y="{y - 6}" font-size="{size}" font-family="sans-serif" '
                     f'font-weight="{weight}" fill="{color}">{escape(text)}</text>')
    if state["status"] == "error":
        parts.append(f'<text class="bvl-error" x="{MARGIN}" y="{y + 20}" font-size="{NOTE_FONT}" '
                     f'font-family="sans-serif" fill="#d62728">{escape(state["message"])}</text></svg>')
        return "".join(parts)
    scores = np.frombuffer(bytes(state["scores"]), dtype=np.float32)
    parts.append('<g class="bvl-tokens">')
    for index, (x, top, w) in enumerate(state["boxes"]):
        token, label = state["tokens"][index], state["labels"][index]
        dash = ' stroke-dasharray="3,2"' if state["special"][index] else ""
        parts.append(f'<g class="bvl-token" data-position="{state["positions"][index]}">'
                     f'<title>{state["positions"][index]} · {escape(token)}: '
                     f'{score_text(float(scores[index]))}</title>'
                     f'<rect x="{x:g}" y="{top:g}" width="{w:g}" height="{BOX_H}" rx="3" '
                     f'fill="{state["colors"][index]}" stroke="#9aa0a6" stroke-width="0.6"{dash}/>'
                     f'<text x="{x + PAD_X:g}" y="{top + BOX_H / 2 + FONT * 0.35:.1f}" '
                     f'fill="{state["ink"][index]}">{escape(label)}</text></g>')
    parts.append("</g>")
    for top, text in state["gutter"]:
        parts.append(f'<text class="bvl-segment" x="{MARGIN}" y="{top + BOX_H / 2 + FONT * 0.35:.1f}" '
                     f'font-family="sans-serif" font-weight="bold" fill="#666">{escape(text)}</text>')
    parts.append(colorbar_svg(box, state["bar_ticks"], state["bar_title"]))
    parts.append("</svg>")
    return "".join(parts)


def colorbar_svg(box: dict[str, Any], ticks: list[list[Any]], title: str) -> str:
    """A horizontal colour bar, negative (blue) on the left, zero in the middle, with its ticks and title."""
    x, y, w, h = box["bar_x"], box["bar_y"], box["bar_w"], box["bar_h"]
    bands = 64  # stacked bands rather than a gradient: no element ids to clash between figures on one page
    parts = [f'<g class="bvl-colorbar"><text class="bvl-colorbar-title" x="{MARGIN}" y="{box["bar_title_y"]}" '
             f'font-size="{NOTE_FONT}" font-family="sans-serif" fill="#333">{escape(title)}</text>'
             '<g shape-rendering="crispEdges">']
    for band in range(bands):
        code = round(band * (CODES - 1) / (bands - 1))
        x0 = x + w * band / bands
        parts.append(f'<rect x="{x0:.2f}" y="{y}" width="{w / bands + 0.3:.2f}" height="{h}" '
                     f'fill="{hex_color(code)}"/>')
    parts.append(f'</g><rect x="{x}" y="{y}" width="{w}" height="{h}" fill="none" stroke="#888" stroke-width="0.5"/>')
    for position, label in ticks:
        tx = x + w * position
        parts.append(f'<line x1="{tx:.1f}" y1="{y + h}" x2="{tx:.1f}" y2="{y + h + 4}" stroke="#555"/>'
                     f'<text class="bvl-colorbar-tick" x="{tx:.1f}" y="{y + h + 16}" text-anchor="middle" '
                     f'font-size="11">{escape(label)}</text>')
    parts.append("</g>")
    return "".join(parts)


class SaliencyView(anywidget.AnyWidget):
    """The tokens of a text coloured by their saliency scores (exact float32 scores, colours and positions synced),
    with the title, target, colour bar, a computing state and errors; hover shows a token's exact score."""

    _esm = esm("saliency_view.js")
    _css = css("saliency_view")
    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)  # the tokens, whole (hover, tooltips)
    labels = traitlets.List(traitlets.Unicode()).tag(sync=True)  # what each box shows (long tokens cut)
    positions = traitlets.List(traitlets.Int()).tag(sync=True)  # each token's position in the input
    special = traitlets.List(traitlets.Bool()).tag(sync=True)  # [CLS] / [SEP] (drawn with a dashed outline)
    scores = traitlets.Bytes(b"").tag(sync=True)  # float32 (T,): the scores saliency() returned
    colors = traitlets.List(traitlets.Unicode()).tag(sync=True)  # each box's fill
    ink = traitlets.List(traitlets.Unicode()).tag(sync=True)  # each box's text colour
    boxes = traitlets.List().tag(sync=True)  # [x, y, width] per token
    gutter = traitlets.List().tag(sync=True)  # [y, "A" | "B"]: where each sentence of a pair starts
    limit = traitlets.Float(0.0).tag(sync=True)  # the colour scale runs from -limit (blue) to +limit (red)
    palette = traitlets.Bytes(PALETTE.tobytes()).tag(sync=True)  # (255, 3) uint8, code 127 = zero
    bar_ticks = traitlets.List().tag(sync=True)  # [position 0..1 from the left, score as text]
    bar_title = traitlets.Unicode("").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    subtitle = traitlets.Unicode("").tag(sync=True)  # the target
    note = traitlets.Unicode("").tag(sync=True)
    geometry = traitlets.Dict().tag(sync=True)  # saliency_layout(): the same pixel positions as the SVG
    status = traitlets.Unicode("ready").tag(sync=True)  # ready | computing | error
    message = traitlets.Unicode("").tag(sync=True)  # the error, or what is being computed

    def state(self) -> dict[str, Any]:
        """The synced state the figure is drawn from."""
        return {name: getattr(self, name) for name in (
            "tokens", "labels", "positions", "special", "scores", "colors", "ink", "boxes", "gutter", "limit",
            "bar_ticks", "bar_title", "title", "subtitle", "note", "geometry", "status", "message")}

    def to_svg(self) -> str:
        """The figure as a standalone SVG document, drawn from the synced state."""
        return saliency_svg(self.state())

    def values(self) -> np.ndarray:
        """The scores the view holds, float32 (T,)."""
        return np.frombuffer(bytes(self.scores), dtype=np.float32).copy()

    def show(self, tokens: list[str], positions: list[int], segments: list[int], special: list[bool],
             scores: np.ndarray, title: str, subtitle: str, note: str) -> None:
        """Send one figure in one message: the front end never draws half-updated state."""
        scores = np.asarray(scores, dtype=np.float32)
        finite = np.abs(scores[np.isfinite(scores)])
        limit = float(finite.max()) if finite.size else 0.0
        codes = [color_code(float(s), limit) for s in scores]
        ticks = colorbar_ticks(limit)
        bar_title = "token score: red raises the target, blue lowers it (0 = white)"
        labels = [short_token(t) for t in tokens]
        boxes, gutter, geometry = saliency_layout(labels, list(segments), title, subtitle, note, ticks, bar_title)
        with self.hold_sync():
            self.tokens, self.labels, self.positions = list(tokens), labels, [int(p) for p in positions]
            self.special = [bool(s) for s in special]
            self.scores = scores.tobytes()
            self.colors = [hex_color(c) for c in codes]
            self.ink = ["#fff" if abs(c - CODES // 2) > 0.62 * (CODES // 2) else "#111" for c in codes]
            self.boxes, self.gutter, self.limit = boxes, gutter, limit
            self.bar_ticks, self.bar_title = ticks, bar_title
            self.title, self.subtitle, self.note = title, subtitle, note
            self.geometry = geometry
            self.status, self.message = "ready", ""

    def show_error(self, title: str, subtitle: str, message: str) -> None:
        """Show why there is no figure, in place of the tokens."""
        width = math.ceil(max(_text_w(title, TITLE_FONT), _text_w(subtitle, NOTE_FONT),
                              _text_w(message, NOTE_FONT)) * 1.05 + 2 * MARGIN)
        lines = sum(1 for line in (title, subtitle) if line)
        with self.hold_sync():
            self.tokens, self.labels, self.positions, self.special = [], [], [], []
            self.scores, self.colors, self.ink, self.boxes, self.gutter = b"", [], [], [], []
            self.limit, self.bar_ticks = 0.0, []
            self.title, self.subtitle, self.note = title, subtitle, ""
            self.geometry = {"total_w": max(width, 320), "total_h": 8 + 20 * lines + 36}
            self.status, self.message = "error", message


