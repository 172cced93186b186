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

from bertviz_lab.widgets.figures.text import escape

CELL_CLASS = "bvl-cell"


def cell_attributes(row: int, col: int, tip: str, opens: bool = True) -> str:
    """The attributes (escaped, with a leading space) that make an element a cell of the grid."""
    extra = "" if opens else ' data-opens="false"'
    return f' data-row="{int(row)}" data-col="{int(col)}" data-tip="{escape(tip)}"{extra}'


def cell_title(tip: str) -> str:
    """The <title> a cell carries: the same text as its data-tip, for hover where no script runs."""
    return f"<title>{escape(tip)}</title>"
