"""Scale-out: `torchrun --nproc_per_node 2` (gloo, CPU) follows one process with the same global batch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
import yaml

from bertviz_lab.train import BertRunner
from bertviz_lab.train import checkpoint as ckpt


def _config(wordpiece_tokenizer_dir: str) -> dict:
    return {
        "data": {"corpus": "builtin", "tokenizer": wordpiece_tokenizer_dir, "sequence_length": 32, "batch_size": 8,
                 "test_fraction": 0.2, "random_seed": 1},
        "model": {"dim_model": 32, "num_heads": 2, "dim_ff": 64, "num_layers": 1,
                  "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0},
        "training": {"steps": 6, "learning_rate": 3.0e-3, "warmup_steps": 2, "device": "cpu", "eval_interval": 3},
        "logging": {"progress": False, "log_interval": 0},
    }


@pytest.mark.slow
def test_two_gloo_processes_match_one_process_with_the_same_global_batch(tmp_path, wordpiece_tokenizer_dir, child_env):
    config = _config(wordpiece_tokenizer_dir)
    config_file = tmp_path / "ddp.yaml"
    config_file.write_text(yaml.safe_dump(config))
    metrics, output, checkpoints = tmp_path / "metrics.jsonl", tmp_path / "results.json", tmp_path / "ckpt"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "bertviz_lab", "train", "--config", str(config_file), "--output", str(output),
               "--set", f"logging.metrics_file={metrics}", "--set", f"training.checkpoint_dir={checkpoints}"]
    done = subprocess.run(command, cwd=tmp_path, env=child_env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    runner = BertRunner(config)
    single = runner.run()
    distributed = json.loads(output.read_text())
    assert distributed["world_size"] == 2 and single["world_size"] == 1
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5, 6]  # rank 0 alone writes the metrics
    for ours, reference in zip(records, runner.trainer.history):
        for key in ("train_mlm_loss", "train_nsp_loss", "train_mlm_accuracy", "grad_norm", "eval_mlm_loss",
                    "eval_nsp_accuracy"):
            if key in reference:  # eval_* only on evaluation steps
                assert ours[key] == pytest.approx(reference[key], rel=1e-5, abs=1e-6), (ours["step"], key)
    for key in ("test_mlm_loss", "test_nsp_loss", "test_nsp_accuracy", "train_mlm_loss"):
        assert distributed[key] == pytest.approx(single[key], rel=1e-5), key
    assert [p.name for p in ckpt.list_checkpoints(checkpoints)] == ["step-00000006"]
    state = ckpt.load_trainer_state(checkpoints)
    assert len(state["rng"]) == 2 and state["world_size"] == 2  # each rank's dropout generator is kept
    weights_single = runner.trainer.model.state_dict()
    reloaded = type(runner.trainer.model).from_pretrained(checkpoints / "step-00000006")
    for name, tensor in reloaded.state_dict().items():
        assert torch.allclose(tensor, weights_single[name], rtol=1e-4, atol=1e-6), name
