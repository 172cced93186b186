"""What a causal figure writes on its cells so that one front end (views/cell_grid.js) reads them all: hover, focus
and the keys show a cell's exact value without the kernel, and a click or Enter opens it.

A cell is any SVG element of class `bvl-cell` (a <rect>, or a <g> around a rect and its label) with:
  data-row, data-col  its place in the figure's grid (integers: the arrow keys move by them, and an opened cell is
                      sent to the kernel as this pair);
  data-tip            the exact text hover shows (a value at full precision, the token, the layer);
and a <title> child with the same text, so the static copy, an export opened in a browser and the offline page show
it on hover too. A cell that opens nothing adds data-opens="false".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bertviz_lab.widgets.figures.text import escape

CELL_CLASS = "bvl-cell"


def cell_attributes(row: int, col: int, tip: str, opens: bool = True) -> str:
    """The attributes (escaped, with a leading space) that make an element a cell of the grid."""
    extra = "" if opens else ' data-opens="false"'
    return f' data-row="{int(row)}" data-col="{int(col)}" data-tip="{escape(tip)}"{extra}'


def cell_title(tip: str) -> str:
    """The <title> a cell carries: the same text as its data-tip, for hover where no script runs."""
    return f"<title>{escape(tip)}</title>"


def exact(value: Any, decimals: int = 0) -> str:
    """A number as a tip writes it: the shortest decimal that reads back as the same number (a float32's own digits
    where it is one, as the model's outputs are: 0.312456, not 0.31245601177215576; 2.0 for two), with at least
    `decimals` decimals; nan and ±inf by name."""
    value = float(value)
    if not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    single = np.float32(value)
    text = np.format_float_positional(single if float(single) == value else np.float64(value), unique=True,
                                      trim="0")
    whole, _, fraction = text.partition(".")
    return f"{whole}.{fraction.ljust(decimals, '0')}"
