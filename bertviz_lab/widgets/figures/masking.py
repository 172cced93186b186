"""The masking preview as one drawing: title, legend, each token as a chip coloured by its fate, counts, predictions.

A chip's fate shows three ways, so it reads without colour (red/green colour blindness included): its fill, its
outline ([MASK] solid, random dashed, kept dotted) and a text mark ("[MASK]", "before → after" for a random token,
"= token" for a kept one; the original token under every selected one). Chip text takes the ink (black or white)
that reads on the chip's fill; every other text takes the theme's. A token chip that a click masks or unmasks
carries data-position and data-toggle; the live view (views/masking_view.js) makes those chips buttons.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from bertviz_lab.widgets.figures.charts import svg_open
from bertviz_lab.widgets.figures.contrast import ink_class, ink_on
from bertviz_lab.widgets.figures.palette import COLORS
from bertviz_lab.widgets.figures.text import escape, text_width

# (legend name, fate) in the order the legend shows them
FATES = (("[MASK]", "mask"), ("→ random", "random"), ("= kept", "kept"), ("untouched", "untouched"),
         ("special / padding", "special"))
KEPT_MARK = "= "  # before a kept token's text: kept and untouched chips differ by more than their colour
OUTLINES = {"mask": "", "random": "4,2", "kept": "1.5,1.5"}  # dash pattern of the outline ('' solid); others none
CHIP_H, LABEL_H, FONT, LABEL_FONT = 18, 13, 12, 10


@dataclasses.dataclass(frozen=True)
class Chip:
    """One token: the text on the chip, the label under it ('' for none), its fate and its hover text."""

    text: str
    label: str
    fate: str
    tooltip: str
    position: int | None = None  # the token's position (None: a legend swatch)
    toggle: bool = False  # a click masks or unmasks it
    token: str = ""  # the token as the text has it, for a toggle's accessible name

    def __post_init__(self) -> None:
        if self.fate not in COLORS:
            raise ValueError(f"fate must be one of {[fate for _, fate in FATES]}, got {self.fate!r}")


@dataclasses.dataclass(frozen=True)
class MaskingState:
    """What the preview shows, as text: the figure is drawn from this alone."""

    title: str
    chips: Sequence[Chip]
    summary: str
    notice: str = ""  # the truncation notice, when the text was cut
    nsp: str = ""  # the next-sentence head's line, for a pair
    note: str = ""  # which model predicts, or why there are no predictions
    headers: Sequence[str] = ()
    rows: Sequence[Sequence[str]] = ()
    mode: str = "sample"  # "choose": the typed [MASK]s and the clicked tokens; "sample": BERT's 80/10/10
    hint: str = ""  # how to mask a token, under the chips


def chip_width(text: str, label: str) -> float:
    """How wide a chip draws: its text or its label, whichever is wider, and a margin."""
    return max(text_width(text, FONT, True), text_width(label, LABEL_FONT, True)) + 10


def chip_svg(x: float, y: float, chip: Chip) -> str:
    """One chip at (x, y): its fill, its fate's outline in the chip's ink, its text, and its label below."""
    width, fill = chip_width(chip.text, chip.label), COLORS[chip.fate]
    ink = ink_on(fill)
    data = "" if chip.position is None else f' data-position="{chip.position}"'
    data += f' data-toggle="true" data-token="{escape(chip.token)}"' if chip.toggle else ""
    parts = [f'<g class="bvl-chip bvl-{chip.fate}"{data}><title>{escape(chip.tooltip)}</title>'
             f'<rect x="{x:g}" y="{y:g}" width="{width:.1f}" height="{CHIP_H}" rx="4" fill="{fill}"/>']
    if chip.fate in OUTLINES:
        dash = f' stroke-dasharray="{OUTLINES[chip.fate]}"' if OUTLINES[chip.fate] else ""
        parts.append(f'<rect class="bvl-chip-outline" x="{x + 1.5:g}" y="{y + 1.5:g}" width="{width - 3:.1f}" '
                     f'height="{CHIP_H - 3}" rx="3" fill="none" stroke="{ink}" stroke-width="1.2"{dash}/>')
    parts.append(f'<text class="bvl-mono {ink_class(ink)}" x="{x + width / 2:.1f}" y="{y + 13:g}" '
                 f'text-anchor="middle" font-size="{FONT}">{escape(chip.text)}</text>')
    if chip.label:
        parts.append(f'<text class="bvl-mono bvl-muted bvl-chip-label" x="{x + width / 2:.1f}" '
                     f'y="{y + CHIP_H + 11:g}" text-anchor="middle" font-size="{LABEL_FONT}">'
                     f"{escape(chip.label)}</text>")
    parts.append("</g>")
    return "".join(parts)


class _Layout:
    """Lays the figure out top to bottom; chips wrap into rows."""

    def __init__(self, width: int) -> None:
        self.width, self.right, self.y = width, 0.0, 0.0
        self.parts: list[str] = []

    def line(self, text: str, size: int = 12, css_class: str = "", bold: bool = False) -> None:
        self.y += size + 6
        self.right = max(self.right, 8 + text_width(text, size))
        weight = ' font-weight="bold"' if bold else ""
        self.parts.append(f'<text class="{css_class}" x="8" y="{self.y:g}" font-size="{size}"{weight}>'
                          f"{escape(text)}</text>")

    def chips(self, chips: Sequence[Chip], with_labels: bool = True) -> None:
        x, row_h = 8.0, CHIP_H + (LABEL_H if with_labels else 0) + 4
        self.y += 6
        for chip in chips:
            width = chip_width(chip.text, chip.label)
            if x + width + 4 > self.width - 8 and x > 8:
                x, self.y = 8.0, self.y + row_h
            self.parts.append(chip_svg(x, self.y, chip))
            x += width + 4
            self.right = max(self.right, x)
        self.y += row_h

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        cells = [list(headers), *[list(row) for row in rows]]
        widths = [max(text_width(r[i], FONT, True) for r in cells) + 16 for i in range(len(headers))]
        for index, row in enumerate(cells):
            self.y += 18
            x = 8.0
            weight = ' font-weight="bold"' if index == 0 else ""
            for cell, w in zip(row, widths):
                self.parts.append(f'<text class="bvl-mono" x="{x:g}" y="{self.y:g}" font-size="{FONT}"{weight}>'
                                  f"{escape(cell)}</text>")
                x += w
            self.right = max(self.right, x)


def masking_figure(state: MaskingState, width: int = 900) -> str:
    """The preview as one standalone SVG document (root `bvl-fig bvl-masking`), `width` pixels wide or wider; the
    root's data-mode and data-masked (the [MASK] positions) say what it shows, for tools and tests."""
    layout = _Layout(width)
    layout.line(state.title, 14, "bvl-title", bold=True)
    if state.notice:
        layout.line(state.notice, 12, "bvl-warn bvl-truncation-notice")
    layout.chips([Chip(name, "", fate, name) for name, fate in FATES], with_labels=False)
    layout.chips(state.chips)
    if state.hint:
        layout.line(state.hint, 11, "bvl-muted bvl-hint")
    layout.line(state.summary, css_class="bvl-summary")
    if state.nsp:
        layout.line(state.nsp, css_class="bvl-nsp")
    if state.note:
        layout.line(state.note, 12, "bvl-muted bvl-model-note")
    if state.rows:
        layout.table(state.headers, state.rows)
    width, height = math.ceil(max(layout.width, layout.right + 8)), math.ceil(layout.y + 12)
    masked = ",".join(str(chip.position) for chip in state.chips if chip.fate == "mask" and chip.position is not None)
    root = svg_open(width, height, "masking", 12).replace(
        "<svg ", f'<svg data-mode="{escape(state.mode)}" data-masked="{masked}" ', 1)
    return root + "".join(layout.parts) + "</svg>"
