"""The model view's ablation row: what a click on a thumbnail does (open the head, or switch it off), how a head is
switched off (zero or mean), what the thumbnails show with heads off (the attention after, or the change), a reset
button, and a line saying which heads are off and what that did to the model's predictions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import ipywidgets as widgets
import torch

from bertviz_lab.trace.hooks import Trace
from bertviz_lab.trace.interventions import ABLATION_MODES
from bertviz_lab.widgets.figures.text import escape
from bertviz_lab.widgets.panels.ablation import Ablation, Heads, run_ablated, summary_html
from bertviz_lab.widgets.panels.controls import labelled, lean, look, toggle_buttons, toolbar
from bertviz_lab.widgets.views.model_view import ModelView


@dataclass(frozen=True)
class AblationSource:
    """What running the panel's input again needs: the model, its tokenizer, the input, and the unablated run."""

    model: torch.nn.Module
    tokenizer: Any
    trace: Trace
    inputs: dict[str, torch.Tensor]
    output: Callable[[], Any]  # the unablated forward's output (computed on first use where no run kept it)
    row: int = 0


def check_ablation_mode(mode: str) -> str:
    """`mode`, if heads can be switched off that way."""
    if mode not in ABLATION_MODES:
        raise ValueError(f"ablation mode must be one of {ABLATION_MODES}, got {mode!r}.")
    return mode


class AblationBar(widgets.VBox):
    """Controls and summary of head ablation; `ablation` holds the current result (None: every head on)."""

    def __init__(self, view: ModelView, source: Callable[[], AblationSource | None],
                 on_change: Callable[[], None], mode: str = "zero") -> None:
        check_ablation_mode(mode)
        self.view, self._source, self._on_change = view, source, on_change
        self.ablation: Ablation | None = None
        self.click = toggle_buttons([("open it", "open"), ("switch it off", "ablate")], "open", [
            "a click opens the head as the heatmap (shift-click switches it off)",
            "a click switches the head off, or on again; the text runs again without it"])
        self.mode = toggle_buttons(ABLATION_MODES, mode, [
            "the head's output is replaced by zeros",
            "the head's output is replaced by its mean over the positions of this input"])
        self.show = toggle_buttons([("change", "change"), ("attention after", "after")], "change", [
            "after − before: where each head's attention moved", "each head's attention with the heads off"])
        self.reset = lean(widgets.Button, description="reset: all heads on", icon="undo", layout={"width": "auto"},
                          tooltip="switch every head on again")
        self.summary = lean(widgets.HTML, summary_html(None, True))
        controls = toolbar(labelled("click a head to", self.click), labelled("switched off =", self.mode),
                           labelled("with heads off, thumbnails show", self.show), self.reset)
        super().__init__([controls, self.summary], layout=look())
        self.click.observe(lambda change: setattr(self.view, "click_mode", change["new"]), names="value")
        self.view.observe(lambda _: self.recompute(), names="ablated")
        self.mode.observe(lambda _: self.recompute() if self.view.ablated else None, names="value")
        self.show.observe(lambda _: self._on_change() if self.ablation is not None else None, names="value")
        self.reset.on_click(lambda _: self.reset_heads())

    @property
    def heads(self) -> Heads:
        """The heads switched off, as sorted (layer, head) pairs."""
        return tuple(sorted({(int(layer), int(head)) for layer, head in self.view.ablated}))

    def reset_heads(self) -> None:
        """Every head on again (the thumbnails show the unablated run)."""
        self.view.ablated = []

    def recompute(self) -> None:
        """Run the input again with the heads off (or forget the last run when none is), then redraw the view."""
        heads, source = self.heads, self._source()
        self.ablation = None
        if source is None and heads:
            self.view.ablated = []  # nothing to run the input again with: every head stays on (this runs again)
            return
        summary = summary_html(None, source is not None)
        if source is not None and heads:
            try:
                after, output = run_ablated(source.model, source.inputs, heads, self.mode.value)
                self.ablation = Ablation(heads, self.mode.value, source.trace, after, source.output(), output,
                                         source.model, source.tokenizer, source.row)
                summary = summary_html(self.ablation, True)
            except ValueError as error:
                summary = f"<span class='bvl-ablation-summary bvl-ablation-failed'>{escape(error)}</span>"
        self.summary.value = summary
        self._on_change()
