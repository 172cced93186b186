"""The heatmap's browser view: the drawing of one attention matrix (or a window of it), and the exact weights hover
reads."""

from __future__ import annotations

from typing import Any, Sequence

import anywidget
import numpy as np
import torch
import traitlets

from bertviz_lab.widgets.figures.heatmap import heatmap_svg, window_title
from bertviz_lab.widgets.views.front_end import css, esm

VALUES_DTYPE = np.float16  # hover's weights: 0.5 MB at 512 × 512 tokens, within 2.5e-4 of the traced weight


def float16_bytes(matrix: np.ndarray) -> bytes:
    """The matrix as row-major float16 bytes, rounded to nearest as NumPy's cast does: PyTorch's vectorised cast
    takes 0.1 ms at 512 × 512 where NumPy's takes 15 ms, on every layer change."""
    return torch.from_numpy(np.ascontiguousarray(matrix, dtype=np.float32)).to(torch.float16).numpy().tobytes()


def span_of(positions: Sequence[int], start: int, end: int) -> tuple[int, int] | None:
    """The indices [first, last) of the ascending `positions` that lie in [start, end); None when none does."""
    at = np.asarray(positions)
    first, last = int(np.searchsorted(at, start, "left")), int(np.searchsorted(at, end, "left"))
    return (first, last) if last > first else None


