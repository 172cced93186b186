"""The neuron view's browser side: the drawing of one query inside one head, and the exact numbers hover reads.

Only the selected query's rows in the window drawn travel to the browser: the drawing (figures.neuron), and as
float32 buffers q (d floats), K of the drawn keys (n × d), the products of that query (n × d), and n scores and
weights, so hover shows exact values with no kernel round trip; the keyboard reads the same values (the arrow keys
move along the keys and their dimensions). A long text draws a window of keys (figures.neuron.key_window): the
keyboard past its edge, or the wheel, sets `first` and the view draws that window from the rows it keeps. Clicking a
key (or Enter on a focused row) asks the panel to make it the query.
"""

from __future__ import annotations

from typing import Any, Sequence

import anywidget
import numpy as np
import traitlets

from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.figures.neuron import key_window, neuron_message_svg, neuron_svg
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
    key_tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)  # the drawn keys, top to bottom, whole
    key_positions = traitlets.List(traitlets.Int()).tag(sync=True)  # their positions in the input
    first = traitlets.Int(0).tag(sync=True)  # the first key row drawn, among all the keys shown
    q = traitlets.Bytes(b"").tag(sync=True)  # float32 (d,)
    k = traitlets.Bytes(b"").tag(sync=True)  # float32 (n, d)
    products = traitlets.Bytes(b"").tag(sync=True)  # float32 (n, d): q ⊙ k_j
    scores = traitlets.Bytes(b"").tag(sync=True)  # float32 (n,): q·k_j / √d
    weights = traitlets.Bytes(b"").tag(sync=True)  # float32 (n,): softmax weights
    # what the figure shows, for the kernel's side (not sent: the drawing holds it)
    query_token = traitlets.Unicode("")
    query_position = traitlets.Int(0)
    query_row = traitlets.Int(-1)  # the query's own row among the drawn keys (-1: not drawn)
    head_size = traitlets.Int(0)
    title = traitlets.Unicode("")
    note = traitlets.Unicode("")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._query_listeners: list[Any] = []
        self._shown: tuple | None = None  # show()'s arguments: every key's rows, drawn a window at a time
        self._drawn_first = -1  # the window's first row as drawn (a front end's `first` that differs asks for another)
        self.on_msg(self._front_end_message)
        if not self.svg:
            self.svg = neuron_message_svg("no query chosen")
        self.observe(self._window_asked, names="first")

    def show(self, rows: D.NeuronRows, key_tokens: Sequence[str], key_positions: Sequence[int], query_token: str,
             query_position: int, title: str, note: str = "") -> None:
        """Draw one query against every key shown (`rows` holds them all); a long text's window moves as little as it
        takes to show the query's own row."""
        positions = [int(p) for p in key_positions]
        self._shown = (rows, list(key_tokens), positions, query_token, int(query_position), title, note)
        query_at = positions.index(int(query_position)) if int(query_position) in positions else -1
        self._draw(key_window(len(positions), self.first, query_at)[0])
        self.query_token, self.query_position = query_token, int(query_position)
        self.head_size = int(rows.k.shape[1]) if rows.k.ndim == 2 else 0
        self.title, self.note = title, note

    def _draw(self, first: int) -> None:
        """Send the window from `first` (its drawing and rows) in one message: the front end never shows
        half-updated state."""
        assert self._shown is not None  # show() sets it before it draws the first window
        rows, tokens, positions, query_token, query_position, title, note = self._shown
        first, count = key_window(len(positions), first)
        shown = slice(first, first + count)
        drawing = neuron_svg(rows, tokens, positions, query_token, query_position, title, note, first)
        window = rows.keys(shown)
        self._drawn_first = first
        with self.hold_sync():
            self.svg = drawing
            self.first = first
            self.key_tokens, self.key_positions = tokens[shown], positions[shown]
            self.q, self.k = _float32_bytes(window.q), _float32_bytes(window.k)
            self.products = _float32_bytes(window.products)
            self.scores, self.weights = _float32_bytes(window.scores), _float32_bytes(window.weights)
        drawn = positions[shown]
        self.query_row = drawn.index(query_position) if query_position in drawn else -1

    def _window_asked(self, change: dict) -> None:
        """A front end moved the window (keys past its edge, the wheel): draw the one asked for, kept inside the
        keys."""
        if self._shown is not None and change["new"] != self._drawn_first:
            self._draw(int(change["new"]))

    def clear(self, message: str) -> None:
        """Nothing to draw (no q and k to be had): the view says why instead."""
        self._shown = None
        with self.hold_sync():
            self.svg = neuron_message_svg(message)
            self.key_tokens, self.key_positions = [], []
            self.q = self.k = self.products = self.scores = self.weights = b""
        self.head_size, self.query_row, self.title, self.note = 0, -1, message, ""

    def rows(self) -> D.NeuronRows:
        """The synced buffers as arrays (the window drawn), exactly what hover in the browser reads."""
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
        every = self._shown[2] if self._shown is not None else []
        if isinstance(position, int) and not isinstance(position, bool) and position in every:
            for callback in self._query_listeners:
                callback(position)

    def to_svg(self) -> str:
        """The figure on screen as a standalone SVG document: the same drawing the browser shows."""
        return self.svg
