"""Workbench: every panel in tabs around one text box; open_view() is what %bert_inspect calls."""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets
import torch

from bertviz_lab.model.encoding import check_texts, encode_text
from bertviz_lab.widgets import registry
from bertviz_lab.widgets.figures.text import escape
from bertviz_lab.widgets.panels.architecture import ArchitecturePanel
from bertviz_lab.widgets.panels.attention import AttentionPanel
from bertviz_lab.widgets.panels.causal import CausalPanel
from bertviz_lab.widgets.panels.corpus import CorpusPanel, show_at
from bertviz_lab.widgets.panels.device_picker import DevicePicker
from bertviz_lab.widgets.panels.masking import MaskingPreview
from bertviz_lab.widgets.panels.model_label import model_name, model_summary
from bertviz_lab.widgets.panels.models import model_and_tokenizer
from bertviz_lab.widgets.panels.panel import Panel, error_html
from bertviz_lab.widgets.panels.predictions import Predictions
from bertviz_lab.widgets.panels.text_run import TextRun, run_text
from bertviz_lab.widgets.panels.training import TrainingPanel

DEFAULT_TEXT = "The cat sat on the mat because it was warm."
TABS = tuple(view.name for view in registry.views(registry.TAB) if not view.on_request)  # in order


class Workbench(Panel):
    """Tabs Attention · Masking · Architecture · Training · Device sharing one text (and optional sentence B), and
    a Causal tab with texts of its own (a clean and a corrupted one).

    Each text (and each device move) is encoded once and run through the model once, traced; every panel reads
    that one run. Only the masking preview runs a forward of its own, on its masked copy of the text.
    """

    def __init__(self, model: torch.nn.Module | str | None = None, tokenizer: Any = None, text: str = DEFAULT_TEXT,
                 text_b: str | None = None, layer: int = 0, head: int = 0, tab: str = "attention",
                 corpus: Any = None) -> None:
        if tab not in TABS and not (tab == "corpus" and corpus is not None):
            raise ValueError(f"tab must be one of {TABS} (or 'corpus' with a corpus), got {tab!r}.")
        check_texts(text, text_b)
        self.model, self.tokenizer = model_and_tokenizer(model, tokenizer)
        # which model is loaded, its size and its heads: the first thing the workbench says
        self.model_header = widgets.HTML(header_html(self.model))
        self.text_box = widgets.Textarea(value=text, description="text", layout=widgets.Layout(width="70%"))
        self.text_b_box = widgets.Text(value=text_b or "", description="sentence B", placeholder="(optional)",
                                       layout=widgets.Layout(width="70%"))
        self.run_button = widgets.Button(description="Run", icon="play", button_style="primary")
        self.error = widgets.HTML()
        run = self.forward(text, text_b)
        self.predictions = Predictions(self.model, self.tokenizer, text, text_b, run=run)
        self.attention = AttentionPanel(run=run, layer=layer, head=head)
        self.masking = MaskingPreview(self.tokenizer, text, model=self.model, text_b=text_b, run=run)
        self.architecture = ArchitecturePanel(self.model, inputs=run.encoded.inputs, trace=run.trace)
        self.training = TrainingPanel()
        self.masking.offer_model_from(self.training.ensure_trainer)  # a model with an MLM head, on request
        self.training.on_new_trainer.append(self._training_restarted)
        self.device = DevicePicker(self.model, on_change=self._rerun)
        self.causal = CausalPanel(self.model, self.tokenizer, deferred=True)  # its tool runs when the tab opens
        self.causal.offer_model_from(self.training.ensure_trainer)
        self.tabs = widgets.Tab(children=[getattr(self, name) for name in TABS])
        for index, name in enumerate(TABS):
            self.tabs.set_title(index, registry.view(name, registry.TAB).label)
        self.corpus = None
        if corpus is not None:  # a Corpus tab (a Corpus or its folder): the texts it opens show in the Attention tab
            self.corpus = CorpusPanel(corpus, self.model, self.tokenizer, on_open=self.open_corpus_text)
            self.tabs.children = (*self.tabs.children, self.corpus)
            self.causal.corpus = self.corpus.corpus  # its FFN neurons list the corpus's texts
            self.tabs.set_title(len(TABS), registry.view("corpus", registry.TAB).label)
        self.tabs.selected_index = (*TABS, "corpus").index(tab)
        for panel in self.panels().values():
            panel.on_figure_changed(self.figure_changed)
        self.tabs.observe(lambda _: self._tab_chosen(), names="selected_index")
        self.run_button.on_click(lambda _: self.run())
        header = widgets.VBox([self.model_header, widgets.HBox([self.text_box, self.run_button]), self.text_b_box,
                               self.error, self.predictions])
        super().__init__([header, self.tabs])

    def _tab_chosen(self) -> None:
        if self.tabs.selected_index == TABS.index("causal") and self.causal.on_screen is None:
            self.causal.show_tool()  # the first time the tab is opened
        self.figure_changed()

    def forward(self, text: str, text_b: str | None = None) -> TextRun:
        """Encode the text (pair) once and run the model on it once, traced: the run every panel reads."""
        return run_text(self.model, self.tokenizer, text, text_b, shapes=True)

    def show(self, run: TextRun) -> None:
        """Hand one run to every panel."""
        self.attention.show_run(run)
        self.predictions.show_run(run)
        self.masking.show_run(run)
        self.architecture.show_trace(run.trace, run.encoded.inputs)

    def run(self) -> None:
        """Send the text box's text to every panel."""
        text, text_b = self.text_box.value, self.text_b_box.value.strip() or None
        try:
            self.show(self.forward(text, text_b))
            self.error.value = ""
        except ValueError as error:
            self.error.value = error_html(error)

    def open_corpus_text(self, text: str, text_b: str | None, layer: int | None, head: int | None,
                         position: int | None) -> None:
        """A text opened in the Corpus tab: run it, point the Attention tab at its layer, head and token, show it."""
        self.text_box.value, self.text_b_box.value = text, text_b or ""
        self.run()
        show_at(self.attention, layer, head, position)
        self.tabs.selected_index = 0

    def _training_restarted(self, old: Any, new: Any) -> None:
        """The masking tab that followed the Training tab's old run follows its fresh one."""
        if old is not None and getattr(self.masking, "trainer", None) is old:
            self.masking.follow(new)

    def caption_parts(self) -> tuple[str, str | None, str | None]:
        """The model and the text box's text, for an export's caption."""
        return model_name(self.model), self.text_box.value, self.text_b_box.value.strip() or None

    def _rerun(self, device: torch.device) -> None:
        """After a device move, the panels' text runs again, once, on the new device."""
        text = self.attention.text
        assert text is not None  # the workbench builds its attention panel from a run of a text
        self.show(self.forward(text, self.attention.text_b))

    def panels(self) -> dict[str, Panel]:
        """The tabs' panels by tab name."""
        return dict(zip((*TABS, "corpus"), self.tabs.children))

    def static_html(self) -> str:
        """Every tab's static figure, one section each, the selected tab's open (no scripts needed)."""
        selected = TABS[self.tabs.selected_index or 0]
        sections = "".join(
            f"<details class='bvl-tab' data-tab='{name}'{' open' if name == selected else ''}>"
            f"<summary><b>{name.capitalize()}</b></summary>{panel.static_copy.html()}</details>"
            for name, panel in self.panels().items())
        text = escape(self.text_box.value) + (f" · <b>B</b>: {escape(self.text_b_box.value)}"
                                               if self.text_b_box.value.strip() else "")
        return (f"<div class='bvl-workbench'>{self.model_header.value}<p><b>text</b>: {text}</p>"
                f"{self.predictions.value}{sections}</div>")


