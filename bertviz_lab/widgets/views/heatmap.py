"""The heatmap's browser view: the drawing of one attention matrix, and the exact weights hover reads."""

from __future__ import annotations

from typing import Sequence

import anywidget
import numpy as np
import traitlets

from bertviz_lab.widgets.figures.heatmap import heatmap_svg
from bertviz_lab.widgets.views.front_end import css, esm

VALUES_DTYPE = np.float16  # hover's weights: 0.5 MB at 512 × 512 tokens, within 2.5e-4 of the traced weight


class HeatmapView(anywidget.AnyWidget):
    """One attention matrix: its drawing (figures.heatmap) and, for hover in the browser, the weights as float16."""

    _esm = esm("heatmap.js")
    _css = css("heatmap")
    svg = traitlets.Unicode("").tag(sync=True)  # the figure: exactly what to_svg() returns
    values = traitlets.Bytes(b"").tag(sync=True)  # float16 (rows, cols), row-major: the weights hover shows
    row_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)  # query tokens, top to bottom
    col_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)  # key tokens, left to right
    row_positions = traitlets.List(traitlets.Int()).tag(sync=True)  # their positions in the input
    col_positions = traitlets.List(traitlets.Int()).tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)  # what is shown; the front end writes it to data-title once drawn

    def show(self, matrix: np.ndarray, row_tokens: Sequence[str], col_tokens: Sequence[str],
             row_positions: Sequence[int], col_positions: Sequence[int], title: str, note: str = "",
             mode: str = "linear", ignore_rows: np.ndarray | None = None,
             ignore_cols: np.ndarray | None = None) -> None:
        """Send a matrix in one message: the front end never draws half-updated state."""
        matrix = np.asarray(matrix)
        if matrix.shape != (len(row_tokens), len(col_tokens)):
            raise ValueError(f"the matrix has shape {matrix.shape}, but there are {len(row_tokens)} query and "
                             f"{len(col_tokens)} key tokens")
        drawing = heatmap_svg(matrix, row_tokens, col_tokens, row_positions, col_positions, title, note, mode,
                              ignore_rows, ignore_cols)
        labels = {"row_tokens": list(row_tokens), "col_tokens": list(col_tokens),
                  "row_positions": [int(p) for p in row_positions], "col_positions": [int(p) for p in col_positions]}
        with self.hold_sync():
            self.svg = drawing
            self.values = np.ascontiguousarray(matrix, dtype=VALUES_DTYPE).tobytes()
            for name, value in labels.items():  # the same tokens at another layer: not validated and sent again
                if value != getattr(self, name):
                    setattr(self, name, value)
            self.title = title

    def weights(self) -> np.ndarray:
        """The weights the front end holds for hover, as a (rows, cols) float32 array."""
        shape = (len(self.row_tokens), len(self.col_tokens))
        return np.frombuffer(bytes(self.values), dtype=VALUES_DTYPE).reshape(shape).astype(np.float32)

    def to_svg(self) -> str:
        """The figure on screen as a standalone SVG document: the same drawing the browser shows."""
        return self.svg
