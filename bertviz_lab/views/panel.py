"""AttentionMapsPanel: any model's attention weights (no model needed) in the heatmap, head view and model view the
AttentionPanel uses, with bertviz's choice of encoder, decoder and cross attention (or a sentence pair's slices).

The views are the AttentionPanel's own glue (widgets.panels.attention_views), fed here by `SetSource`, which reads
the chosen AttentionSet. Rows are always query tokens and columns key tokens, so a cross attention (decoder queries ×
encoder keys) is drawn as the rectangle it is in all three views.
"""

from __future__ import annotations

from typing import Any, ContextManager, Sequence

import ipywidgets as widgets
import numpy as np
import torch

from bertviz_lab.views.inputs import AttentionSet, check_heads
from bertviz_lab.widgets import registry
from bertviz_lab.widgets.panels.attention_views import Axes, glue
from bertviz_lab.widgets.panels.attention_views.base import PanelControls
from bertviz_lab.widgets.panels.controls import LABEL_STYLE, Hold, labelled, lean, toggle_buttons, toolbar
from bertviz_lab.widgets.panels.export_bar import ExportBar
from bertviz_lab.widgets.panels.panel import Panel
from bertviz_lab.widgets.views.head_view import HeadView
from bertviz_lab.widgets.views.heatmap import HeatmapView
from bertviz_lab.widgets.views.model_view import ModelView

VIEWS = tuple(view.name for view in registry.REGISTRY if view.bertviz)  # drawn from attentions alone
HEAD_VIEW_K = 16  # lines drawn per query token in the head view: its 16 strongest keys
CONTROLS = ("layer", "head")  # of a view's registered controls, those attention weights alone have


def sides(chosen: AttentionSet) -> str:
    """What the rows and columns are: 'rows: decoder tokens (4, queries), columns: encoder tokens (7, keys)'."""
    queries, keys = {"cross": ("decoder", "encoder"), "encoder": ("encoder", "encoder"),
                     "decoder": ("decoder", "decoder")}.get(chosen.name, ("query", "key"))
    return (f"rows: {queries} tokens ({len(chosen.query_tokens)}, queries), columns: {keys} tokens "
            f"({len(chosen.key_tokens)}, keys)")


class SetSource(PanelControls):
    """What the attention views read from an AttentionMapsPanel (see attention_views.AttentionSource): the chosen
    set's maps at the chosen layer and head; no [CLS]/[SEP] choice, no colour scale choice, no query, no model."""

    controls, same_tokens, cut_note, has_special, export_window = ("attention", *CONTROLS), False, None, False, None
    views = VIEWS
    aggregation, direction, scale, special, query = "head", "all", "linear", "show", None
    ablation, ablation_show = None, "after"  # no model to run again: no head is ever switched off

    def __init__(self, panel: "AttentionMapsPanel") -> None:
        self.panel = panel
        self.model_view_drawn: tuple | None = None

    @property
    def chosen(self) -> AttentionSet:
        return self.panel.chosen

    @property
    def label(self) -> str:
        return self.chosen.label

    @property
    def export_prefix(self) -> str:
        return self.chosen.name.replace(" ", "-").replace("→", "to") or "attention"

    @property
    def heads(self) -> list[int]:
        return list(self.panel._heads)

    @property
    def num_heads(self) -> int:
        return self.chosen.num_heads

    @property
    def num_layers(self) -> int:
        return len(self.chosen.layers)


    def axes(self) -> Axes:
        chosen = self.chosen
        return Axes(np.asarray(chosen.query_positions), np.asarray(chosen.key_positions), chosen.query_tokens,
                    chosen.key_tokens, np.zeros(len(chosen.query_tokens), bool), np.zeros(len(chosen.key_tokens), bool))

    whole_axes = axes

    def weights(self, axes: Axes) -> np.ndarray:
        return self.panel.matrix()

    def layer_maps(self, axes: Axes) -> torch.Tensor:
        return self.panel.maps()

    def model_maps(self, axes: Axes) -> list[torch.Tensor]:
        return [maps[self.head_names] for maps in self.chosen.maps]

    def sides(self, axes: Axes) -> str:
        return sides(self.chosen)

    def reading_notes(self) -> list[str]:
        sliced = ["a slice of the attention: rows do not sum to 1"] if self.chosen.name.startswith("sentence") else []
        return [sides(self.chosen), *sliced]

    def quietly(self) -> ContextManager[None]:
        return self.panel._quietly()

    @property
    def quiet(self) -> bool:
        return bool(self.panel._quietly)

    def query_positions(self) -> list[int]:
        return []  # no query token to choose

    def moved(self, view: str, *, query: int | None = None, heads: list[int] | None = None) -> None:
        """The chips' heads are kept (there is no query token to follow)."""
        if heads is not None:
            self.panel._heads = list(heads)
        self.panel._moved_on_screen(view)

    def open(self, view: str | None = None, *, layer: int | None = None, head: int | None = None,
             **_: Any) -> None:
        """The layer and head set; the other choices (aggregation, the chips' heads, the keyboard's focus) are the
        AttentionPanel's."""
        self.panel._open(view, layer, head)

    # the model view ----------------------------------------------------------------------------------------
    @property
    def layer_names(self) -> list[int]:
        return list(self.chosen.layers)

    @property
    def head_names(self) -> list[int]:
        return self.panel.model_view_heads or list(range(self.chosen.num_heads))

    def model_view_key(self) -> tuple:
        return self.panel.attention.value, tuple(self.head_names)

    def selected_thumbnail(self) -> tuple[int, int]:
        heads = self.head_names
        return self.chosen.layers.index(self.layer), heads.index(self.head) if self.head in heads else 0

    def ablation_row(self, view: ModelView) -> None:
        view.observe(self.panel._nothing_to_switch_off, names="ablated")
        return None