def header_html(model: torch.nn.Module) -> str:
    """"<b>all-MiniLM-L6-v2</b> · 22.7 M parameters · 6 layers × 12 heads", escaped."""
    name, _, rest = model_summary(model).partition(" · ")
    details = f" · {escape(rest)}" if rest else ""
    return f"<div class='bvl-model-header'>model: <b>{escape(name)}</b>{details}</div>"


def open_view(model: torch.nn.Module | str | None = None, tokenizer: Any = None, text: str = DEFAULT_TEXT,
              text_b: str | None = None, view: str = "all", layer: int | None = None, head: int | None = None,
              device: str | None = None, corpus: Any = None) -> Panel:
    """One panel (or the whole workbench) on a text: what %bert_inspect shows. `view` is a `--view` name of the
    registry: a workbench tab, or a view of the attention panel (opened on it); a corpus (or its folder) opens the
    workbench on its Corpus tab."""
    shown = registry.by_magic_name(view)
    if corpus is not None and shown is not None:
        raise ValueError(f"a corpus opens the workbench's Corpus tab; leave out the {view} view.")
    takes_layer = shown is None or shown.name == "attention" or "layer" in shown.controls
    if not takes_layer and (layer is not None or head is not None):
        raise ValueError(f"layer and head choose what the attention view shows; the {view} view has none.")
    model, tokenizer = model_and_tokenizer(model, tokenizer)
    if device is not None:
        model.to(device)
    layer, head = layer or 0, head or 0
    if shown is None:
        return Workbench(model, tokenizer, text, text_b, layer=layer, head=head,
                         **({"corpus": corpus, "tab": "corpus"} if corpus is not None else {}))
    if shown.place == registry.ATTENTION or shown.name == "attention":
        return AttentionPanel(model=model, tokenizer=tokenizer, text=text, text_b=text_b, layer=layer, head=head,
                              view=registry.HEATMAP if shown.place == registry.TAB else shown.name)
    if shown.name == "masking":
        return MaskingPreview(tokenizer, text, model=model, text_b=text_b)
    if shown.name == "architecture":
        return ArchitecturePanel(model, inputs=encode_text(model, tokenizer, text, text_b)[1])
    if shown.name == "training":
        return TrainingPanel()
    if shown.name == "device":
        return DevicePicker(model)
    if shown.name == "causal":
        return CausalPanel(model, tokenizer, clean=text, corrupted=None)
    raise ValueError(f"the {shown.name} tab does not open on its own; use the workbench.")
