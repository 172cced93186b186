"""A seed makes a run: the tiny preset run three times from the command line (each process with its own hash seed,
which once changed the WordPiece vocabulary trained on the built-in corpus) writes the same metrics, loss for loss,
bit for bit; two runs through the Python API in one process give the same history."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bertviz_lab.train.runner import BertRunner

SHORT = ["training.steps=16", "training.eval_interval=8", "training.warmup_steps=4", "logging.progress=false"]
TIMED = {"time"}  # wall-clock seconds: the one field of a record that no seed fixes


def metrics(path: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in TIMED} for line in path.read_text().splitlines()]


def test_the_tiny_preset_gives_the_same_metrics_in_three_processes(tmp_path):
    runs = []
    for hash_seed in ("1", "2", "3"):
        out = tmp_path / f"metrics-{hash_seed}.jsonl"
        settings = [arg for key in SHORT + [f"logging.metrics_file={out}"] for arg in ("--set", key)]
        subprocess.run([sys.executable, "-m", "bertviz_lab", "train", "--config", "tiny", *settings],
                       capture_output=True, text=True, check=True, timeout=600, cwd=tmp_path,
                       env={**os.environ, "PYTHONHASHSEED": hash_seed})
        runs.append(metrics(out))
    assert len(runs[0]) == 16 and runs[0][-1]["eval_mlm_loss"] is not None
    assert runs[0] == runs[1] == runs[2]  # every float equal, not close
    losses = [record["train_mlm_loss"] for record in runs[0]]
    assert len(set(losses)) > 1  # the records are a run that learns, not one value copied


def test_two_runs_of_the_python_api_with_one_seed_give_one_history(tmp_path):
    def history(seed: int) -> list[dict]:
        runner = BertRunner("tiny", SHORT + [f"training.seed={seed}"])
        runner.run()
        return [{k: v for k, v in record.to_dict().items() if k not in TIMED} for record in runner.trainer.history]

    first, second, other = history(7), history(7), history(8)
    assert first == second
    assert [r["train_mlm_loss"] for r in first] != [r["train_mlm_loss"] for r in other]  # the seed matters
