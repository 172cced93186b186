"""The Training tab says what it does: Start is disabled while a run trains, and once a run exists it offers Resume
(continue from the latest checkpoint) and Restart (a fresh run from step 0: empty curves, a metrics file written
anew, the old checkpoints moved aside) as two named actions."""

from __future__ import annotations

import copy
import json
import threading
from pathlib import Path

import pytest
from widgets_testlib import wait_until

from bertviz_lab.train import checkpoint as ckpt
from bertviz_lab.widgets import TrainingPanel

RUN = {"data": {"corpus": "synthetic", "vocab_size": 100, "sequence_length": 16, "batch_size": 8,
                "num_train_batches": 4, "num_test_batches": 1},
       "model": {"preset": "tiny", "dim_model": 32, "num_heads": 2, "dim_ff": 64, "num_layers": 1},
       "training": {"steps": 6, "eval_interval": 3, "device": "cpu"},
       "logging": {"progress": False, "log_interval": 0}}


def run_config(tmp_path: Path, **training) -> dict:
    config = copy.deepcopy(RUN)
    config["training"].update(training)
    config["logging"]["metrics_file"] = str(tmp_path / "metrics.jsonl")
    return config


def metric_steps(tmp_path: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]


def shown(button) -> bool:
    return button.layout.display != "none"


class Gate:
    """A Trainer callback that holds the training thread at its first step until released."""

    def __init__(self) -> None:
        self.reached, self.release = threading.Event(), threading.Event()

    def __call__(self, record) -> None:
        self.reached.set()
        assert self.release.wait(60)


def test_start_is_disabled_while_training_then_resume_and_restart_are_offered(tmp_path):
    panel = TrainingPanel(run_config=run_config(tmp_path), steps=3)
    assert shown(panel.start_button) and not panel.start_button.disabled
    assert not shown(panel.resume_button) and not shown(panel.restart_button)
    gate = Gate()
    panel.ensure_trainer().callbacks.append(gate)
    panel.start_button.click()
    assert gate.reached.wait(60)
    assert panel.is_running and panel.start_button.disabled  # no second click can start or resume anything
    panel.start()
    assert panel.trainer.is_running and panel.trainer.step == 1
    gate.release.set()
    assert panel.trainer.join(timeout=60) and panel.trainer.step == 3
    assert not shown(panel.start_button)
    assert shown(panel.resume_button) and not panel.resume_button.disabled
    assert shown(panel.restart_button) and not panel.restart_button.disabled
    panel.start()  # Start no longer picks for the user
    assert panel.trainer.step == 3 and not panel.is_running and "Resume" in panel.message.value


def test_resume_continues_the_run_and_its_metrics(tmp_path):
    panel = TrainingPanel(run_config=run_config(tmp_path), steps=3)
    panel.start()
    assert panel.trainer.join(timeout=60)
    first = panel.trainer
    panel.resume_button.click()
    assert panel.trainer is first and panel.resume_button.disabled and panel.restart_button.disabled
    assert first.join(timeout=60) and first.step == 6 and panel.curves.records == 6
    assert metric_steps(tmp_path) == [1, 2, 3, 4, 5, 6]
    assert wait_until(lambda: not panel.is_running) and panel.resume_button.disabled  # the last step: nothing left
    assert not panel.restart_button.disabled


def test_restart_begins_a_fresh_run_that_does_not_append_to_the_old_metrics(tmp_path):
    panel = TrainingPanel(run_config=run_config(tmp_path), steps=4)
    panel.start()
    assert panel.trainer.join(timeout=60) and metric_steps(tmp_path) == [1, 2, 3, 4]
    old = panel.trainer
    handed: list[tuple] = []
    panel.on_new_trainer.append(lambda before, after: handed.append((before, after)))
    panel.restart_button.click()
    fresh = panel.trainer
    assert fresh is not old and handed == [(old, fresh)]
    assert panel.curves not in old.callbacks and panel.curves.trainer is fresh
    assert fresh.join(timeout=60) and fresh.step == 4
    assert metric_steps(tmp_path) == [1, 2, 3, 4]  # the fresh run's steps only, each once
    assert panel.curves.records == 4 and [x for x, _ in panel.curves.history["lr"]] == [1, 2, 3, 4]
    assert any(a.data_ptr() != b.data_ptr() for a, b in zip(old.model.parameters(), fresh.model.parameters()))


def test_restart_moves_the_old_checkpoints_aside_and_resume_loads_the_latest(tmp_path):
    folder = tmp_path / "ckpt"
    config = run_config(tmp_path, checkpoint_dir=str(folder), resume_from=str(folder))
    panel = TrainingPanel(run_config=config, steps=2)
    panel.start()
    assert panel.trainer.join(timeout=60) and ckpt.latest_checkpoint(folder).name == ckpt.checkpoint_name(2)
    # another session opens the same run: it loads the checkpoint, so Resume and Restart are offered at once
    again = TrainingPanel(run_config=config, steps=2)
    again.ensure_trainer()
    assert again.trainer.step == 2 and shown(again.resume_button) and not shown(again.start_button)
    again.resume()
    assert again.trainer.join(timeout=60) and again.trainer.step == 4
    # the first panel's run is behind the checkpoint the second wrote: Resume loads that one first
    panel.resume()
    assert panel.trainer.join(timeout=60) and panel.trainer.step == 6
    assert [x for x, _ in panel.curves.history["lr"]] == [1, 2, 3, 4, 5, 6]
    panel.restart()
    assert panel.trainer.join(timeout=60) and panel.trainer.step == 2
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("ckpt.before-restart-")]
    assert len(aside) == 1 and ckpt.latest_checkpoint(aside[0]).name == ckpt.checkpoint_name(6)
    assert [p.name for p in ckpt.list_checkpoints(folder)] == [ckpt.checkpoint_name(2)]
    assert str(aside[0]) in panel.message.value and metric_steps(tmp_path) == [1, 2]


def test_a_panel_around_a_given_trainer_offers_resume_only(tmp_path):
    from bertviz_lab.train.runner import BertRunner

    trainer = BertRunner(run_config(tmp_path)).build_trainer()
    panel = TrainingPanel(trainer, steps=2)
    panel.start()
    assert trainer.join(timeout=60) and trainer.step == 2
    assert shown(panel.resume_button) and not shown(panel.restart_button)
    panel.restart()
    assert panel.trainer is trainer and "did not build" in panel.message.value


@pytest.mark.parametrize("steps", [1, 3])
def test_the_curves_reset_to_an_empty_figure(tmp_path, steps):
    panel = TrainingPanel(run_config=run_config(tmp_path), steps=steps)
    panel.start()
    assert panel.trainer.join(timeout=60)
    panel.curves.reset()
    assert panel.curves.records == 0 and panel.curves.trainer is None
    assert all(not points for points in panel.curves.history.values())
    assert panel.curves.drawn("lr")[0].size == 0 and panel.curves.status.value == "waiting for the first step"