class HeatmapView(anywidget.AnyWidget):
    """One attention matrix: its drawing (figures.heatmap) and, for hover in the browser, the weights as float16.

    `window` is the zoom: [query_start, query_end, key_start, key_end] as token positions (ends excluded), [] for the
    whole matrix; `selected` is the cell chosen with Enter/Space or a click, [query_position, key_position] or [].
    Both are kernel state that any front end writes; the kernel draws the window and marks the cell, so the static
    copy and exports show what is on screen. Hover reads every weight of the matrix, zoomed or not.
    """

    _esm = esm("heatmap.js")
    _css = css("heatmap")
    svg = traitlets.Unicode("").tag(sync=True)  # the figure: exactly what to_svg() returns
    values = traitlets.Bytes(b"").tag(sync=True)  # float16 (rows, cols), row-major: the weights hover shows
    row_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)  # query tokens, top to bottom
    col_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)  # key tokens, left to right
    row_positions = traitlets.List(traitlets.Int()).tag(sync=True)  # their positions in the input
    col_positions = traitlets.List(traitlets.Int()).tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)  # the drawn title (window included); the front end writes it to
    # data-title once drawn
    window = traitlets.List(traitlets.Int()).tag(sync=True)
    selected = traitlets.List(traitlets.Int()).tag(sync=True)
    # raised by one when the view is opened from another (a model-view thumbnail): the cell area takes the focus
    # as soon as it is on screen, so the keyboard stays in the figure instead of falling to the page
    focus_request = traitlets.Int(0).tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._drawing: dict[str, Any] | None = None  # what show() was given: the window is drawn from it
        self.observe(lambda _: self._draw(), names=["window", "selected"])

    @traitlets.validate("window")
    def _check_window(self, proposal: dict) -> list[int]:
        window = list(proposal["value"])
        if window and (len(window) != 4 or not (window[0] < window[1] and window[2] < window[3])):
            raise traitlets.TraitError(f"window must be [] or [query_start, query_end, key_start, key_end] with "
                                       f"each start below its end, got {window}")
        return window

    @traitlets.validate("selected")
    def _check_selected(self, proposal: dict) -> list[int]:
        selected = list(proposal["value"])
        if selected and len(selected) != 2:
            raise traitlets.TraitError(f"selected must be [] or [query_position, key_position], got {selected}")
        return selected

    def show(self, matrix: np.ndarray, row_tokens: Sequence[str], col_tokens: Sequence[str],
             row_positions: Sequence[int], col_positions: Sequence[int], title: str, note: str = "",
             mode: str = "linear", ignore_rows: np.ndarray | None = None,
             ignore_cols: np.ndarray | None = None) -> None:
        """Send a matrix in one message (the window and the selected cell kept): the front end never draws
        half-updated state."""
        matrix = np.asarray(matrix)
        if matrix.shape != (len(row_tokens), len(col_tokens)):
            raise ValueError(f"the matrix has shape {matrix.shape}, but there are {len(row_tokens)} query and "
                             f"{len(col_tokens)} key tokens")
        labels = {"row_tokens": list(row_tokens), "col_tokens": list(col_tokens),
                  "row_positions": [int(p) for p in row_positions], "col_positions": [int(p) for p in col_positions]}
        self._drawing = {"matrix": matrix, "title": title, "note": note, "mode": mode, "ignore_rows": ignore_rows,
                         "ignore_cols": ignore_cols, **labels}
        with self.hold_sync():
            self.values = float16_bytes(matrix)
            for name, value in labels.items():  # the same tokens at another layer: not validated and sent again
                if value != getattr(self, name):
                    setattr(self, name, value)
            self._draw()

    def index_window(self, window: Sequence[int] | None = None) -> tuple[int, int, int, int] | None:
        """A window of token positions (default: the one shown) as matrix indices (row_start, row_end, col_start,
        col_end); None for the whole matrix, also where it holds no shown token."""
        window = self.window if window is None else window
        if not window or self._drawing is None:
            return None
        rows = span_of(self._drawing["row_positions"], window[0], window[1])
        cols = span_of(self._drawing["col_positions"], window[2], window[3])
        if rows is None or cols is None:
            return None
        whole = rows == (0, len(self._drawing["row_positions"])) and cols == (0, len(self._drawing["col_positions"]))
        return None if whole else (*rows, *cols)

    def drawing(self, window: Sequence[int] | None = None) -> tuple[str, str]:
        """The figure with a window of token positions (default: the one shown) drawn, as a standalone SVG, and its
        title."""
        if self._drawing is None:
            return "", ""
        given = self._drawing
        shown = self.index_window(window)
        cell = None
        if len(self.selected) == 2:
            rows = span_of(given["row_positions"], self.selected[0], self.selected[0] + 1)
            cols = span_of(given["col_positions"], self.selected[1], self.selected[1] + 1)
            cell = (rows[0], cols[0]) if rows and cols else None
        svg = heatmap_svg(given["matrix"], given["row_tokens"], given["col_tokens"], given["row_positions"],
                          given["col_positions"], given["title"], given["note"], given["mode"], given["ignore_rows"],
                          given["ignore_cols"], shown, cell)
        return svg, window_title(given["title"], given["row_positions"], given["col_positions"], shown)

    def _draw(self) -> None:
        svg, title = self.drawing()
        with self.hold_sync():
            self.svg, self.title = svg, title

    def weights(self) -> np.ndarray:
        """The weights the front end holds for hover, as a (rows, cols) float32 array."""
        shape = (len(self.row_tokens), len(self.col_tokens))
        return np.frombuffer(bytes(self.values), dtype=VALUES_DTYPE).reshape(shape).astype(np.float32)

    def to_svg(self) -> str:
        """The figure on screen as a standalone SVG document: the same drawing the browser shows."""
        return self.svg

    def to_plotly(self) -> Any:
        """The map shown, whole (every query and key, not only a zoomed window), as a plotly Figure with the
        drawing's colour scale, title and hover."""
        from bertviz_lab.widgets.figures.plotly_figures import heatmap_figure

        if self._drawing is None:
            raise ValueError("the heatmap shows nothing yet: there is no figure to give to plotly.")
        given = self._drawing
        title = given["title"] if given["mode"] == "linear" else f"{given['title']} (in plotly: linear scale)"
        return heatmap_figure(given["matrix"], given["row_tokens"], given["col_tokens"], given["row_positions"],
                              given["col_positions"], title, given["note"], given["ignore_rows"],
                              given["ignore_cols"])

