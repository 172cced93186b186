"""TrainingPanel: start and stop a pretraining run in the background and watch its live loss curves."""

from __future__ import annotations

from typing import Any, Mapping

import ipywidgets as widgets

from bertviz_lab.widgets.panels.loss_curves import LossCurves
from bertviz_lab.widgets.panels.panel import Panel, error_html

# A tiny BERT on the built-in corpus: a few hundred steps in about a minute on a laptop CPU.
DEMO_RUN: dict[str, Any] = {
    "data": {"corpus": "builtin", "vocab_size": 2000, "sequence_length": 64, "batch_size": 32, "test_fraction": 0.2},
    "model": {"preset": "tiny", "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0},
    "training": {"steps": 300, "learning_rate": 1e-3, "warmup_steps": 30, "nsp_loss_weight": 3.0,
                 "eval_interval": 25, "device": "auto"},
    "logging": {"progress": False, "log_interval": 0},
}


class TrainingPanel(Panel):
    """Start / Stop around LossCurves; builds the demo run (or the given run config) on the first Start."""

    def __init__(self, trainer: Any = None, run_config: str | Mapping[str, Any] | None = None,
                 steps: int | None = None) -> None:
        self.run_config = DEMO_RUN if run_config is None else run_config
        self.steps = steps
        self.trainer = trainer
        self.curves = LossCurves(title="pretraining (live)")
        self.curves.on_redraw.append(self.figure_changed)
        self.start_button = widgets.Button(description="Start", icon="play", button_style="success")
        self.start_button.on_click(lambda _: self.start())
        self.message = widgets.HTML("a tiny BERT on the built-in corpus; Start trains it in the background"
                                    if trainer is None else "")
        if trainer is not None:
            self.curves.attach(trainer)
        toolbar = widgets.HBox([self.start_button, self.message], layout=widgets.Layout(align_items="center"))
        toolbar.add_class("bvl-toolbar")
        super().__init__([toolbar, self.curves])

    def build_trainer(self) -> Any:
        """The Trainer for `run_config` (tokenizer, data, model and settings as the YAML runner builds them)."""
        from bertviz_lab.train.runner import BertRunner

        return BertRunner(self.run_config).build_trainer()

    def ensure_trainer(self) -> Any:
        """The run's Trainer, built now if Start has not built it yet (the Masking tab may borrow its model)."""
        if self.trainer is None:
            self.message.value = "preparing the data and the tokenizer…"
            self.trainer = self.build_trainer()
            self.curves.attach(self.trainer)
            self.message.value = "ready: Start trains it in the background"
        return self.trainer

    def start(self) -> None:
        """Train in the background; the curves' Stop button ends the run after the current step."""
        try:
            self.ensure_trainer()
            if self.trainer.is_running:
                return
            remaining = self.trainer.config.max_steps - self.trainer.step
            if remaining <= 0:
                self.message.value = "this run has reached its last step"
                return
            self.trainer.start(min(self.steps or remaining, remaining))
            self.message.value = ""  # the curves' status line says how far the run is and how it ended
        except (ValueError, TypeError, RuntimeError) as error:
            self.message.value = error_html(error)

    def to_svg(self) -> str:
        """The live curves' figure."""
        return self.curves.to_svg()

    def static_html(self) -> str:
        return self.curves.static_html()
