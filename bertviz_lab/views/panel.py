"""AttentionMapsPanel: any model's attention weights (no model needed) in the heatmap, head view and model view the
AttentionPanel uses, with bertviz's choice of encoder, decoder and cross attention (or a sentence pair's slices).

Rows are always query tokens and columns key tokens, so a cross attention (decoder queries × encoder keys) is drawn
as the rectangle it is in all three views.
"""

from __future__ import annotations

from typing import Any, Sequence

import ipywidgets as widgets
import numpy as np

from bertviz_lab.views.inputs import AttentionSet, check_heads
from bertviz_lab.widgets import registry
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.panels.controls import LABEL_STYLE, labelled, lean, toggle_buttons, toolbar
from bertviz_lab.widgets.panels.export_bar import ExportBar
from bertviz_lab.widgets.panels.panel import Panel
from bertviz_lab.widgets.views.head_view import HeadView
from bertviz_lab.widgets.views.heatmap import HeatmapView
from bertviz_lab.widgets.views.model_view import ModelView

VIEWS = tuple(view.name for view in registry.REGISTRY if view.bertviz)  # drawn from attentions alone
HEAD_VIEW_K = 16  # lines drawn per query token in the head view: its 16 strongest keys
THUMBNAIL_SIZE = 24  # the model view pools a map to at most 24 × 24 cells


def sides(chosen: AttentionSet) -> str:
    """What the rows and columns are: 'rows: decoder tokens (4, queries), columns: encoder tokens (7, keys)'."""
    queries, keys = {"cross": ("decoder", "encoder"), "encoder": ("encoder", "encoder"),
                     "decoder": ("decoder", "decoder")}.get(chosen.name, ("query", "key"))
    return (f"rows: {queries} tokens ({len(chosen.query_tokens)}, queries), columns: {keys} tokens "
            f"({len(chosen.key_tokens)}, keys)")


