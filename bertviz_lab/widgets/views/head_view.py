"""The bertviz-style head view in the browser: the drawing of figures.head_view, and the heads its chips choose."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import anywidget
import numpy as np
import traitlets

from bertviz_lab.widgets.figures import head_view as figure
from bertviz_lab.widgets.views.front_end import css, esm


class HeadView(anywidget.AnyWidget):
    """Query tokens on the left, key tokens on the right, a line per (query, key) per shown head; opacity = weight.

    The browser gets the drawing (`svg`) and the heads shown (`heads`): a chip clicked there changes `heads`, and
    the kernel draws again; hovering a token only dims the other lines. The lines' data stays in the kernel.
    A long text shows a window of rows: `query` is the selected query row (-1: none), `first` the window's first row;
    the arrow keys there (or the wheel, which moves only the window) write them, and the kernel draws that window.
    """

    _esm = esm("head_view.js")
    _css = css("head_view")
    svg = traitlets.Unicode("").tag(sync=True)  # the figure: exactly what to_svg() returns
    heads = traitlets.List(traitlets.Int()).tag(sync=True)  # the heads shown, chosen with the chips
    query = traitlets.Int(-1).tag(sync=True)  # the selected query row, -1 for none
    first = traitlets.Int(0).tag(sync=True)  # the first row of the window drawn
    # what is drawn, kept in the kernel (not sent): the panel and the tests read it
    num_heads = traitlets.Int(0)
    query_tokens = traitlets.List(traitlets.Unicode())
    key_tokens = traitlets.List(traitlets.Unicode())
    title = traitlets.Unicode("")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._indices = np.zeros((0, 0, 1), np.uint16)
        self._weights = np.zeros((0, 0, 1), np.float32)
        self._open_listeners: list[Callable[[int, int], None]] = []
        self._holding = False
        self._positions: list[int] | None = None  # the query rows' positions in the input
        self.on_msg(self._front_end_message)
        self.observe(lambda _: self._draw(), names=["heads", "query", "first"])

    @property
    def k(self) -> int:
        """How many keys each query keeps a line to."""
        return self._indices.shape[-1]

    def show(self, query_tokens: Sequence[str], key_tokens: Sequence[str], indices: np.ndarray, weights: np.ndarray,
             title: str, query: int | None = None, query_positions: Sequence[int] | None = None) -> None:
        """Draw a layer's lines: indices and weights (num_heads, queries, k), each query's k strongest keys; `query`
        selects a query row (None keeps the one selected), and the window moves to show it; query_positions name
        the window's rows in its title (default: the rows)."""
        indices, weights = np.asarray(indices), np.asarray(weights, dtype=np.float32)
        if indices.ndim != 3 or indices.shape != weights.shape or indices.shape[1] != len(query_tokens):
            raise ValueError(f"indices {indices.shape} and weights {weights.shape} must both be (heads, "
                             f"{len(query_tokens)} queries, k)")
        if indices.size and int(indices.max()) >= len(key_tokens):
            raise ValueError(f"a line points at key {int(indices.max())}, but there are {len(key_tokens)} key tokens")
        query = self.query if query is None else query
        if not -1 <= query < len(query_tokens):
            query = -1
        self._indices, self._weights = indices, weights
        self._positions = None if query_positions is None else [int(p) for p in query_positions]
        self.query_tokens, self.key_tokens, self.title = list(query_tokens), list(key_tokens), title
        self.num_heads = indices.shape[0]
        self._holding = True  # one drawing for the whole change, not one per trait
        try:
            self.query = query
            self.first = figure.window_first(query, self.first, len(query_tokens))
        finally:
            self._holding = False
        self._draw()

    def _draw(self) -> None:
        if self._holding:
            return
        self.svg = figure.head_view_svg(self.query_tokens, self.key_tokens, self._indices, self._weights,
                                        self.heads, self.title, self.query, self.first,
                                        query_positions=self._positions) if self.num_heads else ""

    def on_open(self, callback: Callable[[int, int], None]) -> None:
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
        """The lines of every head of the layer: (key indices, weights), each (num_heads, queries, k)."""
        return self._indices, self._weights

    def strongest(self) -> float:
        """The largest weight among the shown heads' lines: line opacity is weight ÷ this."""
        return figure.strongest(self._weights, self.heads)

    def note(self) -> str:
        """How to read the lines (the drawing shows it under its title)."""
        return figure.head_view_note(self._weights, [h for h in self.heads if h < self.num_heads])

    def full_title(self) -> str:
        """The title as drawn: layer, pair direction, the heads on."""
        return figure.head_view_title(self.title, [h for h in self.heads if 0 <= h < self.num_heads])

    def to_plotly(self) -> Any:
        """The layer's lines as a plotly Figure: every query (not only the window drawn), the shown heads' lines in
        their colours with the drawing's opacity, hover with head, query, key and weight."""
        from bertviz_lab.widgets.figures.plotly_figures import head_view_figure

        if not self.num_heads:
            raise ValueError("the head view shows nothing yet: there is no figure to give to plotly.")
        return head_view_figure(self.query_tokens, self.key_tokens, self._indices, self._weights, self.heads,
                                [figure.head_color(h) for h in range(self.num_heads)], self.full_title(),
                                self.note(), figure.MIN_OPACITY)

    def to_svg(self) -> str:
        """The head view as a standalone SVG document: the same drawing the browser shows."""
        return self.svg
