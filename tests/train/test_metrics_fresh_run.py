"""A metrics file holds one run: a fresh run (a second Trainer on the same file, a restarted run) writes it anew
instead of adding its steps to the old run's lines; a resumed run keeps the checkpoint's steps and adds its own; a
pipe or device is only ever appended to."""

from __future__ import annotations

import json
from pathlib import Path

from bertviz_lab.train import TrainConfig, Trainer
from bertviz_lab.train.metrics import MetricsRecord, append_record


def _config(**overrides) -> TrainConfig:
    values = dict(max_steps=6, batch_size=8, learning_rate=2e-3, progress=False, seed=3)
    return TrainConfig(**{**values, **overrides})


def _steps(path: Path) -> list[int]:
    return [json.loads(line)["step"] for line in path.read_text().splitlines()]


def _record(step: int) -> MetricsRecord:
    return MetricsRecord(step=step, train_loss=1.0, train_mlm_loss=0.5, train_nsp_loss=0.5, train_mlm_accuracy=0.1,
                         train_nsp_accuracy=0.5, lr=1e-3, grad_norm=1.0, time=0.1 * step)


def test_a_fresh_run_writes_the_metrics_file_anew(tmp_path, pairs, wordpiece_tokenizer, make_model):
    train, _ = pairs
    metrics = tmp_path / "metrics.jsonl"
    first = Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(metrics_file=str(metrics)))
    first.fit(4)
    assert _steps(metrics) == [1, 2, 3, 4]
    second = Trainer(make_model(len(wordpiece_tokenizer), seed=1), train, None, _config(metrics_file=str(metrics)))
    records = second.fit(3)
    assert _steps(metrics) == [1, 2, 3]
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert lines == [record.to_dict() for record in records]  # the second run's own values, not the first's


def test_a_resumed_run_keeps_the_checkpoint_steps_and_adds_its_own(tmp_path, pairs, wordpiece_tokenizer, make_model):
    train, _ = pairs
    metrics, root = tmp_path / "metrics.jsonl", tmp_path / "ckpt"
    Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(metrics_file=str(metrics),
                                                             checkpoint_dir=str(root))).fit(3)
    resumed = Trainer(make_model(len(wordpiece_tokenizer)), train, None,
                      _config(metrics_file=str(metrics), checkpoint_dir=str(root)), resume_from=root)
    resumed.fit()
    assert _steps(metrics) == [1, 2, 3, 4, 5, 6]


def test_step_one_starts_a_file_but_only_appends_through_a_link(tmp_path):
    path = tmp_path / "m.jsonl"
    for step in (1, 2, 3, 1, 2):
        append_record(path, _record(step))
    assert _steps(path) == [1, 2]
    # /dev/stdout redirected to a log is a link to that log: a new run must not wipe what the log holds
    log, stdout = tmp_path / "run.log", tmp_path / "stdout"
    log.write_text("started\n")
    stdout.symlink_to(log)
    append_record(stdout, _record(1))
    assert log.read_text().splitlines()[0] == "started" and _steps_after_first(log) == [1]


def _steps_after_first(path: Path) -> list[int]:
    return [json.loads(line)["step"] for line in path.read_text().splitlines()[1:]]
