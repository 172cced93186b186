"""The saliency figure as one SVG drawing: a text's tokens in reading order, each box filled by its score on a
diverging scale (blue lowers the target, red raises it, near-white is zero), title, target, note, A / B labels of a
pair and a colour bar; or the run being computed; or why there is no figure.

Text on a token box gets its own ink, dark or light, whichever contrasts more with that box's fill (at least 4.5:1);
every other text takes the theme's colours from figure.css.

What the live view's hover and keys need is written into the drawing as data- attributes: the root has data-status
(ready, computing or error), data-title, data-subtitle and data-tokens (how many boxes); each token box
(<g class="bvl-token">) has data-index (its place in the figure) and data-position (its position in the input).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

import numpy as np

from bertviz_lab.widgets.figures.charts import nice_ticks
from bertviz_lab.widgets.figures.heatmap import colorbar_across
from bertviz_lab.widgets.figures.text import escape, minus, short_token, text_width

FONT, TITLE_FONT, NOTE_FONT, TICK_FONT = 13, 14, 12, 11
PAD_X, BOX_H, GAP, LINE_H = 5, 22, 4, 30
WRAP_W = 720  # px of tokens per line before wrapping
MARGIN, GUTTER = 10, 24  # left margin; room for the A / B labels of a sentence pair
BAR_W, BAR_H = 260, 12
# ColorBrewer RdBu (9 classes), blue for negative, near-white at zero, red for positive
ANCHORS = ("#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7", "#f4a582", "#d6604d", "#b2182b")
CODES = 255  # palette entries; code 127 is exactly zero
INK = {"bvl-ink-dark": "#000000", "bvl-ink-light": "#ffffff"}  # on a token box; saliency_view.css says the same
BAR_TITLE = "token score: red raises the target, blue lowers it (0 = white)"
COMPUTING = "computing …"


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


def luminance(color: str) -> float:
    """The relative luminance (WCAG 2) of a #rrggbb colour."""
    channels = [int(color[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    red, green, blue = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def contrast(first: str, second: str) -> float:
    """The WCAG 2 contrast ratio of two #rrggbb colours (1 to 21)."""
    high, low = sorted((luminance(first), luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def ink_class(fill: str) -> str:
    """The ink class (INK) of text on a box of colour `fill`: the one that contrasts more with it."""
    return max(INK, key=lambda name: contrast(INK[name], fill))


def score_text(value: float) -> str:
    """A score as hover shows it: seven significant digits, all a float32 holds."""
    return f"{float(value):.7g}"


def _tick_text(value: float) -> str:
    return "0" if value == 0 else minus(f"{value:.3g}")


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


@dataclasses.dataclass(frozen=True)
class SaliencyState:
    """What one saliency figure shows: the tokens and their scores, its header lines, and whether it is a finished
    figure ("ready"), a run under way ("computing": `message` names it; the previous tokens stay, dimmed) or a
    problem ("error": `message` says what)."""

    tokens: Sequence[str] = ()
    positions: Sequence[int] = ()
    segments: Sequence[int] = ()  # 0 for sentence A, 1 for sentence B of a pair
    special: Sequence[bool] = ()  # [CLS] / [SEP] (drawn with a dashed outline)
    scores: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.float32))
    title: str = ""
    subtitle: str = ""  # the target
    note: str = ""
    status: str = "ready"  # ready | computing | error
    message: str = ""

    def __post_init__(self) -> None:
        if self.status not in ("ready", "computing", "error"):
            raise ValueError(f"status must be ready, computing or error, got {self.status!r}")
        counts = {len(self.tokens), len(self.positions), len(self.segments), len(self.special), len(self.scores)}
        if len(counts) != 1:
            raise ValueError(f"tokens, positions, segments, special and scores must be as long as each other, got "
                             f"{len(self.tokens)}, {len(self.positions)}, {len(self.segments)}, {len(self.special)} "
                             f"and {len(self.scores)}")

    @property
    def limit(self) -> float:
        """The colour scale runs from -limit (blue) to +limit (red): the largest finite |score|."""
        finite = np.abs(np.asarray(self.scores, dtype=np.float64))
        finite = finite[np.isfinite(finite)]
        return float(finite.max()) if finite.size else 0.0

    def header(self) -> list[tuple[str, str, int]]:
        """(class, text, font size) of the header lines: a run under way replaces the old title with what it is."""
        if self.status == "computing":
            rows = [("bvl-title bvl-status", f"{COMPUTING} {self.message}".strip(), TITLE_FONT),
                    ("bvl-note bvl-muted", "the scores below are the previous run's", NOTE_FONT)]
        else:
            rows = [("bvl-title", self.title, TITLE_FONT), ("bvl-subtitle", self.subtitle, NOTE_FONT),
                    ("bvl-note bvl-muted", self.note, NOTE_FONT)]
        return [row for row in rows if row[1]]


def saliency_layout(labels: Sequence[str], segments: Sequence[int], header: Sequence[str],
                    bar_ticks: Sequence[Sequence[Any]]) -> tuple[list[list[float]], list[list[Any]], dict[str, Any]]:
    """Boxes [x, y, width] of the tokens in reading order, wrapped at WRAP_W (sentence B on a line of its own), the
    A / B labels [y, text] in the gutter, and the positions of the header and colour bar."""
    pair = any(segments)
    left = MARGIN + (GUTTER if pair else 0)
    top = 8 + 20 * len(header) + 10
    boxes: list[list[float]] = []
    gutter: list[list[Any]] = []
    x, y, right = float(left), float(top), float(left)
    for index, label in enumerate(labels):
        width = math.ceil(text_width(label, FONT, monospace=True)) + 2 * PAD_X
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
    half_tick = max((text_width(t[1], TICK_FONT, monospace=True) for t in bar_ticks), default=0) / 2
    bar_x = math.ceil(MARGIN + half_tick)
    widest_line = max((text_width(line, TITLE_FONT) for line in [*header, BAR_TITLE]), default=0)
    total_w = math.ceil(max(right + MARGIN, bar_x + BAR_W + half_tick + MARGIN, widest_line * 1.05 + 2 * MARGIN))
    return boxes, gutter, {"left": left, "top": top, "bar_x": bar_x, "bar_y": bar_y, "bar_title_y": bar_title_y,
                           "total_w": total_w, "total_h": math.ceil(bar_y + BAR_H + 26)}


def _root(width: int, height: int, state: SaliencyState, count: int) -> str:
    data = {"status": state.status, "title": state.header()[0][1] if state.header() else "",
            "subtitle": state.subtitle if state.status != "computing" else "", "tokens": count}
    attributes = " ".join(f'data-{name}="{escape(value)}"' for name, value in data.items())
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="bvl-fig bvl-saliency" width="{width}" '
            f'height="{height}" font-size="{FONT}" {attributes}><rect class="bvl-ground" width="100%" height="100%"/>')


def _header(lines: Sequence[tuple[str, str, int]]) -> list[str]:
    parts, y = [], 8
    for css_class, text, size in lines:
        y += 20
        bold = ' font-weight="bold"' if "bvl-title" in css_class else ""
        parts.append(f'<text class="{css_class}" x="{MARGIN}" y="{y - 6}" font-size="{size}"{bold}>'
                     f"{escape(text)}</text>")
    return parts


def colorbar_svg(box: dict[str, Any], ticks: Sequence[Sequence[Any]], title: str) -> str:
    """A horizontal colour bar, negative (blue) on the left, zero in the middle, with its ticks and title."""
    colors = [hex_color(round(band * (CODES - 1) / 63)) for band in range(64)]
    return colorbar_across(box["bar_x"], box["bar_y"], BAR_W, BAR_H, colors, ticks, title, title_x=MARGIN,
                           title_gap=box["bar_y"] - box["bar_title_y"], title_font=NOTE_FONT)


def saliency_svg(state: SaliencyState) -> str:
    """One saliency figure as a standalone SVG document: header, tokens coloured by score, A / B labels, colour bar;
    while computing, the run's name in place of the title over the previous tokens, dimmed; or the error."""
    header = state.header()
    if state.status == "error":
        lines = [*header, ("bvl-error bvl-warn", state.message, NOTE_FONT)]
        width = math.ceil(max((text_width(t, TITLE_FONT) for _, t, _ in lines), default=0) * 1.05 + 2 * MARGIN)
        height = 8 + 20 * len(lines) + 16
        return _root(max(width, 320), height, state, 0) + "".join(_header(lines)) + "</svg>"
    labels = [short_token(t) for t in state.tokens]
    limit = state.limit
    ticks = colorbar_ticks(limit)
    boxes, gutter, box = saliency_layout(labels, list(state.segments), [t for _, t, _ in header], ticks)
    parts = [_root(box["total_w"], box["total_h"], state, len(labels)), *_header(header)]
    parts.append(f'<g class="bvl-body{" bvl-stale" if state.status == "computing" else ""}"><g class="bvl-tokens">')
    for index, ((x, y, w), label) in enumerate(zip(boxes, labels)):
        fill = hex_color(color_code(float(state.scores[index]), limit))
        ink = ink_class(fill)
        dash = ' stroke-dasharray="3,2"' if state.special[index] else ""
        token = state.tokens[index]
        whole = f"<title>{escape(token)}</title>" if label != token else ""  # a cut token, whole in the static copy
        parts.append(f'<g class="bvl-token" data-index="{index}" data-position="{int(state.positions[index])}">'
                     f'<rect class="bvl-token-box" x="{x:g}" y="{y:g}" width="{w:g}" height="{BOX_H}" rx="3" '
                     f'fill="{fill}"/><rect class="bvl-rule" x="{x:g}" y="{y:g}" width="{w:g}" height="{BOX_H}" '
                     f'rx="3" stroke-width="0.6"{dash}/>'
                     f'<text class="{ink}" x="{x + PAD_X:g}" y="{y + BOX_H / 2 + FONT * 0.35:.1f}" '
                     f'fill="{INK[ink]}">{escape(label)}</text>{whole}</g>')
    parts.append("</g>")
    for y, text in gutter:
        parts.append(f'<text class="bvl-segment bvl-muted" x="{MARGIN}" y="{y + BOX_H / 2 + FONT * 0.35:.1f}" '
                     f'font-weight="bold">{escape(text)}</text>')
    parts.append(colorbar_svg(box, ticks, BAR_TITLE))
    parts.append("</g></svg>")
    return "".join(parts)
