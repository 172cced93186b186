"""AttentionPanel: a traced BERT's attention as a heatmap, a head view and a model view, with selectors."""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go
import torch

from bertviz_lab.trace.hooks import Trace, trace
from bertviz_lab.widgets import attention_data as D
from bertviz_lab.widgets.attention_views import HeadView, ModelView
from bertviz_lab.widgets.common import HEAD_COLORS, PLOT_TEMPLATE, Panel, encode_text, escape, evaluating
from bertviz_lab.widgets.svg import heatmap as svg_heatmap

VIEWS = ("heatmap", "head view", "model view")
FLOAT_LIMIT = 256  # up to this many tokens the heatmap sends exact weights; beyond, 8-bit values


def trace_text(model: torch.nn.Module, tokenizer: Any, text: str, text_b: str | None = None) -> Trace:
    """Run the model once on a text (pair) and record every layer's attention."""
    encoded, inputs = encode_text(model, tokenizer, text, text_b)
    with evaluating(model), torch.inference_mode(), trace(model, attentions=True, shapes=False, tokens=encoded,
                                                          tokenizer=tokenizer) as recorded:
        model(**inputs)
    return recorded


def axis_labels(tokens: list[str], positions: np.ndarray) -> list[str]:
    """Unique, escaped axis labels ("3·the"): plotly would merge repeated tokens on a categorical axis.

    Escaped for plotly's pseudo-HTML, which decodes &lt; &gt; &amp; and numeric entities but shows &quot; as is:
    quotes stay plain (harmless once < and > are escaped).
    """
    return [f"{i}·{html.escape(tokens[i], quote=False)}" for i in positions]


