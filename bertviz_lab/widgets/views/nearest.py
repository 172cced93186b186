"""The nearest-contexts browser view: the drawing of one search's matches (figures.nearest) and, for hover, each
match's whole context; a click (or Enter) on a match opens its text at that token."""

from __future__ import annotations

from typing import Any

import traitlets

from bertviz_lab.widgets.figures.nearest import check_matches, nearest_svg
from bertviz_lab.widgets.views.front_end import css, esm
from bertviz_lab.widgets.views.opens_text import OpensText


class NearestView(OpensText):
    """The matches of a nearest() search, best first; `selected` (a row, -1 for none) is the one last opened."""

    _esm = esm("nearest.js")
    _css = css("corpus")
    text_ids = traitlets.List(traitlets.Int()).tag(sync=True)
    positions = traitlets.List(traitlets.Int()).tag(sync=True)
    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
    lefts = traitlets.List(traitlets.Unicode()).tag(sync=True)
    rights = traitlets.List(traitlets.Unicode()).tag(sync=True)
    scores = traitlets.List(traitlets.Float()).tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._drawing: tuple[Any, str, int] | None = None
        self.observe(lambda _: self._draw(), names="selected")

    def show(self, matches: Any, query: str, layer: int) -> None:
        """Show the matches of a search for `query` (what was searched, as the title says it) at `layer`."""
        check_matches(matches)
        self._drawing = (matches, query, int(layer))
        with self.hold_sync():
            self.text_ids = [int(v) for v in matches["text_id"].tolist()]
            self.positions = [int(v) for v in matches["position"].tolist()]
            self.tokens = [str(v) for v in matches["token"].tolist()]
            self.lefts = [str(v) for v in matches["left"].tolist()]
            self.rights = [str(v) for v in matches["right"].tolist()]
            self.scores = [float(v) for v in matches["score"].tolist()]
            self.selected = -1
            self._draw()

    def opened(self, index: int) -> dict[str, Any] | None:
        if not 0 <= index < len(self.text_ids):
            return None
        return {"text_id": self.text_ids[index], "position": self.positions[index], "index": index}

    def _draw(self) -> None:
        if self._drawing is None:
            return
        matches, query, layer = self._drawing
        with self.hold_sync():
            self.svg = nearest_svg(matches, query, layer, selected=self.selected if self.selected >= 0 else None)
            self.title = f"nearest contexts · {query} · layer {layer}"
