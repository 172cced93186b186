"""The "predict with" row the panels that need a masked-LM head share (the masking preview, the Causal tab): the
model given, the Training tab's, or one named by a checkpoint folder or Hub name; a failed choice is one line beside
the row and changes nothing.

The row only shows and reports the choice; what choosing means (follow a training run, run again) is the panel's.
"""

from __future__ import annotations

from typing import Callable

import ipywidgets as widgets

from bertviz_lab.widgets.panels.controls import Hold, lean
from bertviz_lab.widgets.panels.panel import error_html

CURRENT, TRAINING, NAMED = "current", "training", "name"  # where the model comes from
LABELLED = {"description_width": "initial"}


class ModelRow(widgets.HBox):
    """A dropdown (this model · the Training tab's model · a checkpoint folder or Hub name…), the name box and its
    load button (shown while a name is chosen or used) and a message. `use(which)` is the panel's: it switches to
    "current", "training" or a name, raising ValueError, TypeError, RuntimeError or OSError where it cannot."""

    def __init__(self, use: Callable[[str], None], own_model: str, description: str = "predict with") -> None:
        self._use, self._own_model, self._training = use, own_model, False
        self.source = CURRENT  # the choice in use: CURRENT, TRAINING or the name the model was loaded by
        self._held = Hold()  # open while the row sets its own dropdown
        self.choice = lean(widgets.Dropdown, options=self._options(), value=CURRENT, description=description,
                           style=LABELLED, layout={"width": "auto"})
        self.name = widgets.Text(description="name", placeholder="runs/tiny/checkpoints, bert-base-uncased, ...",
                                 style=LABELLED, layout=widgets.Layout(width="340px"))
        self.load_button = widgets.Button(description="load", icon="download", layout=widgets.Layout(width="auto"))
        self.message = lean(widgets.HTML)
        self.choice.observe(lambda change: self._chosen(change["new"]), names="value")
        self.load_button.on_click(lambda _: self.choose(self.name.value))
        super().__init__([self.choice, self.name, self.load_button, self.message],
                         layout=widgets.Layout(flex_flow="row wrap", align_items="center"))
        self.add_class("bvl-toolbar")
        self.show(CURRENT)

    def _options(self) -> list[tuple[str, str]]:
        options = [(f"this model ({self._own_model})", CURRENT)]
        if self._training:
            options.append(("the Training tab's model", TRAINING))
        return options + [("a checkpoint folder or Hub name…", NAMED)]


    def offer(self, own_model: str | None = None, training: bool | None = None) -> None:
        """List the model given under a new name, and/or "the Training tab's model" (or no longer)."""
        if own_model is not None:
            self._own_model = own_model
        if training is not None:
            self._training = training
        with self._held():
            self.choice.options = self._options()
        self.show(self.source)

    def choose(self, which: str) -> bool:
        """Use `which` as a reader's choice would: its error in one line beside the row (False), which then shows
        the model still in use."""
        self.message.value = "preparing the Training tab's model…" if which == TRAINING else ""
        try:
            self._use(which)
        except (ValueError, TypeError, RuntimeError, OSError) as error:
            self.message.value = error_html(" ".join(str(error).split()))
            self.show(self.source, choosing_name=self.choice.value == NAMED)
            return False
        self.message.value = ""
        self.show(which.strip() if which not in (CURRENT, TRAINING) else which)
        return True

    def _chosen(self, choice: str) -> None:
        if self._held:
            return
        if choice == NAMED:
            self.show(self.source, choosing_name=True)
            return
        self.choose(choice)

    def show(self, source: str, choosing_name: bool = False) -> None:
        """Show `source` as the model in use; the name box and its button only while a name is chosen or used."""
        self.source = source
        named = choosing_name or source not in (CURRENT, TRAINING)
        with self._held():
            self.choice.value = NAMED if named else source
            if source not in (CURRENT, TRAINING):
                self.name.value = source
        self.name.layout.display = None if named else "none"
        self.load_button.layout.display = None if named else "none"