class AttentionMapsPanel(Panel):
    """Attention weights given as plain per-layer maps, in three views with an attention choice (encoder, decoder,
    cross; or a sentence pair's slices), a layer and a head; exportable, with a static copy like every panel."""

    def __init__(self, sets: Sequence[AttentionSet], view: str = registry.HEATMAP, layer: int | None = None,
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
        self._quietly = Hold()  # open while the panel sets several controls: one redraw after
        with self._quietly():
            self._set_layers(layer)
            self.head.options = list(range(num_heads))
            self.head.value = heads[0] if heads else 0
        self._heads = heads if heads is not None else list(range(num_heads))  # the head view's chips
        self._made: dict[str, Any] = {}
        self._parts: dict[str, list[widgets.Widget]] = {}
        self._source = SetSource(self)
        self.export_bar = ExportBar(self, "attention")
        choice = [self.attention] if len(self.sets) > 1 else []  # one set: nothing to choose
        self.toolbars = {name: toolbar(*choice, *(getattr(self, control) for control in glue(name).entry.controls
                                                  if control in CONTROLS)) for name in VIEWS}
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
        with self._quietly():
            self._set_layers(None)
        self.redraw()

    @property
    def heatmap(self) -> HeatmapView:
        return self._view(registry.HEATMAP)

    @property
    def head_view(self) -> HeadView:
        return self._view(registry.HEAD_VIEW)

    @property
    def model_view(self) -> ModelView:
        return self._view(registry.MODEL_VIEW)

    def _view(self, name: str) -> Any:
        made = self._made.get(name)
        if made is None:
            view = glue(name)
            made = self._made[name] = view.make(self._source)
            self._parts[name] = view.parts(self._source, made)
        return made

    def _moved_on_screen(self, name: str) -> None:
        """A view changed in the front end (heads chosen, a window zoomed or scrolled): where it is on screen, the
        export's name and the static copy follow."""
        if not self._quietly and self.view.value == name and name in self._made:
            self.export_bar.name = glue(name).export_name(self._source, self._made[name])
            self.figure_changed()

    def _nothing_to_switch_off(self, change: dict) -> None:
        """Switching a head off (shift-click, Space) needs the model to run again; with weights alone no head is
        ever drawn as off."""
        if change["new"]:
            self.model_view.ablated = []

    def _open(self, view: str | None, layer: int | None, head: int | None) -> None:
        """Show `view` (None: the one on screen) at this layer and head (a thumbnail opened in the heatmap)."""
        with self._quietly():
            if layer is not None:
                self.layer.value = layer
            if head is not None:
                self.head.value = head
        if view is None or self.view.value == view:
            self.redraw()
        else:
            self.view.value = view

    # drawing -----------------------------------------------------------------------------------------------
    def maps(self) -> Any:
        """The chosen set's (heads, queries, keys) maps at the layer shown."""
        return self.chosen.maps[self.chosen.layers.index(self.layer.value)]

    def matrix(self) -> np.ndarray:
        """The (queries, keys) weights the heatmap shows."""
        return self.maps()[self.head.value].numpy()

    def redraw(self) -> None:
        """Draw the view on screen for the attention, layer and head chosen."""
        if self._quietly:
            return
        name = self.view.value
        view, widget = glue(name), self._view(name)
        view.draw(self._source, widget)
        if tuple(self.stage.children) != tuple(self._parts[name]):
            self.stage.children = self._parts[name]
        self.toolbar.children = [self.toolbars[name], self.export_bar]
        self.export_bar.name = view.export_name(self._source, widget)
        self.figure_changed()

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
