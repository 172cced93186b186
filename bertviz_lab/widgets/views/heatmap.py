"""The heatmap's browser view: one attention matrix, its tokens, title and colour bar."""

from __future__ import annotations

from typing import Any, Sequence

import anywidget
import numpy as np
import traitlets

from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.heatmap import (
    cell_size,
    heatmap_layout,
    heatmap_svg,
    tick_labels,
)
from bertviz_lab.widgets.views.front_end import css, esm


def _array(buffer: bytes | memoryview, dtype: Any) -> np.ndarray:
    return np.frombuffer(bytes(buffer), dtype=dtype)


class HeatmapView(anywidget.AnyWidget):
    """One attention matrix as 8-bit colour codes with what turns them back into weights (see
    attention_data.HeatmapCodes), token labels, title and colour bar; hover asks the kernel for the exact weight."""

    _esm = esm("heatmap.js")
    _css = css("heatmap")
    codes = traitlets.Bytes(b"").tag(sync=True)  # uint8 (rows, cols), row-major
    mode = traitlets.Unicode("linear").tag(sync=True)  # linear | row | log
    scale = traitlets.Float(0.0).tag(sync=True)  # linear: weight = code × scale
    row_scales = traitlets.Bytes(b"").tag(sync=True)  # float32 (rows,): "row": weight = code × row_scales[row]
    log_range = traitlets.List(traitlets.Float(), default_value=[0.0, 0.0]).tag(sync=True)  # "log": (floor, top)
    overflow_index = traitlets.Bytes(b"").tag(sync=True)  # uint32: cells above the colour range (code 255) ...
    overflow_values = traitlets.Bytes(b"").tag(sync=True)  # float32: ... and their exact weights
    palette = traitlets.Bytes(D.PALETTE.tobytes()).tag(sync=True)  # (256, 3) uint8 colours of the codes
    row_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)  # query tokens, top to bottom
    col_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)  # key tokens, left to right
    row_positions = traitlets.List(traitlets.Int()).tag(sync=True)  # their positions in the input
    col_positions = traitlets.List(traitlets.Int()).tag(sync=True)
    row_ticks = traitlets.List().tag(sync=True)  # [index, label] of the labels drawn (thinned out at large n)
    col_ticks = traitlets.List().tag(sync=True)
    bar_ticks = traitlets.List().tag(sync=True)  # [position 0..1 from the bottom, weight as text]
    bar_title = traitlets.Unicode("attention weight").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    note = traitlets.Unicode("").tag(sync=True)
    geometry = traitlets.Dict().tag(sync=True)  # heatmap_layout(): the same pixel positions as the SVG

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.values = np.zeros((0, 0), dtype=np.float32)  # the exact weights on screen (kernel side only)
        self.on_msg(self._answer)

    def show(self, matrix: np.ndarray, row_tokens: Sequence[str], col_tokens: Sequence[str],
             row_positions: Sequence[int], col_positions: Sequence[int], title: str, note: str = "",
             mode: str = "linear", ignore_rows: np.ndarray | None = None,
             ignore_cols: np.ndarray | None = None) -> None:
        """Send a matrix in one message: the front end never draws half-updated state."""
        encoded = D.encode_heatmap(matrix, mode, ignore_rows, ignore_cols)
        bar_ticks, bar_title = D.colorbar_ticks(encoded)
        rows, cols = encoded.codes.shape
        cell = cell_size(rows, cols)
        row_ticks = tick_labels(list(row_tokens), list(row_positions), cell)
        col_ticks = tick_labels(list(col_tokens), list(col_positions), cell)
        self.values = np.asarray(matrix, dtype=np.float32)
        with self.hold_sync():
            self.codes = encoded.codes.tobytes()
            self.mode, self.scale = encoded.mode, encoded.scale
            self.row_scales, self.log_range = encoded.row_scales.tobytes(), list(encoded.log_range)
            self.overflow_index = encoded.overflow_index.tobytes()
            self.overflow_values = encoded.overflow_values.tobytes()
            self.row_tokens, self.col_tokens = list(row_tokens), list(col_tokens)
            self.row_positions, self.col_positions = [int(p) for p in row_positions], [int(p) for p in col_positions]
            self.row_ticks, self.col_ticks = [list(t) for t in row_ticks], [list(t) for t in col_ticks]
            self.bar_ticks, self.bar_title = [list(t) for t in bar_ticks], bar_title
            self.title, self.note = title, note
            self.geometry = heatmap_layout(rows, cols, row_ticks, col_ticks, title, note, bar_ticks)

    def encoded(self) -> D.HeatmapCodes:
        """The synced state as HeatmapCodes, exactly what the front end holds."""
        rows, cols = len(self.row_tokens), len(self.col_tokens)
        return D.HeatmapCodes(_array(self.codes, np.uint8).reshape(rows, cols), self.mode, self.scale,
                              _array(self.row_scales, np.float32), (self.log_range[0], self.log_range[1]),
                              _array(self.overflow_index, np.uint32), _array(self.overflow_values, np.float32))

    def weights(self) -> np.ndarray:
        """The weights the front end reads back from the synced codes (hover, colour bar), as float64."""
        return D.decode_heatmap(self.encoded())

    def digest(self) -> str:
        """The fingerprint the front end writes to data-digest after drawing these codes."""
        return D.digest(_array(self.codes, np.uint8))

    def _answer(self, _: Any, content: dict, buffers: list) -> None:
        """Hover asks for a cell's exact weight: the 8-bit codes only carry it to within one colour step."""
        if not isinstance(content, dict) or content.get("type") != "weight":
            return
        row, col = content.get("row"), content.get("col")
        if not (isinstance(row, int) and isinstance(col, int) and 0 <= row < self.values.shape[0]
                and 0 <= col < self.values.shape[1]):
            return
        self.send({"type": "weight", "row": row, "col": col, "seq": content.get("seq"),
                   "value": float(self.values[row, col])})

    def to_svg(self) -> str:
        """The figure on screen as a standalone SVG document (cells exact to the colour, tooltips exact)."""
        state = {name: getattr(self, name) for name in (
            "codes", "palette", "geometry", "row_tokens", "col_tokens", "row_positions", "col_positions", "row_ticks",
            "col_ticks", "title", "note", "bar_ticks", "bar_title")}
        exact = self.values if self.values.shape == (len(self.row_tokens), len(self.col_tokens)) else None
        return heatmap_svg(state, exact)
