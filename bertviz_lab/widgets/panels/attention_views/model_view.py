"""The model view's glue: every layer × head as a thumbnail under one colour scale, with the heads an ablation
switched off (or what switching them off changed) where the source has a model to run again."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from bertviz_lab.widgets import registry
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.panels.attention_views.base import AttentionView, joined
from bertviz_lab.widgets.panels.controls import lean
from bertviz_lab.widgets.views.model_view import ModelView

THUMBNAIL_SIZE = 24  # a map pooled to at most 24 × 24 cells


class ModelViewGlue(AttentionView):
    name = registry.MODEL_VIEW

    def make(self, source: Any) -> ModelView:
        view = lean(ModelView)
        view.observe(partial(self._opened, source, view), names=["selected", "opens"])
        return view

    def new_input(self, source: Any, view: ModelView, same_shape: bool) -> None:
        if not same_shape:
            view.ablated = []  # another model: its heads are not these

    def _opened(self, source: Any, view: ModelView, change: dict) -> None:
        """A thumbnail clicked (a new selection, or the selected one opened again): its layer and head in the
        heatmap, the keyboard following into its cells."""
        selected = view.selected
        if source.quiet or len(selected) != 2:  # the selection drawn for the layer and head chosen, not a click
            return
        row, column = selected
        layers = source.layer_names or range(source.num_layers)
        heads = source.head_names or range(source.num_heads)
        if 0 <= row < len(layers) and 0 <= column < len(heads):
            head = heads[column]
            source.open(registry.HEATMAP, layer=layers[row], head=head, aggregation="head", heads=[head], focus=True)

    def parts(self, source: Any, view: ModelView) -> list:
        row = source.ablation_row(view)  # heads switched off and on again: only where a model can run again
        return [view] if row is None else [row, view]

    def draw(self, source: Any, view: ModelView) -> None:
        """Draw the thumbnails when what they show changed (a layer or head chosen only moves the selection)."""
        key = source.model_view_key()
        if key != source.model_view_drawn:
            self._draw_thumbnails(source, view)
            source.model_view_drawn = key
        with source.quietly():  # the selection marked here is not a reader's click
            view.selected = list(source.selected_thumbnail())

    def _draw_thumbnails(self, source: Any, view: ModelView) -> None:
        special, ablation, show = source.special, source.ablation, source.ablation_show
        axes = source.whole_axes()
        Q, K = len(axes.queries), len(axes.keys)
        L, H = source.num_layers, len(source.head_names or range(source.num_heads))
        hint = source.sides(axes)
        size = f"{Q} tokens" if source.same_tokens else f"{Q} × {K} tokens"
        title = joined(source.label, f"{L} layers × {H} heads", size, "one colour scale")
        if ablation is not None and show == "change":
            codes, _, scale = D.pooled_differences(ablation.before.attentions, ablation.after.attentions,
                                                   source.row, THUMBNAIL_SIZE, keep=axes.queries)
            ticks, bar_title = D.diverging_ticks(scale * D.ZERO_CODE), "change in attention weight (after − before)"
            palette, zero_code = D.DIVERGING, D.ZERO_CODE
            title = joined(source.label, f"{L} layers × {H} heads",
                           f"change with {len(ablation.heads)} head(s) off ({ablation.mode})")
        else:
            clip = special == "clip"
            codes, scale = D.pooled_layers(source.model_maps(axes), THUMBNAIL_SIZE,
                                           axes.query_special if clip else None, axes.key_special if clip else None)
            encoded = D.HeatmapCodes(codes, "linear", scale, np.zeros(0, np.float32), (0.0, 0.0))
            ticks, bar_title = D.colorbar_ticks(encoded)
            palette, zero_code = D.PALETTE, 0
            if ablation is not None:
                title = joined(source.label, f"{L} layers × {H} heads",
                               f"attention with {len(ablation.heads)} head(s) off ({ablation.mode})",
                               "one colour scale")
        rows, cols = codes.shape[2:]
        if rows < Q or cols < K:
            block = f"~{Q / rows:.0f} × {K / cols:.0f}"
            if zero_code == 0:
                hint += f"; each cell the largest weight of a block of {block} weights"
                bar_title = "largest attention weight per cell"
            else:
                hint += f"; each cell the mean change over {block} weights"
        if zero_code == 0:
            title += {"clip": " · [CLS]/[SEP] clipped", "hide": " · [CLS]/[SEP] hidden", "show": ""}[special]
        elif special == "hide":
            title += " · [CLS]/[SEP] hidden"
        changes = ablation.attention_change(axes.queries).astype(np.float32) if ablation is not None else None
        if source.layer_names is not None:  # only some layers or heads drawn: the thumbnails say which
            view.layer_names, view.head_names = list(source.layer_names), list(source.head_names)
        view.show(codes, scale, zero_code, palette, ticks, bar_title, title, hint, changes,
                  ablation.lines() if ablation is not None else [])

    def export_name(self, source: Any, view: ModelView) -> str:
        ablation = source.ablation
        return f"{source.export_prefix}-model-view" + (f"-{len(ablation.heads)}-heads-off" if ablation else "")


VIEW = ModelViewGlue()
