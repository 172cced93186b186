"""The colours every figure and panel shares: one per role, one per attention head, and the ink that reads on each.

Data colours are the only explicit colours in a figure (text, ground and rules come from the theme's stylesheet), so
they are chosen to read on both grounds: every series and head colour has a contrast of at least 3:1 against white
and against the dark theme's near-black (#111). Text drawn on a coloured fill takes `ink_on(fill)`.
"""

from __future__ import annotations

from bertviz_lab.widgets.figures.contrast import contrast_ratio, ink_on

GROUNDS = ("#ffffff", "#111111")  # the light and dark themes' grounds every series colour must read on
MIN_TEXT_CONTRAST = 4.5  # WCAG AA for text
MIN_LINE_CONTRAST = 3.0  # WCAG for graphics (lines, markers)

# One colour per masking fate / token role; chips draw them with ink_on(colour) text.
COLORS = {
    "mask": "#d62728",
    "random": "#ff7f0e",
    "kept": "#2ca02c",
    "untouched": "#e8e8e8",
    "special": "#9e9e9e",
    "sentence_a": "#1f77b4",
    "sentence_b": "#9467bd",
}
# The loss curves' series: lines on the figure's ground (light or dark), so each reads on both. A task keeps its
# colour in every chart (MLM blue, NSP orange): a blue and an orange stay apart for readers with red-green colour
# blindness, where a green and a red accuracy curve looked alike (tests/widgets/test_colour_vision.py).
CURVE_COLORS = {
    "mlm": "#1f77b4",
    "nsp": "#d95f02",
    "mlm_accuracy": "#1f77b4",
    "nsp_accuracy": "#d95f02",
    "lr": "#7f7f7f",
}
# A heatmap cell beyond its colour scale (a clipped [CLS]/[SEP] weight) and the colour bar's overflow end: ColorBrewer
# "Oranges", apart from every blue of the scale (and from its top, 3.4:1), reads on both grounds.
OVERFLOW_COLOR = "#e6550d"
HEAD_COLORS = ["#1f77b4", "#e07000", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#cc4fa6", "#7f7f7f",
               "#8f8f00", "#0f8fa0", "#6b6fd0", "#637939", "#8c6d31", "#c0504d", "#a8559b", "#3182bd"]


def reads_on_both_grounds(color: str) -> bool:
    """True when a line in `color` keeps a 3:1 contrast on the light and on the dark ground."""
    return all(contrast_ratio(color, ground) >= MIN_LINE_CONTRAST for ground in GROUNDS)


__all__ = ["COLORS", "CURVE_COLORS", "HEAD_COLORS", "OVERFLOW_COLOR", "GROUNDS", "MIN_TEXT_CONTRAST", "ink_on",
           "reads_on_both_grounds"]
