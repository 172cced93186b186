"""The query–key map's browser view: the drawing of one head's queries and keys (figures.qk_map) and, for hover,
every point's coordinates, kind, token and context; a click (or Enter) on a point opens its text."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import traitlets

from bertviz_lab.widgets.figures.qk_map import check_points, qk_map_svg
from bertviz_lab.widgets.views.front_end import css, esm
from bertviz_lab.widgets.views.opens_text import OpensText


class QKMapView(OpensText):
    """Queries and keys of sampled tokens in one 2-D projection; `selected` (a point, -1 for none) is ringed."""

    _esm = esm("qk_map.js")
    _css = css("corpus")
    xs = traitlets.Bytes(b"").tag(sync=True)  # float32 (N,): the points' coordinates, as the drawing places them
    ys = traitlets.Bytes(b"").tag(sync=True)
    is_key = traitlets.Bytes(b"").tag(sync=True)  # uint8 (N,): 1 for a key, 0 for a query
    text_ids = traitlets.Bytes(b"").tag(sync=True)  # int32 (N,)
    positions = traitlets.Bytes(b"").tag(sync=True)  # int32 (N,)
    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)  # each point's token
    contexts = traitlets.List(traitlets.Unicode()).tag(sync=True)  # the different contexts ("… [token] …")
    context_index = traitlets.Bytes(b"").tag(sync=True)  # int32 (N,): each point's entry in `contexts`
    title = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._drawing: dict[str, Any] | None = None
        self.observe(lambda _: self._draw(), names="selected")

    def show(self, points: Any, layer: int, head: int, contexts: Sequence[str] = (), color_by: str = "kind",
             axis: str = "PC") -> None:
        """Show a qk_map() table; `contexts` gives each point's token in its context for hover (default: the token)."""
        check_points(points)
        tokens = [str(v) for v in points["token"].tolist()]
        contexts = list(contexts) or tokens
        if len(contexts) != len(tokens):
            raise ValueError(f"{len(contexts)} contexts for {len(tokens)} points")
        different = list(dict.fromkeys(contexts))
        where = {context: i for i, context in enumerate(different)}
        self._drawing = {"points": points, "layer": int(layer), "head": int(head), "color_by": color_by,
                         "axis": axis}
        with self.hold_sync():
            self.xs = np.asarray(points["x"].tolist(), dtype=np.float32).tobytes()
            self.ys = np.asarray(points["y"].tolist(), dtype=np.float32).tobytes()
            self.is_key = (np.asarray(points["kind"].tolist(), dtype=object) == "key").astype(np.uint8).tobytes()
            self.text_ids = np.asarray(points["text_id"].tolist(), dtype=np.int32).tobytes()
            self.positions = np.asarray(points["position"].tolist(), dtype=np.int32).tobytes()
            self.tokens = tokens
            self.contexts = different
            self.context_index = np.asarray([where[c] for c in contexts], dtype=np.int32).tobytes()
            self.selected = -1
            self._draw()

    @property
    def color_by(self) -> str:
        """What colours the points: their kind or their position."""
        return self._drawing["color_by"] if self._drawing else "kind"

    def recolor(self, color_by: str) -> None:
        """Colour the same points by kind or by position."""
        if self._drawing is not None:
            self._drawing["color_by"] = color_by
            self._draw()

    def count(self) -> int:
        """How many points the view holds."""
        return len(self.xs) // 4

    def opened(self, index: int) -> dict[str, Any] | None:
        if not 0 <= index < self.count():
            return None
        text_ids = np.frombuffer(bytes(self.text_ids), dtype=np.int32)
        positions = np.frombuffer(bytes(self.positions), dtype=np.int32)
        return {"text_id": int(text_ids[index]), "position": int(positions[index]), "index": index}

    def to_plotly(self) -> Any:
        """The points shown as a plotly Figure: queries as dots and keys as squares in the drawing's colours (by kind
        or by position bin) and coordinates, hover the token in its context."""
        from bertviz_lab.widgets.figures.plotly_figures import qk_map_figure
        from bertviz_lab.widgets.figures.qk_map import KIND_COLORS, KIND_NAMES, POSITION_COLORS, position_bins

        if self._drawing is None:
            raise ValueError("the query-key map shows nothing yet: there is no figure to give to plotly.")
        is_key = np.frombuffer(bytes(self.is_key), dtype=np.uint8)
        if self.color_by == "kind":
            colors = [KIND_COLORS["key" if k else "query"] for k in is_key]
        else:
            bins, _ = position_bins(np.frombuffer(bytes(self.positions), dtype=np.int32))
            colors = [POSITION_COLORS[b] for b in bins]
        contexts = np.frombuffer(bytes(self.context_index), dtype=np.int32)
        return qk_map_figure(np.frombuffer(bytes(self.xs), dtype=np.float32),
                             np.frombuffer(bytes(self.ys), dtype=np.float32), is_key,
                             [self.contexts[i] for i in contexts], colors,
                             [KIND_NAMES["query"], KIND_NAMES["key"]], self._drawing["axis"], self.title)

    def _draw(self) -> None:
        given = self._drawing
        if given is None:
            return
        with self.hold_sync():
            self.svg = qk_map_svg(given["points"], given["layer"], given["head"], given["color_by"], given["axis"],
                                  selected=self.selected if self.selected >= 0 else None)
            self.title = f"query–key map · layer {given['layer']} · head {given['head']}"
