"""The Causal tab: activation patching, the logit lens and FFN neurons on one model and one clean text (and, for
patching, a corrupted one), with the attention panel a patching cell opens.

The tools need a masked-LM head (all but the FFN neurons): the default model has none, so the tab carries the
masking preview's model row (this model, the Training tab's, or one named) and says in one line what to load.
A tool is made the first time it is shown, so a workbench that never opens the tab pays nothing for it.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any, Callable

import ipywidgets as widgets
import torch

from bertviz_lab.widgets import registry
from bertviz_lab.widgets.figures.text import escape
from bertviz_lab.widgets.panels.attention import AttentionPanel
from bertviz_lab.widgets.panels.controls import lean, toggle_buttons
from bertviz_lab.widgets.panels.model_row import CURRENT, TRAINING, ModelRow
from bertviz_lab.widgets.panels.models import model_and_tokenizer, named_model_and_tokenizer
from bertviz_lab.widgets.panels.panel import Panel, error_html

DEFAULT_CLEAN = "The capital of France is [MASK]."
DEFAULT_CORRUPTED = "The capital of Italy is [MASK]."
TOOLS = tuple(view.name for view in registry.views(registry.CAUSAL))  # in order


class CausalPanel(Panel):
    """A model row, the clean and corrupted texts, a switcher of the tools (the registry's Causal views) and the tool
    shown; `patching`, `logit_lens` and `ffn_neurons` are the tools' panels (made on first use), `attention` the
    attention panel a patching cell opened (None before). Texts take effect on Run (or Enter in a box).
    `deferred=True` (a workbench's tab) makes nothing until `show_tool()`: not the tool, not even the controls."""

    def __init__(self, model: torch.nn.Module | str | None = None, tokenizer: Any = None,
                 clean: str = DEFAULT_CLEAN, corrupted: str | None = DEFAULT_CORRUPTED,
                 tool: str = registry.PATCHING, corpus: Any = None, deferred: bool = False) -> None:
        registry.view(tool, registry.CAUSAL)  # a one-line error naming the tools
        self.model, self.tokenizer = model_and_tokenizer(model, tokenizer)
        self.own_model, self.own_tokenizer = self.model, self.tokenizer
        self.clean, self.corrupted, self.corpus = clean, corrupted or "", corpus
        self.tools: dict[str, Any] = {}  # the tools' panels by name
        self._held: dict[str, tuple] = {}  # what each tool was last given: ids of model and tokenizer, its texts
        self.attention: AttentionPanel | None = None
        self._training_source: Callable[[], Any] | None = None
        self._setting_boxes = False  # the panel writes its own text boxes: not a reader's Enter
        self._first_tool, self._built = tool, False
        super().__init__([])
        if not deferred:
            self.show_tool()

    def _build(self) -> None:
        """Make the tab's controls (once: a workbench whose Causal tab is never opened sends none to the page)."""
        if self._built:
            return
        self._built = True
        self.model_row = ModelRow(self.use_model, type(self.model).__name__, description="model")
        self.clean_box = lean(widgets.Text, value=self.clean, description="clean", continuous_update=False,
                              style={"description_width": "initial"}, layout={"width": "46%"})
        self.corrupted_box = lean(widgets.Text, value=self.corrupted, description="corrupted",
                                  placeholder="the clean text with one fact changed, as many tokens",
                                  continuous_update=False, style={"description_width": "initial"},
                                  layout={"width": "46%"})
        self.run_button = lean(widgets.Button, description="Run", icon="play", button_style="primary",
                               tooltip="run the tools on these texts", layout={"width": "auto"})
        self.message = lean(widgets.HTML)
        self.tool = toggle_buttons([(v.label, v.name) for v in registry.views(registry.CAUSAL)], self._first_tool,
                                   [v.summary for v in registry.views(registry.CAUSAL)])
        self.slot = widgets.Box()
        self.attention_slot = widgets.Box()
        self.run_button.on_click(lambda _: self.run())
        for box in (self.clean_box, self.corrupted_box):
            box.observe(lambda _: self._typed(), names="value")  # Enter (or leaving the box) in a text box
        self.tool.observe(lambda _: self.show_tool(), names="value")
        texts = widgets.HBox([self.clean_box, self.corrupted_box, self.run_button],
                             layout=widgets.Layout(flex_flow="row wrap", align_items="center"))
        if self._training_source is not None:
            self.model_row.offer(training=True)
        self.children = (self.model_row, texts, self.message, self.tool, self.slot, self.attention_slot)

    # the tools -------------------------------------------------------------------------------------------
    def _make(self, name: str) -> Panel:
        """The tool called `name` on the panel's model and texts."""
        if name == registry.PATCHING:
            from bertviz_lab.widgets.panels.patching import PatchingPanel

            patching = PatchingPanel(self.model, self.tokenizer, self.clean, self.corrupted)
            patching.on_open(self.open_attention)
            return patching
        if name == registry.LOGIT_LENS:
            from bertviz_lab.widgets.panels.logit_lens import LogitLensPanel

            return LogitLensPanel(self.model, self.tokenizer, self.clean)
        from bertviz_lab.widgets.panels.ffn_neurons import FFNNeuronsPanel

        neurons = FFNNeuronsPanel(self.model, self.tokenizer, self.clean, corpus=self.corpus)
        neurons.on_open_text(self._open_corpus_text)
        return neurons

    def _now(self, name: str) -> tuple:
        texts = (self.clean, self.corrupted) if name == registry.PATCHING else (self.clean,)
        return id(self.model), id(self.tokenizer), *texts

    def _given(self, name: str, tool: Any) -> None:
        """Hand `tool` the panel's model and texts where it holds others (it was hidden while they changed)."""
        held, now = self._held[name], self._now(name)
        if held == now:
            return
        with tool.hold() if name == registry.PATCHING else contextlib.nullcontext():  # patching: one run
            if held[:2] != now[:2]:
                tool.set_model(self.model, self.tokenizer)
            if held[2:] != now[2:]:
                tool.set_texts(*now[2:]) if name == registry.PATCHING else tool.set_text(*now[2:])
        self._held[name] = now

    def tool_panel(self, name: str) -> Panel:
        """The panel of the tool `name`, made on first use and holding the panel's model and texts."""
        registry.view(name, registry.CAUSAL)
        tool = self.tools.get(name)
        if tool is None:
            tool = self.tools[name] = self._make(name)
            self._held[name] = self._now(name)
            tool.on_figure_changed(self.figure_changed)
        else:
            self._given(name, tool)
        return tool

    def __getattr__(self, name: str) -> Any:
        """`panel.patching`, `panel.logit_lens`, `panel.ffn_neurons`: a tool's panel (the registry's attribute)."""
        for view in registry.views(registry.CAUSAL):
            if view.attribute == name:
                return self.tool_panel(view.name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def show_tool(self) -> None:
        """Show the tool the switcher names, brought up to date with the model and texts."""
        self._build()
        try:
            tool = self.tool_panel(self.tool.value)
        except ValueError as error:  # a text the model cannot read: the tools say nothing else
            self.message.value = error_html(error)
            return
        self.message.value = ""
        self.slot.children = (tool,)
        self.figure_changed()

    @property
    def on_screen(self) -> Panel | None:
        """The tool shown (None before the first is made)."""
        return self.slot.children[0] if self._built and self.slot.children else None

    # texts and models ---------------------------------------------------------------------------------------
    def _typed(self) -> None:
        if not self._setting_boxes:
            self.run()

    def run(self) -> None:
        """Take the text boxes' texts and show the tool on them."""
        self.set_texts(self.clean_box.value, self.corrupted_box.value)

    def set_texts(self, clean: str, corrupted: str | None = None) -> None:
        """Run the tools on a new clean text (and corrupted one, for patching); the boxes follow."""
        self.clean, self.corrupted = clean, corrupted or ""
        self._build()
        self._setting_boxes = True
        try:
            self.clean_box.value, self.corrupted_box.value = self.clean, self.corrupted
        finally:
            self._setting_boxes = False
        self.show_tool()

    def offer_model_from(self, source: Callable[[], Any]) -> None:
        """List "the Training tab's model" in the model row: the Trainer `source()` returns (a copy of its model is
        taken when it is chosen)."""
        self._training_source = source
        if self._built:
            self.model_row.offer(training=True)

    def use_model(self, which: str) -> None:
        """Run the tools with "current" (the model given), "training" (a copy of the Training tab's model as it is
        now) or the model a checkpoint folder or Hub name names; errors raise and change nothing."""
        if which == CURRENT:
            model, tokenizer = self.own_model, self.own_tokenizer
        elif which == TRAINING:
            if self._training_source is None:
                raise ValueError("there is no Training tab here: use_model('training') needs offer_model_from().")
            trainer = self._training_source()
            if getattr(trainer, "tokenizer", None) is None:
                raise ValueError("the trainer has no tokenizer to read the text with: build it with BertRunner.")
            model, tokenizer = copy.deepcopy(trainer.model).eval(), trainer.tokenizer
        else:
            model, tokenizer = named_model_and_tokenizer(which)
        self.set_model(model, tokenizer)

    def set_model(self, model: torch.nn.Module, tokenizer: Any) -> None:
        """Run the tools with `model` and its tokenizer; the attention panel a cell opened closes."""
        self.model, self.tokenizer = model, tokenizer
        self._close_attention()
        self.show_tool()

    # what a tool opens --------------------------------------------------------------------------------------
    def open_attention(self, layer: int, head: int | None = None, position: int | None = None) -> None:
        """Show the clean text's attention at `layer` (and `head`; the mean of heads for None) below the tool: what a
        patching cell opens (a cell of the layer × token map gives its `position`, which the heatmap shows whole)."""
        aggregation = "head" if head is not None else "mean"
        if self.attention is None or self.attention.text != self.clean:
            self._close_attention()
            self.attention = AttentionPanel(model=self.model, tokenizer=self.tokenizer, text=self.clean,
                                            layer=layer, head=head or 0)
            self.attention_slot.children = (self.attention,)
        controls: dict[str, Any] = {"layer": layer, "aggregation": aggregation}
        if head is not None:
            controls["head"] = head
        self.attention.open_view(registry.HEATMAP, **controls)

    def _close_attention(self) -> None:
        if self.attention is not None:
            self.attention_slot.children = ()
            self.attention.close()
            self.attention = None

    def _open_corpus_text(self, text: str, text_b: str | None, layer: int | None, position: int | None) -> None:
        """A corpus text opened in the FFN neurons tool: it becomes the clean text, shown at that layer and token."""
        neurons = self.tools[registry.FFN_NEURONS]
        neuron = neurons.chosen_neuron  # the neuron whose text this is: shown on it
        self.set_texts(text, self.corrupted)
        neurons.set(neuron=neuron, **{k: v for k, v in (("layer", layer), ("position", position)) if v is not None})

    # figures ------------------------------------------------------------------------------------------------
    def to_svg(self) -> str:
        """The figure of the tool on screen."""
        if self.on_screen is None:
            self.show_tool()
        assert self.on_screen is not None
        return self.on_screen.to_svg()

    def static_html(self) -> str:
        """The tool's static copy, under the texts it was run on."""
        if self.on_screen is None:
            return ("<div class='bvl-figure'><p>Open the Causal tab to run "
                    f"{escape(registry.view(self._first_tool, registry.CAUSAL).label.lower())}.</p></div>")
        texts = f"<p><b>clean</b>: {escape(self.clean)}" + (
            f" · <b>corrupted</b>: {escape(self.corrupted)}" if self.corrupted else "") + "</p>"
        return f"<div class='bvl-causal'>{texts}{self.on_screen.static_html()}</div>"

    def caption_parts(self) -> tuple[str, str | None, str | None]:
        from bertviz_lab.widgets.panels.model_label import model_name

        return model_name(self.model), self.clean, self.corrupted or None

    def release(self) -> None:
        """A closed panel closes the tools it made but was not showing (the one shown closed with it)."""
        tools = self.__dict__.get("tools", {})  # none where the constructor failed, or the panel was closed before
        slot = self.__dict__.get("slot")  # (made with the controls, on first show)
        shown = slot.children if slot is not None else ()
        for tool in tools.values():
            if tool not in shown:
                tool.close()
        tools.clear()
        self.attention = None
