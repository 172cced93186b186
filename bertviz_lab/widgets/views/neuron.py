"""The neuron view's browser side: the drawing of one query inside one head, and the exact numbers hover reads.

Only the selected query's rows travel to the browser: the drawing (figures.neuron), and as float32 buffers q (d
floats), K of the shown keys (n × d), the products of that query (n × d), and n scores and weights, so hover shows
exact values with no kernel round trip; the keyboard reads the same values (the arrow keys move along the keys and
their dimensions). Clicking a key (or Enter on a focused row) asks the panel to make it the query.
"""

from __future__ import annotations

from typing import Any, Sequence

import anywidget
import numpy as np
import traitlets

from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.neuron import neuron_message_svg, neuron_svg
from bertviz_lab.widgets.views.front_end import css, esm


def _floats(buffer: bytes | memoryview, shape: tuple[int, ...]) -> np.ndarray:
    return np.frombuffer(bytes(buffer), dtype=np.float32).reshape(shape)


def _float32_bytes(values: np.ndarray) -> bytes:
    return np.ascontiguousarray(values, np.float32).tobytes()


class NeuronView(anywidget.AnyWidget):
    """q, K, q ⊙ K, scores and softmax weights of one query in one head: the drawing, and the numbers as float32
    buffers for hover; clicking a key's token asks the panel to make it the query."""

    _esm = esm("neuron_view.js")
    _css = css("neuron_view")
    svg = traitlets.Unicode("").tag(sync=True)  # the figure: exactly what to_svg() returns
    key_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)  # the shown keys, top to bottom, whole
    key_positions = traitlets.List(traitlets.Int()).tag(sync=True)  # their positions in the input
    q = traitlets.Bytes(b"").tag(sync=True)  # float32 (d,)
    k = traitlets.Bytes(b"").tag(sync=True)  # float32 (n, d)
    products = traitlets.Bytes(b"").tag(sync=True)  # float32 (n, d): q ⊙ k_j
    scores = traitlets.Bytes(b"").tag(sync=True)  # float32 (n,): q·k_j / √d
    weights = traitlets.Bytes(b"").tag(sync=True)  # float32 (n,): softmax weights
    # what the figure shows, for the kernel's side (not sent: the drawing holds it)
    query_token = traitlets.Unicode("")
    query_position = traitlets.Int(0)
    query_row = traitlets.Int(-1)  # the query's own row among the keys (-1: not shown)
    head_size = traitlets.Int(0)
    title = traitlets.Unicode("")
    note = traitlets.Unicode("")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._query_listeners: list[Any] = []
        self.on_msg(self._front_end_message)
        if not self.svg:
            self.svg = neuron_message_svg("no query chosen")

    def show(self, rows: D.NeuronRows, key_tokens: Sequence[str], key_positions: Sequence[int], query_token: str,
             query_position: int, title: str, note: str = "") -> None:
        """Send one query's drawing and rows in one message: the front end never shows half-updated state."""
        positions = [int(p) for p in key_positions]
        drawing = neuron_svg(rows, key_tokens, positions, query_token, query_position, title, note)
        with self.hold_sync():
            self.svg = drawing
            self.key_tokens, self.key_positions = list(key_tokens), positions
            self.q, self.k = _float32_bytes(rows.q), _float32_bytes(rows.k)
            self.products = _float32_bytes(rows.products)
            self.scores, self.weights = _float32_bytes(rows.scores), _float32_bytes(rows.weights)
        self.query_token, self.query_position = query_token, int(query_position)
        self.query_row = positions.index(int(query_position)) if int(query_position) in positions else -1
        self.head_size = int(rows.k.shape[1]) if rows.k.ndim == 2 else 0
        self.title, self.note = title, note

    def clear(self, message: str) -> None:
        """Nothing to draw (no q and k to be had): the view says why instead."""
        with self.hold_sync():
            self.svg = neuron_message_svg(message)
            self.key_tokens, self.key_positions = [], []
            self.q = self.k = self.products = self.scores = self.weights = b""
        self.head_size, self.query_row, self.title, self.note = 0, -1, message, ""

    def rows(self) -> D.NeuronRows:
        """The synced buffers as arrays, exactly what hover in the browser reads."""
        n, d = len(self.key_tokens), self.head_size
        return D.NeuronRows(_floats(self.q, (d,)), _floats(self.k, (n, d)), _floats(self.products, (n, d)),
                            _floats(self.scores, (n,)), _floats(self.weights, (n,)))

    def on_query(self, callback: Any) -> None:
        """Call `callback(position)` when a key is clicked in the browser (the panel makes it the query)."""
        self._query_listeners.append(callback)

    def _front_end_message(self, _: Any, content: dict, buffers: list) -> None:
        if not isinstance(content, dict) or content.get("type") != "query":
            return
        position = content.get("position")
        if isinstance(position, int) and not isinstance(position, bool) and position in self.key_positions:
            for callback in self._query_listeners:
                callback(position)

    def to_svg(self) -> str:
        """The figure on screen as a standalone SVG document: the same drawing the browser shows."""
        return self.svg
