"""The head atlas's browser view: the drawing of one statistic over every layer and head (figures.atlas), the exact
values hover reads, the head chosen (kernel state any front end writes) and that head's top texts, which open."""

from __future__ import annotations

from typing import Any

import numpy as np
import traitlets

from bertviz_lab.widgets.figures.atlas import STAT_NAMES, STAT_UNITS, atlas_svg, check_stat, stat_grid
from bertviz_lab.widgets.views.front_end import css, esm
from bertviz_lab.widgets.views.opens_text import OpensText


class AtlasView(OpensText):
    """A layer × head grid coloured by one statistic; a click (or Enter on a cell) chooses a head, whose top texts
    the kernel lists under the grid, and a click (or Enter) on a listed text opens it."""

    _esm = esm("atlas.js")
    _css = css("corpus")
    values = traitlets.Bytes(b"").tag(sync=True)  # float32 (layers, heads), row-major: what hover shows
    queries = traitlets.Bytes(b"").tag(sync=True)  # int32 (layers, heads): how many queries each mean is over
    layers = traitlets.List(traitlets.Int()).tag(sync=True)  # the grid's rows, top to bottom
    heads = traitlets.List(traitlets.Int()).tag(sync=True)  # its columns, left to right
    stat_name = traitlets.Unicode("").tag(sync=True)  # "weight on [CLS]"
    unit = traitlets.Unicode("").tag(sync=True)  # "share of attention"
    title = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.List(traitlets.Int()).tag(sync=True)  # [layer, head] chosen, or []
    top_ids = traitlets.List(traitlets.Int()).tag(sync=True)  # the chosen head's listed texts, in order
    top_texts = traitlets.List(traitlets.Unicode()).tag(sync=True)
    top_values = traitlets.List(traitlets.Float()).tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._stats: Any = None
        self._stat = "entropy"
        self._note = ""
        self._top: Any = None
        self._largest = True
        self.observe(lambda _: self._draw(), names="selected")

    @traitlets.validate("selected")
    def _check_selected(self, proposal: dict) -> list[int]:
        selected = [int(v) for v in proposal["value"]]
        if selected and len(selected) != 2:
            raise traitlets.TraitError(f"selected must be [] or [layer, head], got {selected}")
        return selected

    @property
    def stat(self) -> str:
        """The statistic shown."""
        return self._stat

    def show(self, stats: Any, stat: str, note: str = "") -> None:
        """Show one statistic of a head_stats() table (the chosen head and its texts kept)."""
        layers, heads, values, queries = stat_grid(stats, check_stat(stat))
        self._stats, self._stat, self._note = stats, stat, note
        with self.hold_sync():
            self.values = np.ascontiguousarray(values, dtype=np.float32).tobytes()
            self.queries = np.ascontiguousarray(queries, dtype=np.int32).tobytes()
            self.layers, self.heads = layers, heads
            self.stat_name, self.unit = STAT_NAMES[stat], STAT_UNITS[stat]
            self._draw()

    def show_top(self, top: Any, largest: bool = True) -> None:
        """List a top_texts() table (text_id, text, value) under the grid for the chosen head."""
        self._top, self._largest = top, largest
        with self.hold_sync():
            self.top_ids = [int(v) for v in top["text_id"].tolist()] if top is not None else []
            self.top_texts = [str(v) for v in top["text"].tolist()] if top is not None else []
            self.top_values = [float(v) for v in top["value"].tolist()] if top is not None else []
            self._draw()

    def grid(self) -> np.ndarray:
        """The values the front end holds, float32 (layers, heads)."""
        shape = (len(self.layers), len(self.heads))
        return np.frombuffer(bytes(self.values), dtype=np.float32).reshape(shape).copy()

    def to_plotly(self) -> Any:
        """The atlas grid as a plotly Figure: the statistic of every layer and head on the drawing's scale and
        colours, hover with its unit and the queries it averages."""
        from bertviz_lab.widgets.figures.atlas import scale_top
        from bertviz_lab.widgets.figures.plotly_figures import atlas_figure

        if self._stats is None:
            raise ValueError("the atlas shows nothing yet: there is no figure to give to plotly.")
        values = self.grid()
        queries = np.frombuffer(bytes(self.queries), dtype=np.int32).reshape(values.shape)
        return atlas_figure(values, self.layers, self.heads, queries, self.stat_name, self.unit, scale_top(values),
                            self.title)

    def opened(self, index: int) -> dict[str, Any] | None:
        if not 0 <= index < len(self.top_ids) or len(self.selected) != 2:
            return None
        return {"text_id": self.top_ids[index], "layer": self.selected[0], "head": self.selected[1]}

    def _draw(self) -> None:
        if self._stats is None:
            return
        chosen = tuple(self.selected) if len(self.selected) == 2 else None
        svg = atlas_svg(self._stats, self._stat, note=self._note, selected=chosen,
                        top_texts=self._top if chosen is not None else None, largest=self._largest)
        with self.hold_sync():
            self.svg = svg
            self.title = f"head atlas · {STAT_NAMES[self._stat]}" + (
                f" · layer {chosen[0]} · head {chosen[1]}" if chosen else "")
