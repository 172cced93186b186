"""The head view's glue: lines from each query to its strongest keys, one colour per head, every head of the layer
sent at once (the chips switch heads in the front end)."""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np

from bertviz_lab.widgets import registry
from bertviz_lab.widgets.panels.attention_views.base import AttentionView, joined
from bertviz_lab.widgets.panels.controls import lean
from bertviz_lab.widgets.views.head_view import HeadView


class HeadsShown:
    """`panel.heads_shown.value = (0, 7)`: the heads the head view shows; its chips, the head dropdown and an opened
    thumbnail set them too. They outlive the widget (made on first show) and a new text of the same model."""

    def __init__(self, widget: Callable[[], HeadView | None], num_heads: Callable[[], int]) -> None:
        self._widget, self._num_heads = widget, num_heads
        self.heads: list[int] = []

    @property
    def value(self) -> tuple[int, ...]:
        return tuple(self.heads)

    @value.setter
    def value(self, heads: Any) -> None:
        self.show(sorted({int(h) for h in heads}))

    @property
    def options(self) -> tuple[int, ...]:
        return tuple(range(self._num_heads()))

    def show(self, heads: list[int]) -> None:
        """Show `heads` (the chips follow where the view is made)."""
        self.heads = list(heads)
        view = self._widget()
        if view is not None:
            view.heads = list(heads)


class HeadViewGlue(AttentionView):
    name = registry.HEAD_VIEW

    def make(self, source: Any) -> HeadView:
        view = lean(HeadView, num_heads=source.num_heads, heads=list(source.heads))
        view.observe(partial(self._heads_chosen, source), names="heads")
        view.observe(partial(self._moved, source, view), names=["query", "first"])
        view.on_open(partial(self._open_neuron_view, source))
        return view

    def new_input(self, source: Any, view: HeadView, same_shape: bool) -> None:
        view.num_heads = source.num_heads

    def _heads_chosen(self, source: Any, change: dict) -> None:
        """The chips changed the heads shown: the static copy and export follow."""
        source.moved(self.name, heads=list(change["new"]))

    def _moved(self, source: Any, view: HeadView, change: dict) -> None:
        """The keys or wheel moved the query or the window: the query token follows (the neuron view's), and the
        static copy and export show the new window."""
        query = None
        if change["name"] == "query" and 0 <= change["new"] < len(view.query_tokens):
            queries = source.axes().queries
            if change["new"] < len(queries):
                query = int(queries[change["new"]])
        source.moved(self.name, query=query)

    def _open_neuron_view(self, source: Any, query_index: int, head: int) -> None:
        """A query token (or a line) clicked: the neuron view of that query, at this layer, in that head (a token:
        the first head shown), where the source offers one."""
        if registry.NEURON_VIEW not in source.views:
            return
        queries = source.axes().queries
        if not 0 <= query_index < len(queries):
            return
        if head < 0:
            head = min(source.heads) if source.heads else source.head
        source.open(registry.NEURON_VIEW, head=head, query=int(queries[query_index]))

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
        at = np.flatnonzero(axes.queries == source.query) if source.query is not None else np.array([], dtype=int)
        view.show(axes.query_tokens, axes.key_tokens, index.numpy().astype(np.uint16), weights.numpy(), title,
                  query=int(at[0]) if len(at) else -1, query_positions=axes.queries)

    def export_name(self, source: Any, view: HeadView) -> str:
        return f"{source.export_prefix}-head-view-layer{source.layer}"


VIEW = HeadViewGlue()
