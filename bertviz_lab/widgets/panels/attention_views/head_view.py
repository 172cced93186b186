"""The head view's glue: lines from each query to its strongest keys, one colour per head, every head of the layer
sent at once (the chips switch heads in the front end)."""

from __future__ import annotations

from typing import Any

import numpy as np

from bertviz_lab.widgets.panels.attention_views.base import AttentionView, joined
from bertviz_lab.widgets.panels.controls import lean
from bertviz_lab.widgets.views.head_view import HeadView


class HeadViewGlue(AttentionView):
    name = "head view"

    def make(self, source: Any) -> HeadView:
        view = lean(HeadView, num_heads=source.num_heads, heads=list(source.heads))
        view.observe(source.heads_clicked, names="heads")
        view.observe(source.head_view_moved, names=["query", "first"])
        view.on_open(source.open_neuron_view)
        return view

    def draw(self, source: Any, view: HeadView) -> None:
        axes = source.axes()
        matrices = source.layer_maps(axes)  # (nh, Q, K): every head, the chips choose which are drawn
        K = matrices.shape[-1]
        k = max(1, min(source.head_view_k, K)) if K else 0
        weights, index = matrices.float().topk(k, dim=-1, sorted=False)  # (nh, Q, k)
        title = joined(source.label, f"layer {source.layer}")
        if source.direction != "all":
            title += f" · {source.direction} (rows are a slice)"
        if source.special == "hide":
            title += " · [CLS]/[SEP] hidden"
        at = np.flatnonzero(axes.queries == source.query) if source.query is not None else []
        view.show(axes.query_tokens, axes.key_tokens, index.numpy().astype(np.uint16), weights.numpy(), title,
                  query=int(at[0]) if len(at) else -1, query_positions=axes.queries)

    def export_name(self, source: Any, view: HeadView) -> str:
        return f"{source.export_prefix}-head-view-layer{source.layer}"


VIEW = HeadViewGlue()
