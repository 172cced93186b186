"""AttentionPanel: a traced BERT's attention in the registered views of its switcher, one toolbar per view. It
composes: its controls (`attention_views.controls`), one glue module per view (`attention_views`, found by registry
name) reading it through `TraceSource` and acting on it through `view_moved` and `open_view`. No code here is one
view's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ipywidgets as widgets
import numpy as np
import torch

from bertviz_lab.model.encoding import Truncation
from bertviz_lab.trace.hooks import Trace
from bertviz_lab.widgets import registry
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.panels.ablation_bar import AblationBar
from bertviz_lab.widgets.panels.attention_views import glue
from bertviz_lab.widgets.panels.attention_views.controls import AttentionControls
from bertviz_lab.widgets.panels.attention_views.head_view import HeadsShown
from bertviz_lab.widgets.panels.attention_views.heatmap import check_window
from bertviz_lab.widgets.panels.attention_views.trace_source import TraceSource, token_info
from bertviz_lab.widgets.panels.controls import Hold, lean
from bertviz_lab.widgets.panels.export_bar import ExportBar
from bertviz_lab.widgets.panels.layer_qk import LayerQK, recorded_inputs
from bertviz_lab.widgets.panels.panel import Panel, notice_html
from bertviz_lab.widgets.panels.saliency import SaliencyPanel
from bertviz_lab.widgets.panels.text_run import TextRun, run_text
from bertviz_lab.widgets.views.head_view import HeadView
from bertviz_lab.widgets.views.heatmap import HeatmapView
from bertviz_lab.widgets.views.model_view import ModelView
from bertviz_lab.widgets.views.neuron import NeuronView


def trace_text(model: torch.nn.Module, tokenizer: Any, text: str,
               text_b: str | None = None) -> tuple[Trace, Truncation]:
    """Run the model once on a text (pair), cut to fit the model, and record every layer's attention; also say
    what the cut kept."""
    run = run_text(model, tokenizer, text, text_b, shapes=False)
    return run.trace, run.truncation


class AttentionPanel(Panel):
    """A traced model's attention: layer/head selectors, aggregation (head, mean, rollout), colour scale, [CLS]/[SEP]
    and sentence-pair filters, and the registered views, each with a toolbar of the controls that apply to it and an
    export button. `panel.heatmap`, `panel.head_view`, ... (a view's registry `attribute`) is the view's widget, made
    on first use; what a view draws and what its clicks do is its glue's (`attention_views`)."""

    trace: Trace | None  # None once the panel is closed (release)
    attentions: list[torch.Tensor] | None
    layer_qk: LayerQK | None
    heatmap: HeatmapView  # for type checkers: __getattr__ gives every registered view's widget
    head_view: HeadView
    model_view: ModelView
    neuron_view: NeuronView

    def __init__(self, trace: Trace | None = None, *, model: torch.nn.Module | None = None, tokenizer: Any = None,
                 text: str | None = None, text_b: str | None = None, layer: int = 0, head: int = 0,
                 view: str = registry.HEATMAP, aggregation: str = "head", row: int = 0, head_view_k: int = 8,
                 scale: str = "linear", special: str = "clip", run: TextRun | None = None, query: int | None = None,
                 ablation_mode: str = "zero") -> None:
        if run is not None:  # a forward someone else ran (a Workbench's): shown as is, its text changeable after
            trace, model, tokenizer, text, text_b = run.trace, run.model, run.tokenizer, run.text, run.text_b
        registry.view(view, registry.ATTENTION)  # a one-line error naming the views
        self.model, self.tokenizer, self.row, self.head_view_k = model, tokenizer, row, head_view_k
        self.toolbar = bar = AttentionControls(view, aggregation, scale, special)
        self.view, self.layer, self.head, self.query = bar.view, bar.layer, bar.head, bar.query
        self.aggregation, self.direction, self.scale = bar.aggregation, bar.direction, bar.scale
        self.special = bar.special
        self.hide_special, self.toolbars = bar.hide_special, bar.toolbars
        self._export_window: list[int] | None = None  # save(window=...) draws the heatmap with it
        if trace is None:
            if model is None or tokenizer is None or text is None:
                raise TypeError("AttentionPanel needs a Trace, or a model, a tokenizer and a text.")
            run = run_text(model, tokenizer, text, text_b, shapes=False)
            trace = run.trace
        self.run = run
        self.truncation = run.truncation if run is not None else None
        self.text, self.text_b = text, text_b
        self.truncation_notice = lean(widgets.HTML, notice_html(self.truncation))
        self.message = lean(widgets.HTML)
        # The views are made by their glue (attention_views) when first shown (the heatmap at once), so a panel
        # opened on the heatmap sends the page none of the others' models; the state they share lives here.
        self._source = TraceSource(self, ablation_mode)
        self._made: dict[str, widgets.Widget] = {}
        self.heads_shown = HeadsShown(lambda: self._made.get(registry.HEAD_VIEW), lambda: self._source.num_heads)
        self.export_bar = ExportBar(self, "attention")
        # Every view, once made, stays mounted and is shown or hidden, so switching back draws nothing anew.
        self.slots: dict[str, widgets.VBox] = {}
        self.saliency: SaliencyPanel | None = None  # made when the saliency view is first shown
        self.saliency_note: widgets.HTML | None = None  # what the saliency view says while it has no panel
        self.stage = lean(widgets.VBox)
        self._make(registry.HEATMAP, hidden=False)
        super().__init__([self.view, self.toolbar, self.truncation_notice, self.message, self.stage])
        self._quietly = Hold()  # open while several controls are set at once: one redraw after
        self.set_trace(trace, layer=layer, head=head, query=query)
        for control in (self.view, self.layer, self.aggregation, self.direction, self.scale, self.special, self.query):
            control.observe(lambda _: self.redraw(), names="value")
        self.head.observe(self._head_chosen, names="value")

    def release(self) -> None:
        """A closed panel lets go of its trace (77 MB at 512 tokens for MiniLM), run and ablation."""
        self.trace = self.attentions = self.run = self.layer_qk = None
        if "_source" in vars(self):  # not where the constructor stopped at a wrong argument
            self._source.release()

    # the views, made on first use ----------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        """`panel.heatmap`, `panel.neuron_view`, ...: a registered view's widget, by the registry's `attribute`."""
        if not name.startswith("_"):
            for entry in registry.views(registry.ATTENTION):
                if entry.attribute == name:
                    return self._view(entry.name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def ablation_bar(self) -> AblationBar:
        """The model view's ablation row: how heads are switched off, and what that did."""
        self._view(registry.MODEL_VIEW)
        assert self._source.ablation_bar is not None  # the model view's glue makes it with the view
        return self._source.ablation_bar

    def _view(self, name: str) -> widgets.Widget:
        return self._made[name] if name in self._made else self._make(name)

    def _make(self, name: str, hidden: bool = True) -> widgets.Widget:
        """Make a view through its glue, wired to the panel, and mount it (hidden) on the stage."""
        view = glue(name)
        widget = self._made[name] = view.make(self._source)
        parts = view.parts(self._source, widget)
        self.slots[name] = widgets.VBox(parts, layout=widgets.Layout(display="none")) if hidden else widgets.VBox(parts)
        self.stage.children = (*self.stage.children, self.slots[name])
        return widget

    # data ------------------------------------------------------------------------------------------------
    def set_trace(self, trace: Trace, layer: int | None = None, head: int | None = None,
                  query: int | None = None) -> None:
        """Show another trace (keeps the layer, head and query token when they still exist)."""
        attentions = trace.attentions
        if not attentions:
            raise ValueError("the trace holds no attention maps; record it with trace(model, attentions=True).")
        num_layers, num_heads = len(attentions), attentions[0].shape[1]
        layer, head = self.toolbar.checked(layer, head, num_layers, num_heads)
        if self.run is not None and self.run.trace is not trace:
            self.run = None  # a trace given on its own: no text, no output
        shown: list[torch.Tensor] = getattr(self, "attentions", None) or []  # the input before, if any
        same_heads = bool(shown) and (len(shown), shown[0].shape[1]) == (num_layers, num_heads)
        same_model = bool(shown) and shown[0].shape[1] == num_heads
        self.trace, self.attentions = trace, attentions
        self.info = token_info(trace, self.row)
        self.layer_qk = LayerQK(trace, self.model, self._inputs(), self.row)
        self._source.new_input()
        with self._quietly():
            self.toolbar.set_input(self.info, num_layers, num_heads, layer, head, query)
            for name, widget in self._made.items():
                glue(name).new_input(self._source, widget, same_heads)
            # the heads the chips chose stay on for a new text of the same model; else the selected head alone
            kept = self.heads_shown.heads
            self.heads_shown.show(list(kept) if same_model and kept else [head])
        self._source.rerun_ablation()  # heads switched off stay off for the new input; it redraws

    def _inputs(self) -> dict[str, torch.Tensor]:
        """The model inputs of what is shown: the run's, or those the trace recorded."""
        return dict(self.run.encoded.inputs) if self.run is not None else recorded_inputs(self._source.trace)

    def set_text(self, text: str, text_b: str | None = None) -> None:
        """Re-run the model on a new text (pair) and redraw."""
        if self.model is None:
            raise ValueError("this panel shows a fixed trace; build it with model= and tokenizer= to change the text.")
        self.show_run(run_text(self.model, self.tokenizer, text, text_b, shapes=False))

    def show_run(self, run: TextRun) -> None:
        """Show a forward already run on a text (pair), e.g. the one a Workbench shares between its panels."""
        self.text, self.text_b, self.truncation = run.text, run.text_b, run.truncation
        self.run = run
        self.truncation_notice.value = notice_html(self.truncation)
        self.set_trace(run.trace)

    def rerun(self, *_: Any) -> None:
        """Trace the current text again (e.g. after the model moved to another device)."""
        if self.model is not None and self.text is not None:
            self.set_text(self.text, self.text_b)

    def positions(self) -> tuple[np.ndarray, np.ndarray]:
        """Query rows and key columns currently shown."""
        return D.select_positions(self.info, self.special.value == "hide", self.direction.value)

    def matrix(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The matrix on screen with its query and key positions."""
        axes = self._source.axes()
        return self._source.weights(axes), axes.queries, axes.keys

    # what the controls and the views do ---------------------------------------------------------------------
    def _head_chosen(self, change: dict) -> None:
        """A head picked in the dropdown is also the one the head view shows."""
        if not self._quietly:
            self.heads_shown.show([change["new"]])
        self.redraw()

    def view_moved(self, view: str, *, query: int | None = None, heads: list[int] | None = None) -> None:
        """A reader changed `view` in its widget (a window zoomed or scrolled, a cell or the chips chosen): the query
        token and the heads shown follow without a redraw; where `view` is on screen, the static copy and the
        export's name follow."""
        if query is not None:
            with self._quietly():
                self.query.value = query
        if heads is not None:
            self.heads_shown.heads = list(heads)
        if not self._quietly and self.view.value == view:
            self._name_export()
            self.figure_changed()

    def open_view(self, view: str | None = None, *, heads: list[int] | None = None, focus: bool = False,
                  **controls: Any) -> None:
        """Show `view` (None: the one on screen) with the controls named (layer=, head=, query=, aggregation=) and
        the head view's `heads` set at once, drawn anew once (a thumbnail opened, a head view's token clicked);
        focus=True sends the keyboard into the view."""
        with self._quietly():
            for name, value in controls.items():
                getattr(self.toolbar, name).value = value
            if heads is not None:
                self.heads_shown.show(heads)
        if view is None or self.view.value == view:
            self.redraw()
        else:
            self.view.value = view
        if focus:
            self.on_screen.focus_request += 1


    # drawing ---------------------------------------------------------------------------------------------
    def redraw(self) -> None:
        """Update the view on screen, sending only what it shows."""
        if self._quietly:
            return
        self.head.disabled = self.aggregation.value != "head" and self.view.value == registry.HEATMAP
        self.message.value = ""
        if self.direction.value != "all" and not self.info.has_pair:
            self.message.value = "A→B and B→A need a sentence pair; showing all tokens."
            with self._quietly():
                self.direction.value = "all"
        self.toolbar.sync_special()
        name = self.view.value
        view, widget = glue(name), self._view(name)
        view.draw(self._source, widget)
        self.toolbar.show(name, *([self.export_bar] if view.exports() else []))
        for shown, slot in self.slots.items():
            slot.layout.display = None if shown == name else "none"
        self._name_export()
        self.figure_changed()

    @property
    def on_screen(self) -> widgets.Widget:
        """The view widget currently shown (the HeatmapView, the HeadView, the ModelView, the NeuronView, or the
        SaliencyPanel: its note while there is none)."""
        return glue(self.view.value).on_screen(self._source, self._view(self.view.value))

    def save(self, path: str | Path, scale: float = 1, theme: str = "light", caption: bool | str = False,
             window: tuple[int, int] | None = None) -> Path:
        """Write the figure on screen to `path` (SVG or PNG by its suffix, see Panel.save); the heatmap also takes
        `window=(start, end)`: the query and key tokens at positions start..end-1 drawn, whatever the window on
        screen (which stays as it is)."""
        if window is None:
            return super().save(path, scale, theme, caption)
        if self.view.value != registry.HEATMAP:
            raise ValueError(f"window= applies to the heatmap; the view on screen is the {self.view.value}.")
        start, end = check_window(window, len(self.info.tokens))
        self._export_window = [start, end, start, end]
        try:
            return super().save(path, scale, theme, caption)
        finally:
            self._export_window = None

    def to_plotly(self) -> Any:
        """The heatmap, head view, model view or saliency view on screen as a plotly Figure: the same values, colours,
        title and hover, for a plotly dashboard. The neuron view has no plotly counterpart yet: save() it."""
        return glue(self.view.value).to_plotly(self._source, self._view(self.view.value))

    def to_svg(self) -> str:
        """The view on screen as a standalone SVG document."""
        return glue(self.view.value).to_svg(self._source, self._view(self.view.value))

    def static_html(self) -> str:
        """The figure on screen as self-contained HTML (its SVG; no scripts, no network)."""
        return f"<div class='bvl-figure bvl-attention'>{self.to_svg()}</div>"

    def _name_export(self) -> None:
        self.export_bar.name = glue(self.view.value).export_name(self._source, self._view(self.view.value))
