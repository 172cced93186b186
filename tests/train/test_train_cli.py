"""The runner and the `bertviz-lab train` CLI: the tiny demo learns, results JSON, resume, config errors exit 2."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from bertviz_lab.cli import main
from bertviz_lab.train import BertRunner, ConfigError
from bertviz_lab.train import checkpoint as ckpt
from bertviz_lab.train import runner as runner_module
from bertviz_lab.train.runner import RESULT_KEYS
from bertviz_lab.util.paths import file_problem, folder_problem

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "tiny.yaml"
DOCUMENTED_KEYS = set(RESULT_KEYS) | {"initial_train_mlm_loss", "initial_train_nsp_loss", "steps", "seconds",
                                      "steps_per_second", "sequences_per_second", "num_parameters", "vocab_size",
                                      "train_pairs", "test_pairs", "device", "precision", "world_size", "checkpoint",
                                      "stop_reason"}


@pytest.mark.slow
def test_tiny_config_learns_on_the_builtin_corpus_in_under_two_minutes(tmp_path, child_env):
    """Acceptance: a few hundred CPU steps, MLM loss well below its start, held-out NSP accuracy above chance."""
    output = tmp_path / "out.json"
    command = [sys.executable, "-m", "bertviz_lab", "train", "--config", str(TINY), "--output", str(output),
               "--set", "training.num_threads=1", "--set", "logging.progress=false"]
    done = subprocess.run(command, cwd=tmp_path, env=child_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(output.read_text())
    assert set(results) == DOCUMENTED_KEYS
    assert "Final Results:" in done.stdout and "test_nsp_accuracy" in done.stdout
    assert results["steps"] >= 200 and results["seconds"] < 120
    assert results["train_mlm_loss"] < results["initial_train_mlm_loss"] - 1.5  # ~7.6 (ln 2000) -> ~5.2
    assert results["test_mlm_loss"] < results["initial_train_mlm_loss"] - 1.5
    # ~700 held-out pairs: chance is 0.5 +- 0.019. The tiny model's accuracy is the same run after run on one
    # machine (train_from_texts is deterministic), but other CPUs sum in other orders and Python versions ship other
    # topic pages: the bounds stay loose; its NSP loss stays below chance's ln 2.
    assert results["test_pairs"] >= 400 and results["test_nsp_accuracy"] > 0.5
    assert results["test_nsp_loss"] < 0.69
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def _tiny_synthetic(tmp_path: Path, **training) -> dict:
    return {
        "data": {"corpus": "synthetic", "vocab_size": 200, "sequence_length": 16, "batch_size": 8,
                 "num_train_batches": 6, "num_test_batches": 2, "random_seed": 3},
        "model": {"dim_model": 32, "num_heads": 2, "dim_ff": 64, "num_layers": 1},
        "training": {"learning_rate": 3.0e-3, "device": "cpu", **training},
        "logging": {"progress": False, "metrics_file": str(tmp_path / "metrics.jsonl")},
    }


def test_runner_on_synthetic_data_returns_the_documented_keys_and_resumes(tmp_path):
    checkpoints = tmp_path / "ckpt"
    first = BertRunner(_tiny_synthetic(tmp_path, epochs=1, checkpoint_dir=str(checkpoints))).run()
    assert set(first) == DOCUMENTED_KEYS and first["steps"] == 6 and first["stop_reason"] == "finished"
    assert first["checkpoint"] == str(checkpoints / "step-00000006")
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 6
    continued = BertRunner(_tiny_synthetic(tmp_path, steps=9, resume_from=str(checkpoints))).run()
    assert continued["steps"] == 9 and continued["initial_train_mlm_loss"] == first["initial_train_mlm_loss"]


def test_build_trainer_gives_a_ready_trainer_for_live_panels(tmp_path):
    runner = BertRunner(_tiny_synthetic(tmp_path, steps=4))
    trainer = runner.build_trainer()
    assert trainer.step == 0 and trainer.config.max_steps == 4 and not trainer.is_running
    seen = []
    trainer.callbacks.append(seen.append)
    trainer.start(2)
    trainer.join(timeout=60)
    assert [r.step for r in seen] == [1, 2]


def test_cli_prints_and_writes_json(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(_tiny_synthetic(tmp_path, steps=2)))
    output = tmp_path / "nested" / "results.json"
    assert main(["train", "--config", str(config), "--output", str(output)]) == 0
    printed = capsys.readouterr().out
    results = json.loads(output.read_text())
    assert set(results) == DOCUMENTED_KEYS and results["steps"] == 2
    assert f"test_nsp_accuracy: {results['test_nsp_accuracy']:.6f}" in printed


def test_cli_log_lines_do_not_land_on_the_progress_bar(tmp_path, capsys):
    config = _tiny_synthetic(tmp_path, steps=3)
    config["logging"].update(progress=True, log_interval=1)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    log = logging.getLogger("bertviz_lab.train")
    handlers = list(log.handlers)
    assert main(["train", "--config", str(tmp_path / "c.yaml")]) == 0
    err = capsys.readouterr().err
    logged = [line for line in err.split("\n") if "bertviz_lab.train: step" in line]
    assert "pretraining" in err and len(logged) == 3
    assert all(line.split("\r")[-1].startswith("INFO bertviz_lab.train: step") for line in logged), logged
    assert log.handlers == handlers


@pytest.mark.parametrize("text, named", [
    ("training:\n  learnig_rate: 0.1\n", "training.learnig_rate"),
    ("data:\n  batch_size: lots\n", "data.batch_size"),
    ("model:\n  preset: huge\n", "model.preset"),
    ("data:\n  corpus: /no/such/corpus\n", "data.corpus"),
    ("training: [unclosed\n", "not valid YAML"),
])
def test_bad_yaml_exits_2_naming_the_key(tmp_path, capsys, text, named):
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    assert main(["train", "--config", str(config)]) == 2
    error = capsys.readouterr().err
    assert named in error and "error:" in error


def test_alias_bombs_exit_2_at_once_with_one_short_line(tmp_path, capsys, billion_laughs):
    config = tmp_path / "laughs.yaml"
    config.write_text(billion_laughs(9))
    started = time.perf_counter()
    assert main(["train", "--config", str(config)]) == 2
    assert main(["train", "--config", str(TINY), "--set", f"data.corpus={billion_laughs(6, flow=True)}"]) == 2
    assert time.perf_counter() - started < 5
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and all(len(line) < 300 for line in lines), lines
    assert "laughs.yaml, line 4: the alias *a repeats a list or mapping" in lines[0]
    assert "override data.corpus, line 1: the alias *a" in lines[1]


def test_usage_errors_exit_2_and_help_exits_0(tmp_path, capsys):
    assert main(["train"]) == 2  # --config missing: argparse
    assert main(["fly"]) == 2
    assert main(["train", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["train", "--config", str(TINY), "--set", "oops"]) == 2
    assert main(["train", "--help"]) == 0
    assert "--config" in capsys.readouterr().out


def test_the_process_exit_code_is_2_for_a_bad_key(tmp_path, child_env):
    config = tmp_path / "bad.yaml"
    config.write_text("logging:\n  levle: INFO\n")
    done = subprocess.run([sys.executable, "-m", "bertviz_lab", "train", "--config", str(config)], cwd=tmp_path,
                          env=child_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "logging.levle" in done.stderr and "Did you mean 'level'" in done.stderr


def test_runner_errors_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="data.batch_size .* divisible"):
        BertRunner(_tiny_synthetic(tmp_path, steps=1, gradient_accumulation_steps=3)).run()
    with pytest.raises(ConfigError, match="training.resume_from"):
        BertRunner(_tiny_synthetic(tmp_path, steps=1, resume_from=str(tmp_path / "nothing"))).run()
    with pytest.raises(ConfigError, match="training.device"):
        BertRunner(_tiny_synthetic(tmp_path, steps=1, device="tpu")).run()


@pytest.mark.parametrize("damage", [b"\xff\xfe not UTF-8\n", b""])
def test_a_damaged_saved_tokenizer_is_one_line_naming_its_key_and_exit_2(tmp_path, capsys, damage):
    saved = tmp_path / "tokenizer"
    saved.mkdir()
    (saved / "vocab.txt").write_bytes(damage)
    config = _tiny_synthetic(tmp_path, steps=1)
    config["data"].update(corpus=str(tmp_path / "corpus.txt"), tokenizer="train", tokenizer_dir=str(saved))
    (tmp_path / "corpus.txt").write_text("\n\n\n".join(f"Document {i} starts. It goes on." for i in range(30)))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    assert main(["train", "--config", str(tmp_path / "c.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bertviz-lab train: error: data.tokenizer_dir: ") and err.count("\n") == 1, err
    assert "vocab.txt" in err and not (tmp_path / "metrics.jsonl").exists()


@pytest.mark.parametrize("steps", [None, 2])
def test_a_batch_larger_than_the_corpus_is_one_line_naming_data_batch_size(tmp_path, capsys, steps):
    config = _tiny_synthetic(tmp_path, steps=steps)
    config["data"].update(corpus=str(tmp_path / "corpus.txt"), tokenizer="train", batch_size=4000)
    (tmp_path / "corpus.txt").write_text("\n\n\n".join(f"Document {i} starts. It goes on." for i in range(30)))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    assert main(["train", "--config", str(tmp_path / "c.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bertviz-lab train: error: data.batch_size=4000 asks for more pairs per micro-batch (4000) "
                          "than the corpus makes in an epoch (") and err.count("\n") == 1, err
    assert not (tmp_path / "metrics.jsonl").exists()


# output paths are checked before the first step -------------------------------------------------------------
NOT_A_FOLDER = "cannot be created: {file} is not a directory"
FULL = "cannot be written: No space left on device"


@pytest.mark.parametrize("key, value, problem", [
    ("training.checkpoint_dir", "{file}/ckpt", NOT_A_FOLDER),
    ("training.checkpoint_dir", "{file}", "is not a directory"),
    ("--output", "{file}/results.json", NOT_A_FOLDER),
    ("--output", "/dev/full", FULL),
    ("--output", "{tmp}", "is a directory"),
    ("logging.metrics_file", "{file}/deeper/metrics.jsonl", NOT_A_FOLDER),
    ("logging.metrics_file", "/dev/full", FULL),
    ("logging.file", "{file}/train.log", NOT_A_FOLDER),
    ("logging.file", "/dev/full", FULL),
    ("data.tokenizer_dir", "{file}/tokenizer", NOT_A_FOLDER),
    ("data.tokenizer_dir", "/dev/full", "is not a directory"),
])
def test_unwritable_output_paths_exit_2_before_the_first_step(tmp_path, capsys, key, value, problem):
    file = tmp_path / "file"
    file.write_text("keep me\n")
    value = value.format(file=file, tmp=tmp_path)
    config = _tiny_synthetic(tmp_path, steps=2)
    if key == "data.tokenizer_dir":  # only a trained tokenizer is saved
        config["data"].update(corpus=str(tmp_path / "corpus.txt"), tokenizer="train")
        (tmp_path / "corpus.txt").write_text("One sentence here. Another one there.\n")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    before = sorted(tmp_path.rglob("*"))
    args = ["--output", value] if key == "--output" else ["--set", f"{key}={value}"]
    assert main(["train", "--config", str(tmp_path / "c.yaml"), *args]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"bertviz-lab train: error: {key}={value} {problem.format(file=file)}\n"
    assert "Final Results" not in captured.out
    assert sorted(tmp_path.rglob("*")) == before  # no step ran, no metrics line, no probe left behind
    assert file.read_text() == "keep me\n"


def test_output_folders_are_not_created_by_the_check(tmp_path, capsys):
    config = _tiny_synthetic(tmp_path, steps=2, checkpoint_dir=str(tmp_path / "new" / "ckpt"))
    config["logging"]["metrics_file"] = str(tmp_path / "logs" / "metrics.jsonl")
    config["training"]["device"] = "tpu"  # fails after the paths are checked
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    assert main(["train", "--config", str(tmp_path / "c.yaml"), "--output", str(tmp_path / "out" / "r.json")]) == 2
    assert "training.device" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


def test_an_os_error_while_training_is_one_line_and_exit_1(tmp_path, capsys, monkeypatch):
    config = _tiny_synthetic(tmp_path, steps=2, checkpoint_dir=str(tmp_path / "ckpt"))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ckpt.torch, "save", full_disk)
    assert main(["train", "--config", str(tmp_path / "c.yaml")]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"bertviz-lab train: error: the checkpoint of step 2 could not be written in {tmp_path / 'ckpt'} (no space "
        "left on device); nothing was saved for step 2, and there is no earlier checkpoint in it.")


def test_path_checks_accept_what_can_be_written_and_change_nothing(tmp_path):
    existing = tmp_path / "results.json"
    existing.write_text("old\n")
    stamp = existing.stat().st_mtime_ns
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert file_problem(existing) is None and file_problem(tmp_path / "a" / "b.json") is None
    assert file_problem("/dev/null") is None and file_problem(fifo) is None  # a pipe nobody reads yet: no waiting
    assert folder_problem(tmp_path) is None and folder_problem(tmp_path / "x" / "y") is None
    assert existing.read_text() == "old\n" and existing.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe", "results.json"]


def test_a_results_file_that_fails_after_training_is_one_line_and_exit_1(tmp_path, capsys, monkeypatch):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(_tiny_synthetic(tmp_path, steps=1)))
    monkeypatch.setattr(runner_module, "file_problem", lambda path: None)  # as if /dev/full filled up during training
    assert main(["train", "--config", str(tmp_path / "c.yaml"), "--output", "/dev/full"]) == 1
    captured = capsys.readouterr()
    assert "Final Results:" in captured.out
    assert captured.err.splitlines()[-1] == ("bertviz-lab train: error: --output=/dev/full could not be written after "
                                            "training (No space left on device); the results are printed above.")


# resume from a damaged checkpoint ---------------------------------------------------------------------------
def _checkpointed_run(tmp_path: Path) -> tuple[Path, Path]:
    """A 2-step CLI-shaped run with checkpoints, and the config file that resumes it to step 4."""
    checkpoints = tmp_path / "ckpt"
    BertRunner(_tiny_synthetic(tmp_path, steps=2, checkpoint_dir=str(checkpoints))).run()
    config = tmp_path / "resume.yaml"
    config.write_text(yaml.safe_dump(_tiny_synthetic(tmp_path, steps=4, checkpoint_dir=str(checkpoints),
                                                     resume_from=str(checkpoints))))
    return checkpoints / "step-00000002", config


@pytest.mark.parametrize("name, spoil, manifest", [
    ("model.safetensors", lambda f: f.write_bytes(b"\xff" * 8 + f.read_bytes()[8:]), True),
    ("model.safetensors", lambda f: f.write_bytes(f.read_bytes()[:100]), True),
    ("model.safetensors", lambda f: f.unlink(), True),
    ("trainer_state.pt", lambda f: f.write_bytes(f.read_bytes()[:100]), True),
    ("model.safetensors", lambda f: f.write_bytes(b"\xff" * 8 + f.read_bytes()[8:]), False),
    ("trainer_state.pt", lambda f: f.write_bytes(b""), False),
], ids=["bad-header", "truncated", "missing", "state-truncated", "bad-header-no-manifest", "empty-state-no-manifest"])
def test_resume_from_a_damaged_checkpoint_exits_2_with_one_line_naming_the_file(tmp_path, capsys, name, spoil,
                                                                               manifest):
    folder, config = _checkpointed_run(tmp_path)
    if not manifest:
        (folder / "manifest.json").unlink()
    spoil(folder / name)
    capsys.readouterr()
    assert main(["train", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("WARNING")]
    assert len(lines) == 1 and lines[0].startswith(f"bertviz-lab train: error: training.resume_from: {folder / name} ")
    assert len(lines[0]) < 600
    assert ("WARNING" in err) == (not manifest)  # an unverified checkpoint is said to be one


def test_resume_from_a_checkpoint_without_a_manifest_works_with_a_warning(tmp_path, capsys):
    folder, config = _checkpointed_run(tmp_path)
    (folder / "manifest.json").unlink()
    capsys.readouterr()
    assert main(["train", "--config", str(config)]) == 0
    assert f"WARNING bertviz_lab.train: checkpoint {folder} has no manifest.json" in capsys.readouterr().err
    assert json.loads((folder.parent / "step-00000004" / "manifest.json").read_text())["files"]


def test_a_checkpoint_dir_another_process_writes_is_one_line_and_exit_2(tmp_path, capsys, child_env):
    """Another process holds training.checkpoint_dir (a run of its own): the CLI stops before its first step with
    one line naming that process, and nothing of it is touched."""
    config = _tiny_synthetic(tmp_path, steps=2, checkpoint_dir=str(tmp_path / "ckpt"))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "ckpt").mkdir()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys\nfrom bertviz_lab.util.files import one_writer\n"
        f"with one_writer({str(tmp_path / 'ckpt')!r}, 'training'):\n"
        "    print('holding', flush=True)\n    sys.stdin.readline()\n")], env=child_env, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "holding\n"
        assert main(["train", "--config", str(tmp_path / "c.yaml")]) == 2
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"bertviz-lab train: error: {tmp_path / 'ckpt'} is being written by another training run (pid {holder.pid} "
        f"on {os.uname().nodename}); wait for it to end, or choose another folder.")
    assert not [p for p in (tmp_path / "ckpt").iterdir() if p.name.startswith("step-")]
    assert main(["train", "--config", str(tmp_path / "c.yaml")]) == 0  # free again
