"""The AttentionPanel's source: a traced model's attention, read through the panel's controls, for the views'
glue; with the model behind it, the neuron view's q and k, the saliency view's text and the model view's ablation
(its row, the forward it runs again, and the unablated output it compares with, kept per input)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ContextManager, Iterator, Sequence, TypeVar

import ipywidgets as widgets
import numpy as np
import torch

from bertviz_lab.widgets import registry
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.panels.ablation_bar import AblationBar, AblationSource, check_ablation_mode
from bertviz_lab.widgets.panels.attention_views.base import Axes, PanelControls
from bertviz_lab.widgets.panels.running import evaluating

if TYPE_CHECKING:
    from bertviz_lab.trace.hooks import Trace
    from bertviz_lab.widgets.panels.attention import AttentionPanel
    from bertviz_lab.widgets.panels.layer_qk import LayerQK

CONTROLS = ("layer", "head", "aggregation", "direction", "scale", "special", "query")


def rows_of(positions: np.ndarray) -> slice | torch.Tensor:
    """An index for positions: a slice where they run without a gap (a view, no copy), else the positions."""
    if len(positions) and positions[-1] - positions[0] + 1 == len(positions):
        return slice(int(positions[0]), int(positions[-1]) + 1)
    return torch.as_tensor(positions)


def token_info(trace: "Trace", row: int) -> D.TokenInfo:
    """The tokens of one row of a trace, which are real (not padding), [CLS]/[SEP], and of which sentence."""
    attentions, mask, types = trace.attentions, trace.attention_mask, trace.token_type_ids
    tokens = (trace.tokens or [[str(i) for i in range(attentions[0].shape[-1])]])[row]
    return D.token_info(tokens, None if mask is None else mask[row], None if types is None else types[row])


T = TypeVar("T")


def _open(value: T | None) -> T:
    """What a panel holds while it is open; a closed one has let it go (AttentionPanel.release)."""
    if value is None:
        raise RuntimeError("this attention panel is closed: it no longer holds its trace.")
    return value


class TraceSource(PanelControls):
    """What the attention views read from an AttentionPanel (see base.AttentionSource)."""

    label, export_prefix, controls, same_tokens = "", "attention", CONTROLS, True
    views = tuple(view.name for view in registry.views(registry.ATTENTION))

    def __init__(self, panel: "AttentionPanel", ablation_mode: str = "zero") -> None:
        self.panel = panel
        self.ablation_mode = check_ablation_mode(ablation_mode)
        self.ablation_bar: AblationBar | None = None  # made with the model view
        self.model_view_drawn: tuple | None = None  # what the model view's thumbnails show
        self.saliency_stale = False  # the saliency panel shows an input before the one shown now
        self._plain_output: Any = None

    # what the panel shows, while it is open ---------------------------------------------------------------------
    @property
    def trace(self) -> "Trace":
        return _open(self.panel.trace)

    @property
    def attentions(self) -> list[torch.Tensor]:
        return _open(self.panel.attentions)

    @property
    def layer_qk(self) -> LayerQK:
        return _open(self.panel.layer_qk)

    def new_input(self) -> None:
        """The panel shows another input: what was kept for the one before is forgotten."""
        self._plain_output = self.model_view_drawn = None
        self.saliency_stale = self.panel.saliency is not None

    def release(self) -> None:
        self._plain_output = None
        if self.ablation_bar is not None:
            self.ablation_bar.ablation = None

    # the controls ------------------------------------------------------------------------------------------
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
        return list(self.panel.heads_shown.heads)

    @property
    def num_heads(self) -> int:
        attentions = self.attentions
        return attentions[0].shape[1] if attentions else 0

    @property
    def num_layers(self) -> int:
        return len(self.attentions)


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
        full = D.attention_matrix(self.attentions, self.layer, self.head, self.aggregation, self.row,
                                  self.trace.attention_mask)
        return full[np.ix_(axes.queries, axes.keys)]

    def layer_maps(self, axes: Axes) -> torch.Tensor:
        attention = self.attentions[self.layer][self.row]  # (nh, T, T)
        return attention[:, rows_of(axes.queries)][:, :, rows_of(axes.keys)]

    def model_maps(self, axes: Axes) -> Iterator[torch.Tensor]:
        """One layer at a time: (H, T, T) floats for one layer, never all L × H maps at once."""
        ablation = self.ablation
        attentions = ablation.after.attentions if ablation is not None else self.attentions
        queries, keys = torch.as_tensor(axes.queries), torch.as_tensor(axes.keys)
        return (attention[self.row].index_select(1, queries).index_select(2, keys) for attention in attentions)

    def sides(self, axes: Axes) -> str:
        tokens = axes.key_tokens
        return (f"rows: query tokens, columns: key tokens ({tokens[0]} … {tokens[-1]}, {len(tokens)} tokens)"
                if tokens else "no tokens")

    def reading_notes(self) -> list[str]:
        return []

    def quietly(self) -> ContextManager[None]:
        return self.panel._quietly()

    @property
    def quiet(self) -> bool:
        return bool(self.panel._quietly)

    def query_positions(self) -> list[int]:
        return self.panel.toolbar.query_positions()

    def moved(self, view: str, *, query: int | None = None, heads: list[int] | None = None) -> None:
        self.panel.view_moved(view, query=query, heads=heads)

    def open(self, view: str | None = None, **controls: Any) -> None:
        self.panel.open_view(view, **controls)

    # the model view ----------------------------------------------------------------------------------------
    layer_names = head_names = None  # every layer and head drawn, numbered from 0

    @property
    def ablation(self) -> Any:
        return self.panel.ablation_bar.ablation  # the model view made (with its row) where there is none yet

    @property
    def ablation_show(self) -> str:
        return self.panel.ablation_bar.show.value

    def model_view_key(self) -> tuple:
        return id(self.trace), self.special, id(self.ablation), self.ablation_show

    def selected_thumbnail(self) -> Sequence[int]:
        return self.layer, self.head

    def ablation_row(self, view: widgets.Widget) -> AblationBar:
        self.ablation_bar = AblationBar(view, self._ablation_source, self.ablation_changed, mode=self.ablation_mode)
        return self.ablation_bar

    def _ablation_source(self) -> AblationSource | None:
        """What the ablation row runs again (None where the panel has no model, only a trace)."""
        panel = self.panel
        inputs = panel._inputs()
        if panel.model is None or not inputs:
            return None
        return AblationSource(panel.model, panel.tokenizer, self.trace, inputs, self._plain, panel.row)

    def _plain(self) -> Any:
        """The unablated forward's output on the shown input: the run's, else one forward run here (kept)."""
        panel = self.panel
        if panel.run is not None:
            return panel.run.output
        if self._plain_output is None:
            model = _open(panel.model)  # the ablation row exists only on a panel with a model
            device = next(model.parameters()).device
            inputs = {key: value.to(device) for key, value in panel._inputs().items()}
            with evaluating(model), torch.inference_mode():
                self._plain_output = model(**inputs)
        return self._plain_output

    def ablation_changed(self) -> None:
        """Heads went off or on (or the mode or the display changed): the model view draws the new state."""
        self.model_view_drawn = None
        if not self.panel._quietly:
            self.panel.redraw()

    def rerun_ablation(self) -> None:
        """A new input: heads switched off stay off for it (the row runs it again); either way the panel redraws."""
        if self.ablation_bar is not None:
            self.ablation_bar.recompute()
        else:
            self.ablation_changed()

    # the neuron view ---------------------------------------------------------------------------------------
    def qk_missing(self) -> str | None:
        layer_qk = self.layer_qk
        return None if layer_qk.available else layer_qk.why_not()

    def qk(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.layer_qk(layer)

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

    def mount(self, name: str, parts: list[widgets.Widget]) -> None:
        """Put other widgets in a view's slot (the saliency panel where its note was)."""
        self.panel.slots[name].children = parts

    def saliency_figure_changed(self) -> None:
        """The saliency panel redrew (also from its worker thread): the static copy follows when it is on screen."""
        if self.panel.view.value == "saliency":
            self.panel.figure_changed()
