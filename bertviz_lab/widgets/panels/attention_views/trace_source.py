"""The AttentionPanel's source: a traced model's attention, read through the panel's controls, for the views'
glue; with the model behind it, the neuron view's q and k, the saliency view's text and the model view's ablation."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import ipywidgets as widgets
import numpy as np
import torch

from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.panels.ablation_bar import AblationBar
from bertviz_lab.widgets.panels.attention_views.base import Axes

if TYPE_CHECKING:
    from bertviz_lab.widgets.panels.attention import AttentionPanel

CONTROLS = ("layer", "head", "aggregation", "direction", "scale", "special", "query")


def rows_of(positions: np.ndarray) -> slice | torch.Tensor:
    """An index for positions: a slice where they run without a gap (a view, no copy), else the positions."""
    if len(positions) and positions[-1] - positions[0] + 1 == len(positions):
        return slice(int(positions[0]), int(positions[-1]) + 1)
    return torch.as_tensor(positions)


class TraceSource:
    """What the attention views read from an AttentionPanel (see base.AttentionSource)."""

    label, export_prefix, controls, same_tokens = "", "attention", CONTROLS, True

    def __init__(self, panel: "AttentionPanel") -> None:
        self.panel = panel

    # the controls ------------------------------------------------------------------------------------------
    @property
    def layer(self) -> int:
        return self.panel.layer.value

    @property
    def head(self) -> int:
        return self.panel.head.value

    @property
    def query(self) -> int | None:
        return self.panel.query.value

    @property
    def aggregation(self) -> str:
        return self.panel.aggregation.value

    @property
    def direction(self) -> str:
        return self.panel.direction.value

    @property
    def scale(self) -> str:
        return self.panel.scale.value

    @property
    def special(self) -> str:
        return self.panel.special.value

    @property
    def heads(self) -> list[int]:
        return list(self.panel._heads)

    @property
    def num_heads(self) -> int:
        return self.panel._num_heads

    @property
    def num_layers(self) -> int:
        return len(self.panel.attentions)

    @property
    def head_view_k(self) -> int:
        return self.panel.head_view_k

    @property
    def row(self) -> int:
        return self.panel.row

    @property
    def info(self) -> D.TokenInfo:
        return self.panel.info

    @property
    def cut_note(self) -> str | None:
        truncation = self.panel.truncation
        return truncation.notice if truncation is not None and truncation.cut else None

    @property
    def has_special(self) -> bool:
        return bool(self.info.special[self.info.real].any())

    @property
    def export_window(self) -> list[int] | None:
        return self.panel._export_window

    # the attention -------------------------------------------------------------------------------------------
    def _axes(self, queries: np.ndarray, keys: np.ndarray) -> Axes:
        tokens, special = self.info.tokens, self.info.special
        return Axes(queries, keys, [tokens[i] for i in queries], [tokens[i] for i in keys], special[queries],
                    special[keys])

    def axes(self) -> Axes:
        return self._axes(*self.panel.positions())

    def whole_axes(self) -> Axes:
        info = self.info
        keep = np.flatnonzero(info.real & ~info.special if self.special == "hide" else info.real)
        return self._axes(keep, keep)

    def weights(self, axes: Axes) -> np.ndarray:
        full = D.attention_matrix(self.panel.attentions, self.layer, self.head, self.aggregation, self.row,
                                  self.panel.trace.attention_mask)
        return full[np.ix_(axes.queries, axes.keys)]

    def layer_maps(self, axes: Axes) -> torch.Tensor:
        attention = self.panel.attentions[self.layer][self.row]  # (nh, T, T)
        return attention[:, rows_of(axes.queries)][:, :, rows_of(axes.keys)]

    def model_maps(self, axes: Axes) -> Iterator[torch.Tensor]:
        """One layer at a time: (H, T, T) floats for one layer, never all L × H maps at once."""
        ablation = self.ablation
        attentions = ablation.after.attentions if ablation is not None else self.panel.attentions
        queries, keys = torch.as_tensor(axes.queries), torch.as_tensor(axes.keys)
        return (attention[self.row].index_select(1, queries).index_select(2, keys) for attention in attentions)

    def sides(self, axes: Axes) -> str:
        tokens = axes.key_tokens
        return (f"rows: query tokens, columns: key tokens ({tokens[0]} … {tokens[-1]}, {len(tokens)} tokens)"
                if tokens else "no tokens")

    def reading_notes(self) -> list[str]:
        return []

    @contextlib.contextmanager
    def quietly(self) -> Iterator[None]:
        self.panel._marking_selection = True
        try:
            yield
        finally:
            self.panel._marking_selection = False

    # the model view ----------------------------------------------------------------------------------------
    layer_names = head_names = None  # every layer and head drawn, numbered from 0

    @property
    def ablation(self) -> Any:
        return self.panel.ablation_bar.ablation

    @property
    def ablation_show(self) -> str:
        return self.panel.ablation_bar.show.value

    def model_view_key(self) -> tuple:
        return id(self.panel.trace), self.special, id(self.ablation), self.ablation_show

    @property
    def model_view_drawn(self) -> tuple | None:
        return self.panel._model_view_key

    @model_view_drawn.setter
    def model_view_drawn(self, key: tuple | None) -> None:
        self.panel._model_view_key = key

    def selected_thumbnail(self) -> Sequence[int]:
        return self.layer, self.head

    def ablation_row(self, view: widgets.Widget) -> AblationBar:
        panel = self.panel
        panel._ablation_bar = AblationBar(view, panel._ablation_source, panel._ablation_changed,
                                          mode=panel._ablation_mode)
        return panel._ablation_bar

    # the neuron view ---------------------------------------------------------------------------------------
    def qk_missing(self) -> str | None:
        layer_qk = self.panel.layer_qk
        return None if layer_qk.available else layer_qk.why_not()

    def qk(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.panel.layer_qk(layer)

    # the saliency view ---------------------------------------------------------------------------------------
    def saliency_inputs(self) -> tuple[Any, Any, str, str | None] | None:
        panel = self.panel
        if panel.model is None or panel.tokenizer is None or panel.text is None:
            return None
        return panel.model, panel.tokenizer, panel.text, panel.text_b

    @property
    def run(self) -> Any:
        return self.panel.run

    @property
    def saliency(self) -> Any:
        return self.panel.saliency

    @saliency.setter
    def saliency(self, saliency: Any) -> None:
        self.panel.saliency = saliency

    @property
    def saliency_note(self) -> widgets.HTML | None:
        return self.panel.saliency_note

    @saliency_note.setter
    def saliency_note(self, note: widgets.HTML) -> None:
        self.panel.saliency_note = note

    @property
    def saliency_stale(self) -> bool:
        return self.panel._saliency_stale

    @saliency_stale.setter
    def saliency_stale(self, stale: bool) -> None:
        self.panel._saliency_stale = stale

    def mount(self, name: str, parts: list[widgets.Widget]) -> None:
        """Put other widgets in a view's slot (the saliency panel where its note was)."""
        self.panel.slots[name].children = parts

    # what the views report ---------------------------------------------------------------------------------
    def heatmap_moved(self, change: dict) -> None:
        self.panel._heatmap_zoomed(change)

    def heads_clicked(self, change: dict) -> None:
        self.panel._heads_clicked(change)

    def head_view_moved(self, change: dict) -> None:
        self.panel._head_view_moved(change)

    def open_neuron_view(self, query_index: int, head: int) -> None:
        self.panel._open_neuron_view(query_index, head)

    def thumbnail_opened(self, change: dict) -> None:
        self.panel._open_thumbnail(change)

    def query_clicked(self, position: int) -> None:
        self.panel._query_clicked(position)

    def saliency_figure_changed(self) -> None:
        self.panel._saliency_figure_changed()