class AttentionPanel(Panel):
    """Layer/head selectors, aggregation (head, mean, rollout), special-token and sentence-pair filters, three views."""

    def __init__(self, trace: Trace | None = None, *, model: torch.nn.Module | None = None, tokenizer: Any = None,
                 text: str | None = None, text_b: str | None = None, layer: int = 0, head: int = 0,
                 view: str = "heatmap", aggregation: str = "head", row: int = 0, head_view_k: int = 8) -> None:
        self.model, self.tokenizer, self.row, self.head_view_k = model, tokenizer, row, head_view_k
        self._marking_selection = False
        if trace is None:
            if model is None or tokenizer is None or text is None:
                raise TypeError("AttentionPanel needs a Trace, or a model, a tokenizer and a text.")
            trace = trace_text(model, tokenizer, text, text_b)
        self.text, self.text_b = text, text_b
        compact = {"description_width": "initial", "button_width": "auto"}
        self.view = widgets.ToggleButtons(options=VIEWS, value=view, description="view", style=compact)
        self.layer = widgets.Dropdown(description="layer", layout=widgets.Layout(width="150px"))
        self.head = widgets.Dropdown(description="head", layout=widgets.Layout(width="150px"))
        self.aggregation = widgets.ToggleButtons(options=D.AGGREGATIONS, value=aggregation, description="show",
                                                 style=compact)
        self.hide_special = widgets.Checkbox(value=False, description="hide [CLS]/[SEP]", indent=False)
        self.direction = widgets.ToggleButtons(options=D.DIRECTIONS, value="all", description="pair", style=compact)
        self.heads_shown = widgets.SelectMultiple(description="heads", rows=4, layout=widgets.Layout(width="160px"))
        self.message = widgets.HTML()
        self.heatmap = go.FigureWidget(data=[go.Heatmap(z=[[0]], colorscale="Blues", zmin=0)],
                                       layout={"template": PLOT_TEMPLATE})
        self.heatmap.update_layout(height=560, margin={"l": 90, "r": 20, "t": 40, "b": 90},
                                   yaxis={"autorange": "reversed", "title": "query"}, xaxis={"title": "key"})
        self.head_view = HeadView()
        self.model_view = ModelView()
        self.model_view.observe(self._open_thumbnail, names="selected")
        # Every view stays mounted and is shown or hidden: re-mounting a plotly FigureWidget breaks its updates.
        self.slots = {name: widgets.Box([view_widget]) for name, view_widget in
                      zip(VIEWS, (self.heatmap, self.head_view, self.model_view))}
        self.stage = widgets.VBox(list(self.slots.values()))
        controls = widgets.VBox([widgets.HBox([self.view]),
                                 widgets.HBox([self.layer, self.head, self.aggregation]),
                                 widgets.HBox([self.hide_special, self.direction, self.heads_shown])])
        super().__init__([controls, self.message, self.stage])
        self._suspended = False
        self.set_trace(trace, layer=layer, head=head)
        for control in (self.view, self.layer, self.head, self.aggregation, self.hide_special, self.direction,
                        self.heads_shown):
            control.observe(lambda _: self.redraw(), names="value")

    # data ------------------------------------------------------------------------------------------------
    def set_trace(self, trace: Trace, layer: int | None = None, head: int | None = None) -> None:
        """Show another trace (keeps the layer and head when they still exist)."""
        attentions = trace.attentions
        if not attentions:
            raise ValueError("the trace holds no attention maps; record it with trace(model, attentions=True).")
        tokens = (trace.tokens or [[str(i) for i in range(attentions[0].shape[-1])]])[self.row]
        mask = trace.attention_mask
        types = trace.token_type_ids
        self.trace, self.attentions = trace, attentions
        self.info = D.token_info(tokens, None if mask is None else mask[self.row],
                                 None if types is None else types[self.row])
        num_layers, num_heads = len(attentions), attentions[0].shape[1]
        layer = self.layer.value if layer is None and self.layer.value is not None else (layer or 0)
        head = self.head.value if head is None and self.head.value is not None else (head or 0)
        for name, value, limit in (("layer", layer, num_layers), ("head", head, num_heads)):
            if not 0 <= value < limit:
                raise ValueError(f"{name} {value} does not exist; this model has {name}s 0..{limit - 1}.")
        self._suspended = True
        try:
            self.layer.options = list(range(num_layers))
            self.head.options = list(range(num_heads))
            self.heads_shown.options = list(range(num_heads))
            self.layer.value, self.head.value = layer, head
            self.heads_shown.value = tuple(range(num_heads))
            self.direction.disabled = not self.info.has_pair
            if not self.info.has_pair:
                self.direction.value = "all"
            real = self.info.real
            buffer, size = D.thumbnails(attentions, self.row, real=real)
            with self.model_view.hold_sync():
                self.model_view.num_layers, self.model_view.num_heads = num_layers, num_heads
                self.model_view.size, self.model_view.thumbnails = size, buffer
        finally:
            self._suspended = False
        self.redraw()

    def set_text(self, text: str, text_b: str | None = None) -> None:
        """Re-run the model on a new text (pair) and redraw."""
        if self.model is None:
            raise ValueError("this panel shows a fixed trace; build it with model= and tokenizer= to change the text.")
        self.text, self.text_b = text, text_b
        self.set_trace(trace_text(self.model, self.tokenizer, text, text_b))

    def rerun(self, *_: Any) -> None:
        """Trace the current text again (e.g. after the model moved to another device)."""
        if self.model is not None and self.text is not None:
            self.set_text(self.text, self.text_b)

    def positions(self) -> tuple[np.ndarray, np.ndarray]:
        """Query rows and key columns currently shown."""
        return D.select_positions(self.info, self.hide_special.value, self.direction.value)

    def matrix(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The matrix on screen with its query and key positions."""
        full = D.attention_matrix(self.attentions, self.layer.value, self.head.value, self.aggregation.value,
                                  self.row, self.trace.attention_mask)
        queries, keys = self.positions()
        return full[np.ix_(queries, keys)], queries, keys

    # drawing ---------------------------------------------------------------------------------------------
    def _open_thumbnail(self, change: dict) -> None:
        if self._marking_selection:  # redraw() marking the shown head, not a click
            return
        layer, head = change["new"]
        self._suspended = True
        try:
            self.layer.value, self.head.value, self.aggregation.value = layer, head, "head"
        finally:
            self._suspended = False
        if self.view.value == "heatmap":
            self.redraw()
        else:
            self.view.value = "heatmap"  # triggers the redraw

    def redraw(self) -> None:
        """Update the view on screen, sending only what it shows."""
        if self._suspended:
            return
        self.head.disabled = self.aggregation.value != "head"
        self.message.value = ""
        if self.direction.value != "all" and not self.info.has_pair:
            self.message.value = "A→B and B→A need a sentence pair; showing all tokens."
            self._suspended = True
            self.direction.value = "all"
            self._suspended = False
        view = self.view.value
        if view == "heatmap":
            self._draw_heatmap()
            self._show("heatmap")
        elif view == "head view":
            self._draw_head_view()
            self._show("head view")
        else:
            self._marking_selection = True
            try:
                self.model_view.selected = [self.layer.value, self.head.value]
            finally:
                self._marking_selection = False
            self._show("model view")

    @property
    def on_screen(self):
        """The view widget currently shown (the heatmap FigureWidget, the HeadView or the ModelView)."""
        return self.slots[self.view.value].children[0]

    def _show(self, view: str) -> None:
        for name, slot in self.slots.items():
            slot.layout.display = None if name == view else "none"

    def _title(self) -> str:
        aggregation = self.aggregation.value
        what = {"head": f"head {self.head.value}", "mean": "mean of heads",
                "rollout": f"rollout through layers 0..{self.layer.value}"}[aggregation]
        return f"layer {self.layer.value} · {what}"

    def _draw_heatmap(self) -> None:
        matrix, queries, keys = self.matrix()
        tokens = self.info.tokens
        x, y = axis_labels(tokens, keys), axis_labels(tokens, queries)
        if max(len(queries), len(keys)) <= FLOAT_LIMIT:
            z, hover = np.round(matrix, 5), "query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>"
            zmax = float(matrix.max()) if matrix.size else 1.0
        else:
            z, top = D.quantize(matrix)
            hover = f"query %{{y}}<br>key %{{x}}<br>weight ≈ %{{z}}/255 × {top:.4f}<extra></extra>"
            zmax = 255
        with self.heatmap.batch_update():
            trace = self.heatmap.data[0]
            trace.z, trace.x, trace.y = z, x, y
            trace.zmax, trace.hovertemplate = zmax or 1.0, hover
            self.heatmap.layout.title = escape(self._title())

    def _draw_head_view(self) -> None:
        heads = sorted(self.heads_shown.value) or [self.head.value]
        queries, keys = self.positions()
        attention = self.attentions[self.layer.value][self.row]
        index_parts, weight_parts = [], []
        k = min(self.head_view_k, len(keys))
        for head in heads:
            matrix = attention[head].float().numpy()[np.ix_(queries, keys)]
            index, weight = D.top_lines(matrix, k)
            index_parts.append(index)
            weight_parts.append(weight)
        tokens = self.info.tokens
        view = self.head_view
        with view.hold_sync():  # one message: the front end never draws half-updated data
            view.query_tokens = [tokens[i] for i in queries]
            view.key_tokens = [tokens[i] for i in keys]
            view.heads, view.colors, view.k = heads, [HEAD_COLORS[h % len(HEAD_COLORS)] for h in heads], k
            view.indices = np.concatenate(index_parts).tobytes()
            view.weights = np.concatenate(weight_parts).tobytes()

    def static_html(self) -> str:
        matrix, queries, keys = self.matrix()
        tokens = self.info.tokens
        return ("<div class='bvl-attention'>" + svg_heatmap(matrix, [tokens[i] for i in keys], [tokens[i] for i in queries],
                                                            title=self._title()) + "</div>")
