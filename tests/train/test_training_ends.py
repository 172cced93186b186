"""How a run ends when something goes wrong: an update that overflows or goes non-finite, checkpoint settings that
cannot work, a full disk while saving, and the metrics file after a crash and resume. Each is one clear error (one
line and a fixed exit code on the CLI), found as early as it can be, with the last good checkpoint kept."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from bertviz_lab.cli import main
from bertviz_lab.train import NonFiniteLossError, TrainConfig, Trainer
from bertviz_lab.train import checkpoint as ckpt
from bertviz_lab.train.metrics import MetricsRecord, append_record, rewrite_records
from bertviz_lab.train.runner import BertRunner
from bertviz_lab.util import paths
from bertviz_lab.util.files import WRITER_LOCK

FIX = "Try a lower learning_rate"


def _config(**overrides) -> TrainConfig:
    values = dict(max_steps=8, batch_size=8, learning_rate=2e-3, progress=False, seed=3)
    return TrainConfig(**{**values, **overrides})


def _weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)


def _run_yaml(tmp_path: Path, **training) -> Path:
    """A tiny synthetic CLI run (2 steps) writing into tmp_path; its YAML file."""
    config = {
        "data": {"corpus": "synthetic", "vocab_size": 200, "sequence_length": 16, "batch_size": 8,
                 "num_train_batches": 4, "num_test_batches": 1, "random_seed": 3},
        "model": {"dim_model": 32, "num_heads": 2, "dim_ff": 64, "num_layers": 1},
        "training": {"learning_rate": 3.0e-3, "device": "cpu", "steps": 2, **training},
        "logging": {"progress": False, "level": "WARNING", "metrics_file": str(tmp_path / "metrics.jsonl")},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


# non-finite updates -------------------------------------------------------------------------------------------
def test_a_learning_rate_that_overflows_adamw_is_a_non_finite_error_naming_the_step(pairs, wordpiece_tokenizer,
                                                                                    make_model):
    train, _ = pairs
    trainer = Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(learning_rate=1e300))
    with pytest.raises(NonFiniteLossError) as caught:
        trainer.fit()
    message = str(caught.value)
    assert message.startswith("training stopped: at step 1 the optimizer's update overflowed (value cannot be "
                              "converted to type float without overflow)"), message
    assert "its update was applied, so the model in memory is no longer usable" in message
    assert "learning_rate (now 1e+300)" in message and "\n" not in message
    assert trainer.step == 0 and trainer.history == [] and trainer.stop_reason == "non-finite loss"


def test_the_cli_prints_an_overflow_as_one_line_and_exits_1(tmp_path, capsys, monkeypatch):
    real_train_config = BertRunner.train_config

    def huge_learning_rate(self, max_steps):  # whatever bounds the YAML schema has, the Trainer must cope
        return TrainConfig(**{**vars(real_train_config(self, max_steps)), "learning_rate": 1e300})

    monkeypatch.setattr(BertRunner, "train_config", huge_learning_rate)
    assert main(["train", "--config", str(_run_yaml(tmp_path))]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bertviz-lab train: training stopped: at step 1 the optimizer's update overflowed")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "metrics.jsonl").exists()


def test_non_finite_gradients_stop_before_the_update_naming_the_parameter(pairs, wordpiece_tokenizer, make_model):
    train, _ = pairs
    model = make_model(len(wordpiece_tokenizer))
    model.cls.seq_relationship.weight.register_hook(lambda grad: torch.full_like(grad, float("inf")))
    before = _weights(model)
    trainer = Trainer(model, train, None, _config())
    with pytest.raises(NonFiniteLossError, match=r"^training stopped: at step 1 the gradients of "
                                                 r"cls\.seq_relationship\.weight became NaN/inf; that step was not "
                                                 r"applied and nothing was saved for it; no checkpoint was written "
                                                 r"\(set TrainConfig\.checkpoint_dir to keep checkpoints\)\. Try"):
        trainer.fit()
    assert _same(_weights(model), before)  # nothing applied


def test_parameters_made_non_finite_by_the_update_are_named(tmp_path, pairs, wordpiece_tokenizer, make_model):
    train, _ = pairs
    root = tmp_path / "ckpt"
    trainer = Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(checkpoint_dir=str(root)))
    trainer.fit(2)

    def update_goes_nan(optimizer, args, kwargs):
        with torch.no_grad():
            trainer.model.bert.embeddings.LayerNorm.bias[0] = float("nan")

    trainer.optimizer.register_step_post_hook(update_goes_nan)
    with pytest.raises(NonFiniteLossError) as caught:
        trainer.fit(1)
    assert str(caught.value).startswith(
        f"training stopped: at step 3 the update made bert.embeddings.LayerNorm.bias NaN/inf; its update was applied, "
        f"so the model in memory is no longer usable and nothing was saved for it; the last good checkpoint is "
        f"{root / 'step-00000002'}. {FIX}")
    assert [p.name for p in ckpt.list_checkpoints(root)] == ["step-00000002"]  # nothing saved at the end of fit


def test_huge_but_finite_parameters_are_not_called_non_finite(pairs, wordpiece_tokenizer, make_model):
    """Their sum overflows float32 (the cheap per-step check); the closer look finds every value finite."""
    train, _ = pairs
    trainer = Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config())

    def update_to_huge_values(optimizer, args, kwargs):
        with torch.no_grad():
            trainer.model.bert.embeddings.LayerNorm.bias[:2] = 3e38

    trainer.optimizer.register_step_post_hook(update_to_huge_values)
    assert [r.step for r in trainer.fit(1)] == [1]
    assert torch.isinf(trainer.model.bert.embeddings.LayerNorm.bias.sum())


def test_the_non_finite_message_says_what_the_config_keeps(tmp_path, pairs, wordpiece_tokenizer, make_model):
    """checkpoint_dir set but nothing saved yet: the message must not ask to set it."""
    train, _ = pairs
    model = make_model(len(wordpiece_tokenizer))
    with torch.no_grad():
        model.bert.embeddings.LayerNorm.weight.fill_(float("inf"))
    root = tmp_path / "ckpt"
    with pytest.raises(NonFiniteLossError) as caught:
        Trainer(model, train, None, _config(checkpoint_dir=str(root), checkpoint_interval=2)).fit()
    message = str(caught.value)
    assert f"the loss became non-finite (train_mlm_loss=nan, train_nsp_loss=nan); that step was not applied and " \
           f"nothing was saved for it; no checkpoint was written yet in {root}. {FIX}" in message
    assert "set TrainConfig.checkpoint_dir" not in message


# checkpoint settings that cannot work ---------------------------------------------------------------------------
def test_checkpoint_interval_without_checkpoint_dir_is_refused_on_creation():
    with pytest.raises(ValueError, match=r"^TrainConfig\.checkpoint_interval=5 needs TrainConfig\.checkpoint_dir \("
                                         r"where the checkpoints go\); set it, or set checkpoint_interval to 0\.$"):
        TrainConfig(checkpoint_interval=5)


@pytest.mark.parametrize("name", ["checkpoint_dir", "metrics_file"])
@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_output_path_is_refused(name, value):
    with pytest.raises(ValueError, match=rf"^TrainConfig\.{name} is an empty path '{value}', which would write into "
                                         r"the current folder; give a path, or None for no "):
        TrainConfig(**{name: value})


def test_output_paths_must_be_strings_and_paths_become_strings(tmp_path, pairs, wordpiece_tokenizer, make_model):
    with pytest.raises(TypeError, match=r"^TrainConfig\.checkpoint_dir must be a path \(str\) or None, got 5\.$"):
        TrainConfig(checkpoint_dir=5)
    config = _config(checkpoint_dir=tmp_path / "ckpt", metrics_file=tmp_path / "m.jsonl")
    assert config.checkpoint_dir == str(tmp_path / "ckpt") and config.metrics_file == str(tmp_path / "m.jsonl")
    train, _ = pairs
    Trainer(make_model(len(wordpiece_tokenizer)), train, None, config).fit(1)
    resumed = Trainer(make_model(len(wordpiece_tokenizer)), train, None, config, resume_from=tmp_path / "ckpt")
    assert resumed.step == 1  # the checkpoint (which holds this config) loads with weights_only


@pytest.mark.parametrize("setting, line", [
    ("training.checkpoint_interval=2", "training.checkpoint_interval=2 needs training.checkpoint_dir (where the "
                                       "checkpoints go); set it, or set checkpoint_interval to 0."),
    ("training.checkpoint_dir=''", "training.checkpoint_dir is an empty path '', which would write into the current "
                                   "folder; give a path, or null."),
    ("logging.metrics_file=''", "logging.metrics_file is an empty path '', which would write into the current "
                                "folder; give a path, or null."),
    ("training.resume_from=''", "training.resume_from is an empty path ''; give a checkpoint folder or a "
                                "checkpoint_dir, or null."),
])
def test_the_cli_refuses_bad_checkpoint_settings_before_step_1(tmp_path, capsys, setting, line):
    config = _run_yaml(tmp_path)
    assert main(["train", "--config", str(config), "--set", setting]) == 2
    assert capsys.readouterr().err == f"bertviz-lab train: error: {line}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.yaml"]  # no step ran


# a full disk while saving ----------------------------------------------------------------------------------------
def _disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _torch_on_a_full_disk(*args, **kwargs):
    raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598")


def _safetensors_on_a_full_disk(*args, **kwargs):
    raise Exception("Error while serializing: I/O error: No space left on device (os error 28)")


@pytest.mark.parametrize("target, failure, free", [
    ("torch.save", _disk_full, None),
    ("torch.save", _torch_on_a_full_disk, 0),  # torch says nothing of the OS error: the free space tells
    ("save_pretrained", _safetensors_on_a_full_disk, None),
])
def test_a_full_disk_while_saving_is_one_error_naming_the_folder_and_keeps_the_last_checkpoint(
        tmp_path, pairs, wordpiece_tokenizer, make_model, monkeypatch, target, failure, free):
    train, _ = pairs
    root = tmp_path / "ckpt"
    trainer = Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(checkpoint_dir=str(root)))
    good = trainer.fit(2) and trainer.last_checkpoint
    good_bytes = {p.name: p.read_bytes() for p in good.iterdir()}
    if target == "torch.save":
        monkeypatch.setattr(ckpt.torch, "save", failure)
    else:
        monkeypatch.setattr(ckpt, "save_pretrained", failure)
    if free is not None:
        monkeypatch.setattr(paths.shutil, "disk_usage", lambda path: SimpleNamespace(total=1 << 30, free=free))
    with pytest.raises(ckpt.CheckpointWriteError) as caught:
        trainer.fit(1)
    assert isinstance(caught.value, OSError) and caught.value.errno == errno.ENOSPC
    assert str(caught.value) == (f"the checkpoint of step 3 could not be written in {root} (no space left on "
                                 f"device); nothing was saved for step 3, and the last checkpoint {good} is intact.")
    assert sorted(set(os.listdir(root)) - {WRITER_LOCK}) == ["latest", good.name]  # no temporary folder left
    assert {p.name: p.read_bytes() for p in good.iterdir()} == good_bytes
    assert ckpt.verify_checkpoint(root) == good


def test_another_library_failure_is_quoted(tmp_path, pairs, wordpiece_tokenizer, make_model, monkeypatch):
    train, _ = pairs
    monkeypatch.setattr(ckpt.torch, "save", _torch_on_a_full_disk)  # with the disk not full
    with pytest.raises(ckpt.CheckpointWriteError) as caught:
        Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(checkpoint_dir=str(tmp_path))).fit(1)
    assert caught.value.errno is None
    assert str(caught.value) == (f"the checkpoint of step 1 could not be written in {tmp_path} ([enforce fail at "
                                 f"inline_container.cc:672] . unexpected pos 704 vs 598); nothing was saved for step "
                                 f"1, and there is no earlier checkpoint in it.")


def test_the_cli_says_a_full_disk_in_one_line_and_exits_1(tmp_path, capsys, monkeypatch):
    root = tmp_path / "ckpt"
    real_save = torch.save

    def full_at_step_2(obj, file, *args, **kwargs):
        if obj["step"] == 2:
            _disk_full()
        return real_save(obj, file, *args, **kwargs)

    monkeypatch.setattr(ckpt.torch, "save", full_at_step_2)
    config = _run_yaml(tmp_path, checkpoint_dir=str(root), checkpoint_interval=1)
    assert main(["train", "--config", str(config)]) == 1
    captured = capsys.readouterr()
    assert captured.err == (f"bertviz-lab train: error: the checkpoint of step 2 could not be written in {root} (no "
                            f"space left on device); nothing was saved for step 2, and the last checkpoint "
                            f"{root / 'step-00000001'} is intact.\n")
    assert "Final Results" not in captured.out
    assert ckpt.verify_checkpoint(root) == root / "step-00000001"


FILE_SIZE_LIMIT = """
import resource, signal, sys
from bertviz_lab.model import BERTConfig, BERTForPreTraining
from bertviz_lab.train import checkpoint as ckpt

resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG instead of a kill
model = BERTForPreTraining(BERTConfig.tiny(vocab_size=2000, hidden_size=32, num_attention_heads=2,
                                           intermediate_size=64, num_hidden_layers=1))
resource.setrlimit(resource.RLIMIT_FSIZE, (16384, resource.RLIM_INFINITY))
try:
    ckpt.save_checkpoint(sys.argv[1], 1, model, {})
except OSError as error:
    print(type(error).__name__, error.errno, error)
"""


def test_a_real_failed_write_of_the_weights_is_named_by_its_os_error(tmp_path, child_env):
    """safetensors reports the OS error inside its text; a file size limit makes the write fail for real."""
    root = tmp_path / "ckpt"
    done = subprocess.run([sys.executable, "-c", FILE_SIZE_LIMIT, str(root)], env=child_env, capture_output=True,
                          text=True, timeout=120)
    assert done.stdout == (f"CheckpointWriteError {errno.EFBIG} the checkpoint of step 1 could not be written in "
                           f"{root} (File too large); nothing was saved for step 1, and there is no earlier "
                           f"checkpoint in it.\n"), done.stderr[-2000:]
    assert os.listdir(root) == []


# the metrics file -------------------------------------------------------------------------------------------
def _metrics(path: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k != "time"} for line in path.read_text().splitlines()]


def test_after_a_crash_the_resume_keeps_each_step_once_in_the_metrics_file(tmp_path, pairs, wordpiece_tokenizer,
                                                                           make_model):
    train, _ = pairs
    straight_file = tmp_path / "straight.jsonl"
    Trainer(make_model(len(wordpiece_tokenizer)), train, None, _config(metrics_file=str(straight_file))).fit()

    metrics, root = tmp_path / "metrics.jsonl", tmp_path / "ckpt"
    config = _config(metrics_file=str(metrics), checkpoint_dir=str(root), checkpoint_interval=2)

    def crash(record):
        if record.step == 5:
            raise RuntimeError("the machine went away")

    with pytest.raises(RuntimeError, match="went away"):
        Trainer(make_model(len(wordpiece_tokenizer)), train, None, config, callbacks=[crash]).fit()
    assert [r["step"] for r in _metrics(metrics)] == [1, 2, 3, 4, 5]  # step 5 is after the last checkpoint (4)

    resumed = Trainer(make_model(len(wordpiece_tokenizer)), train, None, config, resume_from=root)
    assert [r["step"] for r in _metrics(metrics)] == [1, 2, 3, 4]  # rewritten on resume
    resumed.fit()
    assert [r["step"] for r in _metrics(metrics)] == list(range(1, 9))
    assert _metrics(metrics) == _metrics(straight_file)


def _record(step: int) -> MetricsRecord:
    return MetricsRecord(step=step, train_loss=1.0, train_mlm_loss=0.5, train_nsp_loss=0.5, train_mlm_accuracy=0.1,
                         train_nsp_accuracy=0.5, lr=1e-3, grad_norm=1.0, time=0.1 * step)


def test_rewriting_the_metrics_file_keeps_its_mode_and_leaves_pipes_alone(tmp_path):
    path = tmp_path / "m.jsonl"
    for step in (1, 2, 3):
        append_record(path, _record(step))
    path.chmod(0o640)
    rewrite_records(path, [_record(1)])
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1]
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and sorted(os.listdir(tmp_path)) == ["m.jsonl"]
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    rewrite_records(pipe, [_record(1)])  # returns at once: nobody reads the pipe
    assert stat.S_ISFIFO(pipe.stat().st_mode)


def test_a_full_disk_while_logging_metrics_names_the_file():
    with pytest.raises(paths.WriteError) as caught:
        append_record("/dev/full", _record(1))
    assert caught.value.errno == errno.ENOSPC
    assert str(caught.value) == "metrics_file /dev/full could not be written (no space left on device)."
    rewrite_records("/dev/full", [_record(1)])  # a device is never replaced
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
