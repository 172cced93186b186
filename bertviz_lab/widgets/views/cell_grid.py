"""The causal views' widget: one drawing of cells (figures.cell_grid's contract) that hover and the keyboard read
without the kernel, and whose cells a click or Enter opens.

The patching maps, the logit lens and the FFN-neuron figures are all grids of numbers: a cell is a layer and a
token, a layer and a head, a layer and a rank, a neuron or a token. Each figure writes, on every cell, what hover
shows (`data-tip`, the exact value) and where it is (`data-row`, `data-col`), so one front end serves them all and a
saved notebook reads the same numbers without its kernel.
"""

from __future__ import annotations

from typing import Any, Callable

import anywidget
import traitlets

from bertviz_lab.widgets.views.front_end import css, esm


class CellGridView(anywidget.AnyWidget):
    """A figure of cells (`svg`, exactly what to_svg() returns), its `title` (what it shows, for readers and tests),
    and the cell last opened (`selected`: [row, col], or [] for none); `message` replaces the figure with one line
    where there is nothing to draw (no MLM head, no text yet)."""

    _esm = esm("cell_grid.js")
    _css = css("cell_grid")
    svg = traitlets.Unicode("").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    message = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.List(traitlets.Int()).tag(sync=True)
    label = traitlets.Unicode("").tag(sync=True)  # what the figure is, for a screen reader ("patching effects")

    def __init__(self, label: str = "", **kwargs: Any) -> None:
        super().__init__(label=label, **kwargs)
        self._open_listeners: list[Callable[[int, int], None]] = []
        self.on_msg(self._front_end_message)

    def show(self, svg: str, title: str, selected: tuple[int, int] | None = None) -> None:
        """Show one drawing (made by a figures/ function that follows figures.cell_grid's contract)."""
        with self.hold_sync():
            self.message = ""
            self.svg, self.title = svg, title
            self.selected = list(selected) if selected is not None else []

    def clear(self, message: str) -> None:
        """Show `message` (one line, escaped by the front end) instead of a figure."""
        with self.hold_sync():
            self.svg, self.title, self.selected, self.message = "", "", [], message

    def on_open(self, callback: Callable[[int, int], None]) -> None:
        """Call `callback(row, col)` when a cell is clicked (or Enter/Space pressed on it) in the browser."""
        self._open_listeners.append(callback)

    def open_cell(self, row: int, col: int) -> None:
        """Open a cell as a click on it would: it becomes `selected` and every on_open callback gets it."""
        self.selected = [int(row), int(col)]
        for callback in list(self._open_listeners):
            callback(int(row), int(col))

    def _front_end_message(self, _: Any, content: Any, buffers: list) -> None:
        if (isinstance(content, dict) and content.get("type") == "open"
                and isinstance(content.get("row"), int) and isinstance(content.get("col"), int)):
            self.open_cell(content["row"], content["col"])

    def to_svg(self) -> str:
        """The figure on screen as a standalone SVG document: the same drawing the browser shows."""
        return self.svg
