"""The AttentionPanel's controls and its toolbar row: the view switcher, the layer, head and query dropdowns, the
aggregation, sentence-pair, colour-scale and [CLS]/[SEP] choices; each view's toolbar holds the controls its registry
line names (`registry.View.controls`), in that order, so a new view names its controls there and nothing here."""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import numpy as np

from bertviz_lab.widgets import registry
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.panels.controls import LABEL_STYLE, Hold, lean, look, toggle_buttons, toolbar

SCALE_OPTIONS = (("linear", "linear"), ("per row", "row"), ("log", "log"))


class AttentionControls(widgets.HBox):
    """The row above the view: the toolbar of the view on screen (made the first time it is shown: a page creates
    every model it is sent) and what else the view shows there (the export button). The controls are attributes by
    the names the registry's `controls` use; `view` is the switcher, drawn above the row."""

    def __init__(self, view: str, aggregation: str, scale: str, special: str) -> None:
        if scale not in D.SCALES:
            raise ValueError(f"scale must be one of {D.SCALES}, got {scale!r}.")
        if special not in D.SPECIAL_MODES:
            raise ValueError(f"special must be one of {D.SPECIAL_MODES}, got {special!r}.")
        super().__init__(layout=look(flex_flow="row wrap", align_items="center", grid_gap="4px 24px"))
        self.view = toggle_buttons([(v.label, v.name) for v in registry.views(registry.ATTENTION)], view,
                                   label="view")
        self.layer, self.head, self.query = (
            lean(widgets.Dropdown, description=name, style=LABEL_STYLE, layout={"width": "auto"})
            for name in ("layer", "head", "query token"))
        # toggle buttons labelled by their own description, drawn beside them (controls.labelled)
        self.aggregation = toggle_buttons(D.AGGREGATIONS, aggregation, label="show")
        self.direction = toggle_buttons(D.DIRECTIONS, "all", label="pair")
        self.scale = toggle_buttons(SCALE_OPTIONS, scale, ["one scale for the whole matrix",
                                                           "each query row scaled to its own max",
                                                           "log10, four decades below the max"], "colour scale")
        self.special = toggle_buttons(D.SPECIAL_MODES, special, [
            "in the colour scale", "left out of the colour scale (shown saturated)", "not shown"], "[CLS]/[SEP]")
        # the head view has no colour scale: its one [CLS]/[SEP] choice is to hide them (kept in step with `special`)
        self.hide_special = lean(widgets.Checkbox, value=special == "hide", description="hide [CLS]/[SEP]",
                                 indent=False, layout={"width": "auto"})
        self._shown_special = special if special != "hide" else "clip"  # what unticking hide_special brings back
        self._syncing = Hold()  # open while the head view's checkbox follows the [CLS]/[SEP] choice
        self.toolbars: dict[str, widgets.HBox] = {}
        self.hide_special.observe(self._hide_special_toggled, names="value")

    def show(self, view: str, *after: widgets.Widget) -> None:
        """The row for `view`: its registered controls, then `after`."""
        bar = self.toolbars.get(view)
        if bar is None:
            bar = self.toolbars[view] = toolbar(*(getattr(self, name) for name in registry.view(
                view, registry.ATTENTION).controls))
        self.children = [bar, *after]

    def checked(self, layer: int | None, head: int | None, num_layers: int, num_heads: int) -> tuple[int, int]:
        """The layer and head to show: those asked for, else those shown before, else 0; checked against the
        model's."""
        layer = self.layer.value if layer is None and self.layer.value is not None else (layer or 0)
        head = self.head.value if head is None and self.head.value is not None else (head or 0)
        for name, value, limit in (("layer", layer, num_layers), ("head", head, num_heads)):
            if not 0 <= value < limit:
                raise ValueError(f"{name} {value} does not exist; this model has {name}s 0..{limit - 1}.")
        return layer, head

    def set_input(self, info: D.TokenInfo, num_layers: int, num_heads: int, layer: int, head: int,
                  query: int | None) -> None:
        """Offer the layers, heads and query tokens of a new input and choose `layer`, `head` and the query token
        (see query_after); the pair choice only for a sentence pair."""
        real = np.flatnonzero(info.real).tolist()
        query = self.query_after(query, info, real)
        self.layer.options = list(range(num_layers))
        self.head.options = list(range(num_heads))
        self.layer.value, self.head.value = layer, head
        self.query.options = [(f"{i} · {info.tokens[i]}", i) for i in real]
        self.query.value = query
        self.direction.disabled = not info.has_pair
        if not info.has_pair:
            self.direction.value = "all"

    def query_after(self, query: int | None, info: D.TokenInfo, real: list[int]) -> int:
        """The query token to show: the one asked for, else the one shown before if it is still there, else the
        first word (not [CLS]/[SEP], not padding)."""
        if query is not None:
            if query not in real:
                raise ValueError(f"query token {query} does not exist; this input has tokens 0..{len(info.tokens) - 1} "
                                 f"({len(real)} not padding).")
            return query
        if self.query.value is not None and self.query.value in real:
            return self.query.value
        words = [i for i in real if not info.special[i]]
        return (words or real or [0])[0]

    def query_positions(self) -> list[int]:
        """The positions a query token can be chosen at (not padding)."""
        return [value for _, value in self.query.options]

    def sync_special(self) -> None:
        """The head view's checkbox says what the [CLS]/[SEP] choice says (ticking it is not a reader's change)."""
        with self._syncing():
            self.hide_special.value = self.special.value == "hide"
            if self.special.value != "hide":
                self._shown_special = self.special.value

    def _hide_special_toggled(self, change: dict[str, Any]) -> None:
        if not self._syncing:
            self.special.value = "hide" if change["new"] else self._shown_special
