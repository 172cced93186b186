"""AttentionPanel: a traced BERT's attention as a heatmap, a head view, a model view (with head ablation) and a neuron
view, each with its own toolbar, and the text's token saliency (an embedded SaliencyPanel)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

import ipywidgets as widgets
import numpy as np
import torch

from bertviz_lab.model.encoding import Truncation
from bertviz_lab.trace.hooks import Trace
from bertviz_lab.widgets import registry
from bertviz_lab.widgets.figures import attention_data as D
from bertviz_lab.widgets.panels.ablation_bar import AblationBar, AblationSource, check_ablation_mode
from bertviz_lab.widgets.panels.attention_views import glue
from bertviz_lab.widgets.panels.attention_views.trace_source import TraceSource
from bertviz_lab.widgets.panels.controls import LABEL_STYLE, lean, toggle_buttons, toolbar
from bertviz_lab.widgets.panels.export_bar import ExportBar
from bertviz_lab.widgets.panels.layer_qk import LayerQK, recorded_inputs
from bertviz_lab.widgets.panels.panel import Panel, notice_html
from bertviz_lab.widgets.panels.running import evaluating
from bertviz_lab.widgets.panels.saliency import SaliencyPanel
from bertviz_lab.widgets.panels.text_run import TextRun, run_text
from bertviz_lab.widgets.views.head_view import HeadView
from bertviz_lab.widgets.views.heatmap import HeatmapView
from bertviz_lab.widgets.views.model_view import ModelView
from bertviz_lab.widgets.views.neuron import NeuronView

VIEWS = tuple(view.name for view in registry.views(registry.ATTENTION))  # the switcher's, in order
TOOLBARS = {view.name: view.controls for view in registry.views(registry.ATTENTION)}  # the controls of each view
SCALE_OPTIONS = (("linear", "linear"), ("per row", "row"), ("log", "log"))


def trace_text(model: torch.nn.Module, tokenizer: Any, text: str,
               text_b: str | None = None) -> tuple[Trace, Truncation]:
    """Run the model once on a text (pair), cut to fit the model, and record every layer's attention; also say
    what the cut kept."""
    run = run_text(model, tokenizer, text, text_b, shapes=False)
    return run.trace, run.truncation


def check_window(window: Any, tokens: int) -> tuple[int, int]:
    """(start, end) of a window of token positions, checked: whole numbers, 0 <= start < end <= tokens."""
    try:
        start, end = (int(v) for v in window)
    except (TypeError, ValueError):
        raise TypeError(f"window must be (start, end), two token positions, got {window!r}.") from None
    if not 0 <= start < end <= tokens:
        raise ValueError(f"window {(start, end)} must have 0 <= start < end <= {tokens} (the tokens of this input).")
    return start, end


class HeadsShown:
    """`panel.heads_shown.value = (0, 7)`: the heads the head view shows; its chips set the same heads."""

    def __init__(self, panel: "AttentionPanel") -> None:
        self._panel = panel

    @property
    def value(self) -> tuple[int, ...]:
        return tuple(self._panel._heads)

    @value.setter
    def value(self, heads: Any) -> None:
        self._panel._show_heads(sorted({int(h) for h in heads}))

    @property
    def options(self) -> tuple[int, ...]:
        return tuple(range(self._panel._num_heads))


class AttentionPanel(Panel):
    """Layer/head selectors, aggregation (head, mean, rollout), colour scale, [CLS]/[SEP] and sentence-pair filters,
    five views; each view has a toolbar with the controls that apply to it and an export button.

    The model view switches heads off (ablation) and shows what changed; the neuron view shows one query's q against
    every key's k in one head, from q and k recorded for that layer when it is first shown (see layer_qk); the
    saliency view is a SaliencyPanel (its own toolbar) made when first shown, following the panel's text after.
    """

    def __init__(self, trace: Trace | None = None, *, model: torch.nn.Module | None = None, tokenizer: Any = None,
                 text: str | None = None, text_b: str | None = None, layer: int = 0, head: int = 0,
                 view: str = "heatmap", aggregation: str = "head", row: int = 0, head_view_k: int = 8,
                 scale: str = "linear", special: str = "clip", run: TextRun | None = None, query: int | None = None,
                 ablation_mode: str = "zero") -> None:
        if run is not None:  # a forward someone else ran (a Workbench's): shown as is, its text changeable after
            trace, model, tokenizer, text, text_b = run.trace, run.model, run.tokenizer, run.text, run.text_b
        registry.view(view, registry.ATTENTION)  # a one-line error naming the views
        self.model, self.tokenizer, self.row, self.head_view_k = model, tokenizer, row, head_view_k
        if scale not in D.SCALES:
            raise ValueError(f"scale must be one of {D.SCALES}, got {scale!r}.")
        if special not in D.SPECIAL_MODES:
            raise ValueError(f"special must be one of {D.SPECIAL_MODES}, got {special!r}.")
        self._marking_selection = False
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
        self.view = toggle_buttons([(v.label, v.name) for v in registry.views(registry.ATTENTION)], view,
                                   label="view")
        self.layer, self.head, self.query = (
            lean(widgets.Dropdown, description=name, style=LABEL_STYLE, layout={"width": "auto"})
            for name in ("layer", "head", "query token"))
        # toggle buttons labelled by their own description, drawn beside them (controls.labelled)
        self.aggregation = toggle_buttons(D.AGGREGATIONS, aggregation, label="show")
        self.direction = toggle_buttons(D.DIRECTIONS, "all", label="pair")
        self.scale = toggle_buttons(SCALE_OPTIONS, scale, ["one scale for the whole matrix",
                                                           "each query row scaled to its own max",
                                                           "log10, four decades below the max"], "colour scale")
        self.special = toggle_buttons(D.SPECIAL_MODES, special, [
            "in the colour scale", "left out of the colour scale (shown saturated)", "not shown"], "[CLS]/[SEP]")
        # the head view has no colour scale: its one [CLS]/[SEP] choice is to hide them (kept in step with `special`)
        self.hide_special = lean(widgets.Checkbox, value=special == "hide", description="hide [CLS]/[SEP]",
                                 indent=False, layout={"width": "auto"})
        self._shown_special = special if special != "hide" else "clip"
        self.message = lean(widgets.HTML)
        # The views are made by their glue (attention_views) when first shown (the heatmap at once), so a panel
        # opened on the heatmap sends the page none of the others' models; the state they share lives here.
        self._source = TraceSource(self)
        self._made: dict[str, widgets.Widget] = {}
        self._ablation_mode = check_ablation_mode(ablation_mode)
        self._heads: list[int] = []  # the heads the head view shows (its chips choose them too)
        self._num_heads = 0
        self.heads_shown = HeadsShown(self)
        self._model_view_key: tuple | None = None
        self._plain_output: Any = None
        self.export_bar = ExportBar(self, "attention")
        # each view's toolbar is made when the view is first shown (a page creates every model it is sent)
        self.toolbars: dict[str, widgets.HBox] = {}
        self.toolbar = toolbar(gap="4px 24px")
        # Every view, once made, stays mounted and is shown or hidden, so switching back draws nothing anew.
        self.slots: dict[str, widgets.VBox] = {}
        self.saliency: SaliencyPanel | None = None  # made when the saliency view is first shown
        self._saliency_stale = False
        self.saliency_note: widgets.HTML | None = None  # what the saliency view says while it has no panel
        self.stage = lean(widgets.VBox)
        self._make("heatmap", hidden=False)
        super().__init__([self.view, self.toolbar, self.truncation_notice, self.message, self.stage])
        self._suspended = False
        self.set_trace(trace, layer=layer, head=head, query=query)
        for control in (self.view, self.layer, self.aggregation, self.direction, self.scale, self.special, self.query):
            control.observe(lambda _: self.redraw(), names="value")
        self.head.observe(self._head_chosen, names="value")
        self.hide_special.observe(self._hide_special_toggled, names="value")

    def release(self) -> None:
        """A closed panel lets go of its trace (77 MB at 512 tokens for MiniLM), run and ablation."""
        self.trace = self.attentions = self.run = self.layer_qk = self._plain_output = None
        bar = self.__dict__.get("_ablation_bar")  # made with the model view, if it was ever shown
        if bar is not None:
            bar.ablation = None

    # the views made on first use ---------------------------------------------------------------------------
    @property
    def heatmap(self) -> HeatmapView:
        """The heatmap (made with the panel)."""
        return self._view("heatmap")

    @property
    def head_view(self) -> HeadView:
        """The head view (made on first use)."""
        return self._view("head view")

    @property
    def model_view(self) -> ModelView:
        """The model view, whose thumbnails open or switch off heads (made on first use, with its ablation row)."""
        return self._view("model view")

    @property
    def neuron_view(self) -> NeuronView:
        """The neuron view (made on first use)."""
        return self._view("neuron view")

    @property
    def ablation_bar(self) -> AblationBar:
        """The model view's ablation row: how heads are switched off, and what that did."""
        self._view("model view")
        return self._ablation_bar

    def _view(self, name: str) -> widgets.Widget:
        made = self._made.get(name)
        return made if made is not None else self._make(name)

    def _make(self, name: str, hidden: bool = True) -> widgets.Widget:
        """Make a view through its glue, wired to the panel, and mount it (hidden) on the stage."""
        view = glue(name)
        widget = view.make(self._source)
        self._made[name] = widget
        parts = view.parts(self._source, widget)
        self.slots[name] = widgets.VBox(parts, layout=widgets.Layout(display="none")) if hidden else widgets.VBox(parts)
        self.stage.children = (*self.stage.children, self.slots[name])
        return widget

    def _show_heads(self, heads: list[int]) -> None:
        """The heads the head view shows (its chips and the head dropdown both set them)."""
        self._heads = list(heads)
        view = self._made.get("head view")
        if view is not None:
            view.heads = list(heads)

    def _heads_clicked(self, change: dict) -> None:
        self._heads = list(change["new"])
        self._head_view_changed()

    # data ------------------------------------------------------------------------------------------------
    def set_trace(self, trace: Trace, layer: int | None = None, head: int | None = None,
                  query: int | None = None) -> None:
        """Show another trace (keeps the layer, head and query token when they still exist)."""
        attentions = trace.attentions
        if not attentions:
            raise ValueError("the trace holds no attention maps; record it with trace(model, attentions=True).")
        tokens = (trace.tokens or [[str(i) for i in range(attentions[0].shape[-1])]])[self.row]
        mask = trace.attention_mask
        types = trace.token_type_ids
        num_layers, num_heads = len(attentions), attentions[0].shape[1]
        layer = self.layer.value if layer is None and self.layer.value is not None else (layer or 0)
        head = self.head.value if head is None and self.head.value is not None else (head or 0)
        for name, value, limit in (("layer", layer, num_layers), ("head", head, num_heads)):
            if not 0 <= value < limit:
                raise ValueError(f"{name} {value} does not exist; this model has {name}s 0..{limit - 1}.")
        if self.run is not None and self.run.trace is not trace:
            self.run = None  # a trace given on its own: no text, no output
        shown = getattr(self, "attentions", None)
        same_heads = bool(shown) and (len(shown), shown[0].shape[1]) == (num_layers, num_heads)
        self.trace, self.attentions = trace, attentions
        self.info = D.token_info(tokens, None if mask is None else mask[self.row],
                                 None if types is None else types[self.row])
        self.layer_qk = LayerQK(trace, self.model, self._inputs(), self.row)
        self._saliency_stale = self.saliency is not None
        self._plain_output = None
        self._model_view_key = None
        query = self._query_after(query, tokens)
        with self._quietly():
            self.layer.options = list(range(num_layers))
            self.head.options = list(range(num_heads))
            self.layer.value, self.head.value = layer, head
            self.query.options = [(f"{i} · {tokens[i]}", i) for i in np.flatnonzero(self.info.real).tolist()]
            self.query.value = query
            # the heads the chips chose stay on for a new text of the same model; else the selected head alone
            same_model = self._num_heads == num_heads
            self._num_heads = num_heads
            if "head view" in self._made:
                self._made["head view"].num_heads = num_heads
            self._show_heads(list(self._heads) if same_model and self._heads else [head])
            self.direction.disabled = not self.info.has_pair
            if not self.info.has_pair:
                self.direction.value = "all"
            if not same_heads and "model view" in self._made:
                self.model_view.ablated = []  # another model: its heads are not these
        if "model view" in self._made:
            self.ablation_bar.recompute()  # heads switched off stay off for the new input; it redraws
        else:
            self._ablation_changed()

    def _query_after(self, query: int | None, tokens: list[str]) -> int:
        """The query token to show: the one asked for, else the one shown before if it is still there, else the
        first word (not [CLS]/[SEP], not padding)."""
        real = np.flatnonzero(self.info.real).tolist()
        if query is not None:
            if query not in real:
                raise ValueError(f"query token {query} does not exist; this input has tokens 0..{len(tokens) - 1} "
                                 f"({len(real)} not padding).")
            return query
        if self.query.value is not None and self.query.value in real:
            return self.query.value
        words = [i for i in real if not self.info.special[i]]
        return (words or real or [0])[0]

    def _inputs(self) -> dict[str, torch.Tensor]:
        """The model inputs of what is shown: the run's, or those the trace recorded."""
        return dict(self.run.encoded.inputs) if self.run is not None else recorded_inputs(self.trace)

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
        full = D.attention_matrix(self.attentions, self.layer.value, self.head.value, self.aggregation.value,
                                  self.row, self.trace.attention_mask)
        queries, keys = self.positions()
        return full[np.ix_(queries, keys)], queries, keys

    # controls --------------------------------------------------------------------------------------------
    def _head_chosen(self, change: dict) -> None:
        """A head picked in the dropdown is also the one the head view shows."""
        if not self._suspended:
            self._show_heads([change["new"]])
        self.redraw()

    def _hide_special_toggled(self, change: dict) -> None:
        if self._suspended:
            return
        self.special.value = "hide" if change["new"] else self._shown_special

    def _head_view_moved(self, change: dict) -> None:
        """The head view's keys or wheel moved its query or window: the query token follows (the neuron view's), and
        the static copy and export show the new window."""
        view = self._made.get("head view")
        if change["name"] == "query" and view is not None and 0 <= change["new"] < len(view.query_tokens):
            queries, _ = self.positions()
            if change["new"] < len(queries):
                with self._quietly():
                    self.query.value = int(queries[change["new"]])
        self._head_view_changed()

    def _heatmap_zoomed(self, change: dict) -> None:
        """The heatmap's window or selected cell changed (in a front end, or here): the static copy and exports
        follow; a selected cell's query becomes the query token."""
        if change["name"] == "selected" and len(change["new"]) == 2 and change["new"][0] in self._query_positions():
            with self._quietly():
                self.query.value = change["new"][0]
        if not self._suspended and self.view.value == "heatmap":
            self._name_export()
            self.figure_changed()

    def _query_positions(self) -> list[int]:
        return [value for _, value in self.query.options]

    def _head_view_changed(self) -> None:
        """The chips changed the heads shown: the static copy and export follow."""
        if not self._suspended and self.view.value == "head view":
            self._name_export()
            self.figure_changed()

    def _open_thumbnail(self, change: dict) -> None:
        if self._marking_selection:  # redraw() marking the shown head, not a click
            return
        layer, head = self.model_view.selected  # a new selection, or the selected one opened again
        with self._quietly():
            self.layer.value, self.head.value, self.aggregation.value = layer, head, "head"
            self._show_heads([head])
        self._switch_to("heatmap")
        self.heatmap.focus_request += 1  # the keyboard follows into the heatmap's cells

    def _open_neuron_view(self, query_index: int, head: int) -> None:
        """A query token (or a line) clicked in the head view: the neuron view of that query, at this layer, in that
        head (a token: the first head shown)."""
        queries, _ = self.positions()
        if not 0 <= query_index < len(queries):
            return
        if head < 0:
            head = min(self._heads) if self._heads else self.head.value
        with self._quietly():
            self.head.value = head
            self.query.value = int(queries[query_index])
        self._switch_to("neuron view")

    @contextlib.contextmanager
    def _quietly(self) -> Iterator[None]:
        """Set several controls at once: no redraw until the block ends."""
        self._suspended = True
        try:
            yield
        finally:
            self._suspended = False

    def _switch_to(self, view: str) -> None:
        """Show `view`, drawn anew (choosing it in the view control redraws; it may be on screen already)."""
        if self.view.value == view:
            self.redraw()
        else:
            self.view.value = view

    def _query_clicked(self, position: int) -> None:
        """A key's token clicked in the neuron view becomes the query."""
        if position in self.query.options or position in [value for _, value in self.query.options]:
            self.query.value = position

    def _inputs_output(self) -> Any:
        """The unablated forward's output on the shown input: the run's, else one forward run here (kept)."""
        if self.run is not None:
            return self.run.output
        if self._plain_output is None:
            device = next(self.model.parameters()).device
            inputs = {key: value.to(device) for key, value in self._inputs().items()}
            with evaluating(self.model), torch.inference_mode():
                self._plain_output = self.model(**inputs)
        return self._plain_output

    def _ablation_source(self) -> AblationSource | None:
        """What the ablation row runs again (None where the panel has no model, only a trace)."""
        inputs = self._inputs()
        if self.model is None or not inputs:
            return None
        return AblationSource(self.model, self.tokenizer, self.trace, inputs, self._inputs_output, self.row)

    def _ablation_changed(self) -> None:
        """Heads went off or on (or the mode or the display changed): the model view draws the new state."""
        self._model_view_key = None
        if not self._suspended:
            self.redraw()

    # drawing ---------------------------------------------------------------------------------------------
    def redraw(self) -> None:
        """Update the view on screen, sending only what it shows."""
        if self._suspended:
            return
        self.head.disabled = self.aggregation.value != "head" and self.view.value == "heatmap"
        self.message.value = ""
        if self.direction.value != "all" and not self.info.has_pair:
            self.message.value = "A→B and B→A need a sentence pair; showing all tokens."
            with self._quietly():
                self.direction.value = "all"
        with self._quietly():  # the head view's checkbox and the [CLS]/[SEP] choice say the same
            self.hide_special.value = self.special.value == "hide"
            if self.special.value != "hide":
                self._shown_special = self.special.value
        name = self.view.value
        view, widget = glue(name), self._view(name)
        view.draw(self._source, widget)
        self.toolbar.children = [self._toolbar(name)] + ([self.export_bar] if view.exports() else [])
        for shown, slot in self.slots.items():
            slot.layout.display = None if shown == name else "none"
        self._name_export()
        self.figure_changed()

    def _toolbar(self, view: str) -> widgets.HBox:
        """The controls that apply to `view` in a row (made on first use; the saliency panel brings its own)."""
        bar = self.toolbars.get(view)
        if bar is None:
            bar = self.toolbars[view] = toolbar(*(getattr(self, name) for name in TOOLBARS[view]))
        return bar

    @property
    def on_screen(self) -> widgets.Widget:
        """The view widget currently shown (the HeatmapView, the HeadView, the ModelView, the NeuronView, or the
        SaliencyPanel: its note while there is none)."""
        name = self.view.value
        return glue(name).on_screen(self._source, self._view(name))

    def save(self, path: str | Path, scale: float = 1, theme: str = "light", caption: bool | str = False,
             window: tuple[int, int] | None = None) -> Path:
        """Write the figure on screen to `path` (SVG or PNG by its suffix, see Panel.save); the heatmap also takes
        `window=(start, end)`: the query and key tokens at positions start..end-1 drawn, whatever the window on
        screen (which stays as it is)."""
        if window is None:
            return super().save(path, scale, theme, caption)
        if self.view.value != "heatmap":
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
        name = self.view.value
        return glue(name).to_plotly(self._source, self._view(name))

    def to_svg(self) -> str:
        """The view on screen as a standalone SVG document."""
        name = self.view.value
        return glue(name).to_svg(self._source, self._view(name))

    def _saliency_figure_changed(self) -> None:
        """The saliency panel redrew (also from its worker thread): the static copy follows when it is on screen."""
        if self.view.value == "saliency":
            self.figure_changed()

    def static_html(self) -> str:
        """The figure on screen as self-contained HTML (its SVG; no scripts, no network)."""
        return f"<div class='bvl-figure bvl-attention'>{self.to_svg()}</div>"

    def _name_export(self) -> None:
        name = self.view.value
        self.export_bar.name = glue(name).export_name(self._source, self._view(name))
