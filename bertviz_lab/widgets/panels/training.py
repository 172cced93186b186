"""TrainingPanel: start a pretraining run in the background, watch its live loss curves, and then resume it or
restart it afresh.

Start is there until a run exists and is disabled while one trains (the curves' Stop button ends it). Once a run has
steps, the panel offers two named actions instead: Resume continues it from its latest state (the latest checkpoint
in its checkpoint_dir, loaded first where the run has one the panel has not loaded), Restart begins a fresh run from
step 0 with a new model: its curves start empty, its metrics file is written anew (train/metrics.py), and the old
run's checkpoint folder, where it has one, is moved aside (renamed, never deleted).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Mapping

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


class _RunEnd:
    """A Trainer callback that gives the panel its buttons back when a run ends (from the training thread)."""

    def __init__(self, panel: "TrainingPanel") -> None:
        self.panel = panel

    def __call__(self, record: Any) -> None:
        """Nothing per step: the curves draw them."""

    def on_train_end(self, trainer: Any) -> None:
        self.panel.show_actions(running=False)


class TrainingPanel(Panel):
    """Start, then Resume / Restart, around LossCurves; builds the demo run (or the given run config) on the first
    Start. A panel around a trainer the caller built offers Resume only (it cannot build a fresh one)."""

    def __init__(self, trainer: Any = None, run_config: str | Mapping[str, Any] | None = None,
                 steps: int | None = None) -> None:
        self.run_config = DEMO_RUN if run_config is None else run_config
        self.steps = steps
        self.trainer: Any = None  # duck-typed as the `trainer` argument: a Trainer, or None until the first Start
        self.builds_runs = trainer is None  # Restart needs a run config to build a fresh run from
        self.on_new_trainer: list[Callable[[Any, Any], None]] = []  # (old, new) after Restart built a fresh run
        self._run_end = _RunEnd(self)
        self.curves = LossCurves(title="pretraining (live)")
        self.curves.on_redraw.append(self.figure_changed)
        # each button is shown and hidden on its own: a Layout of its own each
        self.start_button = widgets.Button(description="Start", icon="play", button_style="success",
                                           tooltip="train a fresh run in the background")
        self.resume_button = widgets.Button(description="Resume", icon="forward", button_style="success",
                                            tooltip="continue the run from its latest checkpoint",
                                            layout=widgets.Layout(display="none"))
        self.restart_button = widgets.Button(description="Restart", icon="refresh", button_style="warning",
                                             tooltip="begin a fresh run from step 0 (the curves start empty)",
                                             layout=widgets.Layout(display="none"))
        self.start_button.on_click(lambda _: self.start())
        self.resume_button.on_click(lambda _: self.resume())
        self.restart_button.on_click(lambda _: self.restart())
        self.message = widgets.HTML("a tiny BERT on the built-in corpus; Start trains it in the background"
                                    if trainer is None else "")
        if trainer is not None:
            self._adopt(trainer)
        toolbar = widgets.HBox([self.start_button, self.resume_button, self.restart_button, self.message],
                               layout=widgets.Layout(align_items="center"))
        toolbar.add_class("bvl-toolbar")
        super().__init__([toolbar, self.curves])
        self.show_actions()

    # the run -------------------------------------------------------------------------------------------------
    def build_trainer(self, fresh: bool = False) -> Any:
        """The Trainer for `run_config` (tokenizer, data, model and settings as the YAML runner builds them);
        `fresh`: from step 0, whatever the run config's training.resume_from says."""
        from bertviz_lab.train.runner import BertRunner

        runner = BertRunner(self.run_config)
        if fresh:
            runner.config["training"]["resume_from"] = None
        return runner.build_trainer()

    def _adopt(self, trainer: Any) -> None:
        """Show `trainer`'s run: its curves, and its end giving the buttons back."""
        self.trainer = trainer
        self.curves.attach(trainer)
        if self._run_end not in trainer.callbacks:
            trainer.callbacks.append(self._run_end)

    def ensure_trainer(self) -> Any:
        """The run's Trainer, built now if Start has not built it yet (the Masking tab may borrow its model)."""
        if self.trainer is None:
            self.message.value = "preparing the data and the tokenizer…"
            self._adopt(self.build_trainer())
            self.message.value = "ready: Start trains it in the background"
            self.show_actions()
        return self.trainer

    @property
    def has_run(self) -> bool:
        """True once the run has steps (trained here, or loaded from a checkpoint): Resume and Restart apply."""
        return self.trainer is not None and self.trainer.step > 0

    @property
    def is_running(self) -> bool:
        """True while the run trains in the background."""
        return self.trainer is not None and self.trainer.is_running

    def show_actions(self, running: bool | None = None) -> None:
        """Start until a run exists, then Resume and Restart; all disabled while the run trains."""
        running = self.is_running if running is None else running
        exists = self.has_run
        finished = exists and self.trainer.step >= self.trainer.config.max_steps
        self.start_button.layout.display = "none" if exists else None
        self.resume_button.layout.display = None if exists else "none"
        self.restart_button.layout.display = None if exists and self.builds_runs else "none"
        self.start_button.disabled = running
        self.resume_button.disabled = running or finished
        self.restart_button.disabled = running
        self.resume_button.tooltip = ("this run has reached its last step" if finished else
                                      "continue the run from its latest checkpoint")

    def _train(self) -> None:
        """Train the run's remaining steps (at most `steps`) in the background."""
        remaining = self.trainer.config.max_steps - self.trainer.step
        if remaining <= 0:
            self.message.value = "this run has reached its last step; Restart begins a fresh one"
            return
        self.trainer.start(min(self.steps or remaining, remaining))
        self.show_actions(running=True)
        self.message.value = ""  # the curves' status line says how far the run is and how it ended

    def start(self) -> None:
        """Train a fresh run in the background; the curves' Stop button ends it after the current step. Once a run
        exists, Start is replaced by Resume and Restart, and start() says so instead of choosing between them."""
        try:
            self.ensure_trainer()
            if self.is_running:
                return
            if self.has_run:
                self.message.value = "a run exists: Resume continues it, Restart begins a fresh one"
                self.show_actions()
                return
            self._train()
        except (ValueError, TypeError, RuntimeError) as error:
            self.message.value = error_html(error)

    def resume(self) -> None:
        """Continue the run from its latest checkpoint (its state here when it has none newer) in the background."""
        try:
            trainer = self.ensure_trainer()
            if self.is_running:
                return
            checkpoint = self._newer_checkpoint()
            if checkpoint is not None:
                trainer.load_checkpoint(checkpoint)
                self.curves.reset()
                self.curves.attach(trainer)  # the checkpoint's steps, drawn again
            self._train()
        except (ValueError, TypeError, RuntimeError, OSError) as error:
            self.message.value = error_html(error)

    def _newer_checkpoint(self) -> Path | None:
        """The latest checkpoint in the run's checkpoint_dir when it is ahead of the run's state here."""
        from bertviz_lab.train import checkpoint as ckpt

        folder = self.trainer.config.checkpoint_dir
        latest = ckpt.latest_checkpoint(folder) if folder else None
        if latest is None or latest == self.trainer.last_checkpoint:
            return None
        step = int(ckpt.load_trainer_state(latest)["step"])
        return latest if step > self.trainer.step else None

    def restart(self) -> None:
        """Begin a fresh run from step 0 with a new model, in the background: empty curves, a metrics file written
        anew, the old run's checkpoint folder moved aside."""
        if not self.builds_runs:
            self.message.value = error_html("this panel shows a Trainer it did not build; make a new Trainer to "
                                            "begin a fresh run")
            return
        if self.is_running:
            return
        old = self.trainer
        try:
            moved = set_aside_checkpoints(old.config.checkpoint_dir) if old is not None else None
            self.message.value = "preparing a fresh run…"
            fresh = self.build_trainer(fresh=True)
        except (ValueError, TypeError, RuntimeError, OSError) as error:
            self.message.value = error_html(error)
            return
        if old is not None:
            for callback in (self.curves, self._run_end):
                if callback in old.callbacks:
                    old.callbacks.remove(callback)
        self.curves.reset()
        self._adopt(fresh)
        for on_new in self.on_new_trainer:
            on_new(old, fresh)
        self._train()
        if moved is not None:
            self.message.value = f"the previous run's checkpoints are in {moved}"

    def to_svg(self) -> str:
        """The live curves' figure."""
        return self.curves.to_svg()

    def static_html(self) -> str:
        return self.curves.static_html()

    def caption_parts(self) -> tuple[str, str | None, str | None]:
        """The run's model for an export's caption (a training run shows no text)."""
        from bertviz_lab.widgets.panels.model_label import model_summary

        model = getattr(self.trainer, "model", None)
        return (f"pretraining {model_summary(model)}" if model is not None else "pretraining", None, None)


def set_aside_checkpoints(folder: str | None) -> Path | None:
    """Rename a checkpoint folder that holds checkpoints to `<folder>.before-restart-<time>` (so a fresh run's
    checkpoints never mix with the old run's); returns where they went, None when there was nothing to move."""
    from bertviz_lab.train import checkpoint as ckpt

    if not folder or ckpt.holds_no_checkpoint(folder):
        return None
    root = Path(folder)
    aside = root.with_name(f"{root.name}.before-restart-{time.strftime('%Y%m%d-%H%M%S')}")
    root.rename(aside)
    return aside
