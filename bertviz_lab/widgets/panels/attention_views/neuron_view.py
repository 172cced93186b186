"""The neuron view's glue: one query's q against every key's k inside one head, from q and k recorded for the layer
when it is first shown (the source runs the model for them: a source without a model says why there are none)."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from bertviz_lab.widgets import registry
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.panels.attention_views.base import AttentionView, no_plotly
from bertviz_lab.widgets.panels.controls import lean
from bertviz_lab.widgets.views.neuron import NeuronView


class NeuronViewGlue(AttentionView):
    name = registry.NEURON_VIEW

    def make(self, source: Any) -> NeuronView:
        view = lean(NeuronView)
        view.on_query(partial(self._query_clicked, source))
        return view

    def _query_clicked(self, source: Any, position: int) -> None:
        """A key's token clicked becomes the query."""
        if position in source.query_positions() and position != source.query:
            source.open(query=position)

    def draw(self, source: Any, view: NeuronView) -> None:
        """q, the shown keys, q ⊙ k, scores and weights of the chosen query, layer and head: that query's rows only."""
        layer, head, query = source.layer, source.head, source.query
        missing = source.qk_missing()
        if missing is not None:
            view.clear(missing)
            return
        q, k = source.qk(layer)
        info, hide = source.info, source.special == "hide"
        keys = np.flatnonzero(info.real & ~info.special if hide else info.real)
        rows = D.neuron_rows(q, k, head, query, keys, real=info.real)
        tokens = info.tokens
        title = f"layer {layer} · head {head} · query {query}·{tokens[query]}"
        notes = [f"score = sum of the q ⊙ k_j row ÷ √{q.shape[-1]}; softmax over every key"]
        if hide:
            notes.append("[CLS]/[SEP] hidden: the weights shown do not sum to 1")
        if source.cut_note:
            notes.append(source.cut_note)
        view.show(rows, [tokens[i] for i in keys], keys.tolist(), tokens[query], query, title,
                  "\n".join(notes))  # one line each: the figure stays as narrow as a notebook

    def export_name(self, source: Any, view: NeuronView) -> str:
        return f"{source.export_prefix}-neuron-layer{source.layer}-head{source.head}-query{source.query}"

    def to_plotly(self, source: Any, view: NeuronView) -> Any:
        raise no_plotly(self.name)


VIEW = NeuronViewGlue()
