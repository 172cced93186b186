"""The saliency view's browser side: the drawing of a text's tokens coloured by their scores (figures.saliency), and
the tokens and exact float32 scores hover reads."""

from __future__ import annotations

import dataclasses
from typing import Sequence

import anywidget
import numpy as np
import traitlets

from bertviz_lab.widgets.figures.saliency import SaliencyState, saliency_svg
from bertviz_lab.widgets.views.front_end import css, esm


class SaliencyView(anywidget.AnyWidget):
    """The tokens of a text coloured by their saliency scores: the drawing, and for hover the whole tokens and the
    exact float32 scores; also a run under way ("computing …", the previous figure dimmed, and how many of its steps
    are done) and errors."""

    _esm = esm("saliency_view.js")
    _css = css("saliency_view")
    svg = traitlets.Unicode("").tag(sync=True)  # the figure: exactly what to_svg() returns
    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)  # the tokens, whole, in the figure's order
    scores = traitlets.Bytes(b"").tag(sync=True)  # float32 (T,): the scores saliency() returned
    # a run under way: "Integrated gradients: 12/64 steps" over the dimmed figure ("" and 0 when none)
    progress_label = traitlets.Unicode("").tag(sync=True)
    progress_done = traitlets.Int(0).tag(sync=True)
    progress_total = traitlets.Int(0).tag(sync=True)
    # what the figure shows, for the kernel's side (not sent: the drawing holds it)
    status = traitlets.Unicode("ready")  # ready | computing | error
    message = traitlets.Unicode("")  # the error, or the run being computed
    title = traitlets.Unicode("")
    subtitle = traitlets.Unicode("")  # the target
    note = traitlets.Unicode("")

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._state = SaliencyState()
        self._draw(self._state)

    @property
    def state(self) -> SaliencyState:
        """What the figure on screen shows."""
        return self._state

    @property
    def positions(self) -> list[int]:
        """Each token's position in the input."""
        return [int(p) for p in self._state.positions]

    @property
    def limit(self) -> float:
        """The colour scale runs from -limit (blue) to +limit (red)."""
        return self._state.limit

    def _draw(self, state: SaliencyState) -> None:
        """Draw `state` and send the drawing with its tokens and scores in one message."""
        drawing = saliency_svg(state)
        with self.hold_sync():
            self.svg = drawing
            self.tokens = list(state.tokens)
            self.scores = np.ascontiguousarray(state.scores, dtype=np.float32).tobytes()
            if state.status != "computing":
                self.progress_label, self.progress_done, self.progress_total = "", 0, 0
        self._state = state
        self.status, self.message = state.status, state.message
        self.title, self.subtitle, self.note = state.title, state.subtitle, state.note

    def to_svg(self) -> str:
        """The figure on screen as a standalone SVG document: the same drawing the browser shows."""
        return self.svg

    def values(self) -> np.ndarray:
        """The scores the view holds, float32 (T,)."""
        return np.frombuffer(bytes(self.scores), dtype=np.float32).copy()

    def show(self, tokens: Sequence[str], positions: Sequence[int], segments: Sequence[int], special: Sequence[bool],
             scores: np.ndarray, title: str, subtitle: str, note: str) -> None:
        """Show one finished figure."""
        self._draw(SaliencyState(list(tokens), [int(p) for p in positions], [int(s) for s in segments],
                                 [bool(s) for s in special], np.asarray(scores, dtype=np.float32), title, subtitle,
                                 note))

    def computing(self, what: str, label: str = "", total: int = 0) -> None:
        """A run is under way: its name replaces the title, over the previous tokens dimmed; `label` and `total`
        start its progress line at 0 of `total` steps (none for total 0)."""
        with self.hold_sync():
            self._draw(dataclasses.replace(self._state, status="computing", message=what))
            self.progress_label, self.progress_done, self.progress_total = label, 0, max(0, int(total))

    def progress(self, done: int, total: int) -> None:
        """`done` of `total` steps of the run under way are finished (ignored once it is no longer under way)."""
        if self.status == "computing":
            with self.hold_sync():
                self.progress_done, self.progress_total = int(done), int(total)

    @property
    def progress_text(self) -> str:
        """"Integrated gradients: 12/64 steps" while a run with steps is under way, else ""."""
        if not self.progress_total or self.status != "computing":
            return ""
        return f"{self.progress_label}: {self.progress_done}/{self.progress_total} steps"

    def show_error(self, title: str, subtitle: str, message: str) -> None:
        """Show why there is no figure, in place of the tokens."""
        self._draw(SaliencyState(title=title, subtitle=subtitle, status="error", message=message))