class AttentionMapsPanel(Panel):
    """Attention weights given as plain per-layer maps, in three views with an attention choice (encoder, decoder,
    cross; or a sentence pair's slices), a layer and a head; exportable, with a static copy like every panel."""

    def __init__(self, sets: Sequence[AttentionSet], view: str = "heatmap", layer: int | None = None,
                 heads: Sequence[int] | None = None, model_view_heads: Sequence[int] | None = None,
                 head_view_k: int = HEAD_VIEW_K) -> None:
        if view not in VIEWS:
            raise ValueError(f"view must be one of {VIEWS}, got {view!r}.")
        if not sets:
            raise ValueError("AttentionMapsPanel needs at least one attention set.")
        self.sets = list(sets)
        self.head_view_k = head_view_k
        num_heads = self.sets[0].num_heads
        heads = check_heads(heads, num_heads)
        self.model_view_heads = check_heads(model_view_heads, num_heads, "include_heads")
        self.view = toggle_buttons(VIEWS, view, label="view")
        self.attention = lean(widgets.Dropdown, options=[(s.name, i) for i, s in enumerate(self.sets)], value=0,
                              description="attention", style=LABEL_STYLE, layout={"width": "auto"})
        self.layer, self.head = (lean(widgets.Dropdown, description=name, style=LABEL_STYLE, layout={"width": "auto"})
                                 for name in ("layer", "head"))
        self._suspended = True
        self._set_layers(layer)
        self.head.options = list(range(num_heads))
        self.head.value = heads[0] if heads else 0
        self._heads = heads if heads is not None else list(range(num_heads))  # the head view's chips
        self._suspended = False
        self._made: dict[str, Any] = {}
        self.export_bar = ExportBar(self, "attention")
        choice = [self.attention] if len(self.sets) > 1 else []  # one set: nothing to choose
        self.toolbars = {"heatmap": toolbar(*choice, self.layer, self.head),
                         "head view": toolbar(*choice, self.layer),
                         "model view": toolbar(*choice)}
        self.toolbar = toolbar(gap="4px 24px")
        self.stage = lean(widgets.VBox)
        super().__init__([labelled("view", self.view), self.toolbar, self.stage])
        for control in (self.view, self.layer, self.head):
            control.observe(lambda _: self.redraw(), names="value")
        self.attention.observe(self._attention_chosen, names="value")
        self.redraw()

    # state -------------------------------------------------------------------------------------------------
    @property
    def chosen(self) -> AttentionSet:
        """The attention set shown."""
        return self.sets[self.attention.value]

    def _set_layers(self, layer: int | None) -> None:
        """The layer dropdown offers the chosen set's layers (by the model's numbers); `layer` is one of them, else
        the one shown stays where it still exists, else the first."""
        layers = self.chosen.layers
        if layer is not None and layer not in layers:
            raise ValueError(f"layer {layer} is not shown; the layers shown are {layers}.")
        keep = layer if layer is not None else self.layer.value
        self.layer.options = [(str(n), n) for n in layers]
        self.layer.value = keep if keep in layers else layers[0]

    def _attention_chosen(self, _: Any) -> None:
        self._suspended = True
        try:
            self._set_layers(None)
        finally:
            self._suspended = False
        self.redraw()

    @property
    def heatmap(self) -> HeatmapView:
        return self._view("heatmap")

    @property
    def head_view(self) -> HeadView:
        return self._view("head view")

    @property
    def model_view(self) -> ModelView:
        return self._view("model view")

    def _view(self, name: str) -> Any:
        made = self._made.get(name)
        if made is None:
            if name == "heatmap":
                made = lean(HeatmapView)
            elif name == "head view":
                made = lean(HeadView, heads=list(self._heads))
                made.observe(self._heads_clicked, names="heads")
            else:
                made = lean(ModelView)
                made.observe(self._thumbnail_opened, names=["selected", "opens"])
                made.observe(self._nothing_to_switch_off, names="ablated")
            self._made[name] = made
        return made

    def _heads_clicked(self, change: dict) -> None:
        self._heads = list(change["new"])
        if self.view.value == "head view":
            self.figure_changed()

    def _nothing_to_switch_off(self, change: dict) -> None:
        """Switching a head off (shift-click, Space) needs the model to run again; with weights alone no head is
        ever drawn as off."""
        if change["new"]:
            self.model_view.ablated = []

    def _thumbnail_opened(self, change: dict) -> None:
        """A thumbnail clicked in the model view opens that layer and head in the heatmap."""
        selected = self.model_view.selected  # a new selection, or the selected one opened again
        if self._suspended or len(selected) != 2:
            return
        row, column = selected
        layers = self.chosen.layers
        shown_heads = self.model_view_heads or list(range(self.chosen.num_heads))
        if not (0 <= row < len(layers) and 0 <= column < len(shown_heads)):
            return
        self._suspended = True
        try:
            self.layer.value, self.head.value = layers[row], shown_heads[column]
        finally:
            self._suspended = False
        self.view.value = "heatmap"

    # drawing -----------------------------------------------------------------------------------------------
    def maps(self) -> Any:
        """The chosen set's (heads, queries, keys) maps at the layer shown."""
        return self.chosen.maps[self.chosen.layers.index(self.layer.value)]

    def matrix(self) -> np.ndarray:
        """The (queries, keys) weights the heatmap shows."""
        return self.maps()[self.head.value].numpy()

    def _title(self, *parts: str) -> str:
        return " · ".join(p for p in (self.chosen.label, *parts) if p)

    def redraw(self) -> None:
        """Draw the view on screen for the attention, layer and head chosen."""
        if self._suspended:
            return
        view = self.view.value
        {"heatmap": self._draw_heatmap, "head view": self._draw_head_view, "model view": self._draw_model_view}[view]()
        widget = self._view(view)
        if tuple(self.stage.children) != (widget,):
            self.stage.children = [widget]
        self.toolbar.children = [self.toolbars[view], self.export_bar]
        what = self.chosen.name.replace(" ", "-").replace("→", "to") or "attention"
        self.export_bar.name = {"heatmap": f"{what}-layer{self.layer.value}-head{self.head.value}",
                                "head view": f"{what}-head-view-layer{self.layer.value}",
                                "model view": f"{what}-model-view"}[view]
        self.figure_changed()

    def _draw_heatmap(self) -> None:
        chosen = self.chosen
        note = sides(chosen)
        if chosen.name.startswith("sentence"):
            note += "; a slice of the attention: rows do not sum to 1"
        self.heatmap.show(self.matrix(), chosen.query_tokens, chosen.key_tokens, chosen.query_positions,
                          chosen.key_positions, self._title(f"layer {self.layer.value}", f"head {self.head.value}"),
                          note)

    def _draw_head_view(self) -> None:
        chosen = self.chosen
        maps = self.maps()  # (nh, Q, K)
        k = max(1, min(self.head_view_k, maps.shape[-1]))
        weights, index = maps.topk(k, dim=-1, sorted=False)
        self.head_view.show(chosen.query_tokens, chosen.key_tokens, index.numpy().astype(np.uint16),
                            weights.numpy(), self._title(f"layer {self.layer.value}"), query=-1,
                            query_positions=chosen.query_positions)

    def _draw_model_view(self) -> None:
        chosen = self.chosen
        heads = self.model_view_heads or list(range(chosen.num_heads))
        maps = [m[heads] for m in chosen.maps]
        codes, scale = D.pooled_maps(maps, THUMBNAIL_SIZE)
        encoded = D.HeatmapCodes(codes, "linear", scale, np.zeros(0, np.float32), (0.0, 0.0))
        ticks, bar_title = D.colorbar_ticks(encoded)
        Q, K = len(chosen.query_tokens), len(chosen.key_tokens)
        hint = sides(chosen)
        if codes.shape[2] < Q or codes.shape[3] < K:
            hint += "; each cell the largest weight of a block"
            bar_title = "largest attention weight per cell"
        title = self._title(f"{len(chosen.layers)} layers × {len(heads)} heads", f"{Q} × {K} tokens",
                            "one colour scale")
        view = self.model_view
        view.layer_names = list(chosen.layers)
        view.head_names = list(heads)
        view.show(codes, scale, 0, D.PALETTE, ticks, bar_title, title, hint)
        row = chosen.layers.index(self.layer.value)
        column = heads.index(self.head.value) if self.head.value in heads else 0
        self._suspended = True
        try:
            view.selected = [row, column]
        finally:
            self._suspended = False

    # figures -------------------------------------------------------------------------------------------------
    @property
    def on_screen(self) -> Any:
        """The view widget shown."""
        return self._view(self.view.value)

    def to_plotly(self) -> Any:
        """The view on screen (heatmap, head view or model view) as a plotly Figure: the same values, colours, title
        and hover."""
        return self.on_screen.to_plotly()

    def to_svg(self) -> str:
        """The view on screen as a standalone SVG document."""
        return self.on_screen.to_svg()

    def static_html(self) -> str:
        return f"<div class='bvl-figure bvl-attention'>{self.to_svg()}</div>"

    def every_set_svg(self) -> list[str]:
        """The view on screen drawn for each attention set in turn (an offline page shows them all), the choice
        left as it was."""
        shown = self.attention.value
        drawings = []
        try:
            for index in range(len(self.sets)):
                self.attention.value = index
                drawings.append(self.to_svg())
        finally:
            self.attention.value = shown
        return drawings

    def caption_parts(self) -> tuple[str, str | None, str | None]:
        """An export's caption: the attention shown and its tokens (there is no model to name)."""
        chosen = self.chosen
        text = " ".join(chosen.query_tokens)
        keys = " ".join(chosen.key_tokens) if chosen.key_tokens != chosen.query_tokens else None
        return chosen.label, text, keys

    def release(self) -> None:
        self.sets = []
